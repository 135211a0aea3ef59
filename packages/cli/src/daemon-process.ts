import { existsSync, lchownSync, lstatSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { userInfo } from 'node:os'
import { dirname, join } from 'node:path'
import type { Logger } from '@brine/core'
import { formatSource, type ConfigSource } from '@brine/config'
import { PidfileError, UserSwitchError } from './errors.js'

/**
 * What a daemon process does around its Master or Minion, as Salt's daemons do: the pidfile, and running as
 * the config's `user` — the process starts as root, binds its ports and reads its keys, gives the
 * directories it writes to that user, then switches to it for good.
 */

/**
 * The master's heap growth, as V8's `--heap-growing-percent`: after a full collection the heap may grow this much
 * past what survived before V8 collects again. Left to itself V8 picks up to 300 %, and picks it after every
 * collection in a burst of returns, so the burst's garbage set the master's peak RSS (1,000 TCP minions, 200 jobs
 * at once: 790–930 MiB; at 150 %, 580–700 MiB with returns/s in the same spread; README, Benchmarks).
 */
export const MASTER_HEAP_GROWING_PERCENT = 150

/**
 * The V8 flag a daemon of `role` sets once started, or undefined: only the master sets one, and not when its
 * node command line already names `--heap-growing-percent` (an operator's choice, `0` being V8's own).
 */
export function heapGrowthFlag(role: 'master' | 'minion' | 'syndic', execArgv: readonly string[]): string | undefined {
  if (role !== 'master') return undefined
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg))) return undefined
  return `--heap-growing-percent=${MASTER_HEAP_GROWING_PERCENT}`
}

/**
 * What brine-master sets once started so that its request worker threads' isolates take the young generation their
 * pool gives them (`resourceLimits`, @brine/master's WORKER_YOUNG_GENERATION_MB): V8 lets a process-wide
 * `--max-semi-space-size` override a worker's own bound, and the master re-executed itself with one to size its
 * main young generation (bin/daemon-runtime.js). Clearing the flag changes only isolates made after it.
 */
export const WORKER_HEAP_FLAG = '--max-semi-space-size=0'

/** The V8 flag a daemon of `role` sets once started for the worker threads it starts later, or undefined (only the master has them). */
export function workerHeapFlag(role: 'master' | 'minion' | 'syndic'): string | undefined {
  return role === 'master' ? WORKER_HEAP_FLAG : undefined
}

/** A user to switch to. */
export interface RunAs {
  name: string
  uid: number
  gid: number
}

/** A user's uid and primary gid from /etc/passwd, or from NSS (`getent`) for directory users; undefined if unknown. */
export function lookupUser(name: string): { uid: number; gid: number } | undefined {
  const parse = (line: string | undefined): { uid: number; gid: number } | undefined => {
    const fields = line?.split(':')
    if (fields === undefined || fields[0] !== name || fields.length < 4) return undefined
    const uid = Number(fields[2])
    const gid = Number(fields[3])
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined
  }
  try {
    const found = parse(
      readFileSync('/etc/passwd', 'utf8')
        .split('\n')
        .find((line) => line.startsWith(`${name}:`)),
    )
    if (found !== undefined) return found
  } catch {
    // no /etc/passwd: ask NSS
  }
  try {
    // node:child_process is loaded here, not with this module: a daemon that never asks NSS does not hold it.
    const { execFileSync } = process.getBuiltinModule('node:child_process')
    return parse(execFileSync('getent', ['passwd', name], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] }).trim())
  } catch {
    return undefined
  }
}

