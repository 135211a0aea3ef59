import { readFileSync, statSync } from 'node:fs'
import { msFromSeconds } from '@brine/config'

/**
 * Who holds a lock file: a pid is not enough, since the kernel reuses pids (after a crash and a
 * reboot, the old master's pid may belong to sshd). The lock also records the process's start
 * time in clock ticks since boot (field 22 of `/proc/<pid>/stat`) and the boot's id, so a live
 * process with the same pid is recognised as someone else. Where there is no /proc, only the pid.
 */
export interface LockOwner {
  pid: number
  /** `/proc/<pid>/stat` start time, clock ticks since boot; absent in a lock of an older Brine or without /proc. */
  start?: string
  /** `/proc/sys/kernel/random/boot_id` when the lock was written. */
  boot?: string
}

/** Start time of `pid` in clock ticks since boot, or undefined (gone, or no /proc). */
export function processStartTicks(pid: number): string | undefined {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  // The fields after comm start at field 3 (state); starttime is field 22.
  const start = fields[22 - 3]
  return start !== undefined && /^\d+$/.test(start) ? start : undefined
}

/** This boot's id, or undefined without /proc. */
export function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined
  } catch {
    return undefined
  }
}

/** The lock text for this process: its pid on the first line (as before), then `start=` and `boot=` lines. */
export function lockText(pid: number = process.pid): string {
  const start = processStartTicks(pid)
  const boot = bootId()
  return `${pid}\n${start === undefined ? '' : `start=${start}\n`}${boot === undefined ? '' : `boot=${boot}\n`}`
}

/** Parses a lock's text; undefined when its first line is not a pid. */
export function parseLockText(text: string): LockOwner | undefined {
  const [first, ...rest] = text.split('\n')
  const pid = Number.parseInt((first ?? '').trim(), 10)
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined
  const owner: LockOwner = { pid }
  for (const line of rest) {
    const [name, value] = [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1).trim()]
    if (name === 'start' && /^\d+$/.test(value)) owner.start = value
    if (name === 'boot' && value !== '') owner.boot = value
  }
  return owner
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' // alive, owned by someone else
  }
}

/** Seconds since the epoch at which this machine booted (`btime` of /proc/stat), or undefined. */
function bootTimeSeconds(): number | undefined {
  try {
    const match = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))
    return match === null ? undefined : Number(match[1])
  } catch {
    return undefined
  }
}

/** Clock ticks per second of /proc's times: USER_HZ, 100 on every Linux architecture Node runs on. */
const USER_HZ = 100

/**
 * Why the lock's owner is gone, or undefined while it still holds the lock:
 * - its pid is not running;
 * - the lock was written in an earlier boot (its boot id differs);
 * - the pid now belongs to a process started at another time (the pid was reused);
 * - for a lock without a start time (an older Brine), a process with that pid started after the
 *   lock file was last written, so it cannot be the writer (a wall clock stepped forward since
 *   could misjudge that case, which is why new locks carry the start time).
 * `lockFile` is the lock's path, for that last check.
 */
export function lockOwnerGone(owner: LockOwner, lockFile: string): string | undefined {
  if (!pidAlive(owner.pid)) return `pid ${owner.pid}, which is not running`
  const boot = bootId()
  if (owner.boot !== undefined && boot !== undefined && owner.boot !== boot) return `pid ${owner.pid} before this machine last booted`
  const start = processStartTicks(owner.pid)
  if (start === undefined) return undefined // no /proc: the pid is all there is to go on
  if (owner.start !== undefined) {
    return owner.start === start
      ? undefined
      : `pid ${owner.pid}, which now belongs to another process (started at tick ${start}, the lock's owner at ${owner.start})`
  }
  const btime = bootTimeSeconds()
  const written = statSync(lockFile, { throwIfNoEntry: false })?.mtimeMs
  if (btime === undefined || written === undefined) return undefined
  // btime is whole seconds, rounded down: the computed start is never later than the real one, so a real owner is never judged gone.
  const startedMs = msFromSeconds(btime + Number(start) / USER_HZ)
  return startedMs > written ? `pid ${owner.pid}, which now belongs to a process started after the lock was written` : undefined
}