function currentUserName(): string {
  try {
    return userInfo().username
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`
  }
}

/**
 * The user the daemon must switch to, or undefined when it already runs as `user`. Throws UserSwitchError
 * when the user does not exist, or when the process is another user and not root (Salt refuses to start then).
 */
export function resolveRunAs(user: string, source?: ConfigSource): RunAs | undefined {
  const uid = process.getuid?.()
  if (uid === undefined) return undefined // no users to switch between on this platform
  const where = source === undefined ? '' : ` (user at ${formatSource(source)})`
  const context = { user, file: source?.file, line: source?.line }
  const ids = lookupUser(user)
  if (ids === undefined) throw new UserSwitchError(`user '${user}'${where} does not exist`, context)
  if (ids.uid === uid) return undefined
  if (uid !== 0) {
    throw new UserSwitchError(
      `configured to run as user '${user}'${where} but started as ${currentUserName()} (uid ${uid}), who cannot switch users; start it as root or as ${user}`,
      context,
    )
  }
  return { name: user, ...ids }
}

/** Gives `path` itself to `runAs` (a symbolic link, not its target); returns whether it is a directory. */
export function chownPath(path: string, runAs: RunAs): boolean {
  let stat
  try {
    stat = lstatSync(path)
  } catch {
    return false // not there (yet): nothing to give
  }
  if (stat.uid !== runAs.uid || stat.gid !== runAs.gid) lchownSync(path, runAs.uid, runAs.gid)
  return stat.isDirectory()
}

/** Gives `path` and, for a directory, everything under it to `runAs` (symbolic links are not followed). */
export function chownTree(path: string, runAs: RunAs): void {
  if (chownPath(path, runAs)) for (const entry of readdirSync(path)) chownTree(join(path, entry), runAs)
}

/**
 * Creates `dir` (mode 0700 unless told) and any missing parents (0755, so the user can pass through them, as Salt's
 * verify_env leaves them with umask 022), and returns every directory it created, outermost first.
 */
export function makeDaemonDir(dir: string, mode = 0o700): string[] {
  if (existsSync(dir)) return []
  const created: string[] = []
  const first = mkdirSync(dirname(dir), { recursive: true, mode: 0o755 })
  if (first !== undefined) for (let path = dirname(dir); path.startsWith(first); path = dirname(path)) created.unshift(path)
  mkdirSync(dir, { mode })
  created.push(dir)
  return created
}

/** Switches the whole process (every thread) to `runAs`: supplementary groups, then gid, then uid. */
export function switchUser(runAs: RunAs): void {
  try {
    // In Node since 0.9 but not in @types/node 20.
    ;(process as { initgroups?: (user: string, extraGroup: number) => void }).initgroups?.(runAs.name, runAs.gid)
    process.setgid?.(runAs.gid)
    process.setuid?.(runAs.uid)
  } catch (error) {
    throw new UserSwitchError(
      `cannot switch to user '${runAs.name}' (uid ${runAs.uid}, gid ${runAs.gid}): ${(error as Error).message}`,
      { user: runAs.name },
      { cause: error },
    )
  }
  if (process.getuid?.() !== runAs.uid || process.geteuid?.() !== runAs.uid || process.getgid?.() !== runAs.gid) {
    throw new UserSwitchError(`switching to user '${runAs.name}' left the process at uid ${process.getuid?.()}, gid ${process.getgid?.()}`, {
      user: runAs.name,
    })
  }
}

/** The pid a pidfile holds, or undefined (missing, empty or not a number). */
export function readPidfile(path: string): number | undefined {
  try {
    const text = readFileSync(path, 'utf8').trim()
    return /^\d+$/.test(text) ? Number(text) : undefined
  } catch {
    return undefined
  }
}

/** Whether `pid` is a live process started as `command` (checked in /proc where there is one). */
function runningAs(pid: number, command: string): boolean {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  const cmdline = `/proc/${pid}/cmdline`
  if (!existsSync('/proc/self')) return true
  try {
    return readFileSync(cmdline, 'utf8').includes(command)
  } catch {
    return false
  }
}

/**
 * Writes this process's pid to `path` (creating its directory). Throws PidfileError when the file names
 * another live `command` process — two masters on one config would fight over ports and caches — or cannot
 * be written. A pidfile left by a process that is gone is replaced. Returns the directories it created.
 */
export function writePidfile(path: string, command: string, logger: Logger): string[] {
  const existing = readPidfile(path)
  if (existing !== undefined && existing !== process.pid && runningAs(existing, command)) {
    throw new PidfileError(`${command} is already running as pid ${existing} (pidfile ${path}); stop it first`, { file: path, pid: existing })
  }
  if (existing !== undefined && existing !== process.pid) logger.info(`replacing pidfile ${path} left by pid ${existing}, which is gone`)
  try {
    const created = existsSync(dirname(path)) ? [] : makeDaemonDir(dirname(path), 0o755)
    writeFileSync(path, `${process.pid}\n`, { mode: 0o644 })
    return created
  } catch (error) {
    throw new PidfileError(`cannot write pidfile ${path}: ${(error as Error).message}`, { file: path }, { cause: error })
  }
}

/**
 * Removes the pidfile if it still holds this process's pid. A daemon that switched users may not be allowed
 * to delete it from a root-owned directory; it then empties the file (which it owns) and says so, as Salt
 * logs "PIDfile could not be deleted".
 */
export function removePidfile(path: string, logger: Logger): void {
  if (readPidfile(path) !== process.pid) return
  try {
    unlinkSync(path)
  } catch (error) {
    try {
      writeFileSync(path, '')
      logger.info(`pidfile ${path} could not be deleted (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); emptied it instead`)
    } catch {
      logger.warning(`pidfile ${path} could not be deleted: ${(error as Error).message}`)
    }
  }
}
