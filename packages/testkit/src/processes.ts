import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { ProcessWaitError } from './errors.js'

export interface RunResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Every process the kit started and that still runs, so an interrupt or a test file's teardown can stop them all. */
const liveProcesses = new Set<ChildProcess>()

function track(child: ChildProcess): void {
  liveProcesses.add(child)
  child.once('exit', () => liveProcesses.delete(child))
}

/** Sends `signal` to a child's whole process group, by its pid (never by name); a group already gone is fine. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // The group is already gone.
  }
}

/** Kills every process the kit started that still runs (by pid, as groups); for signal handlers and test teardown. */
export function killAllProcesses(): void {
  for (const child of liveProcesses) killGroup(child, 'SIGKILL')
}

/** Whether `pid` is a running process (a zombie awaiting its reaper counts as gone). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').startsWith('Z')
  } catch {
    return false
  }
}

/** Resident memory of `pid` from /proc/<pid>/status (`VmRSS`, or `VmHWM` for the peak), in bytes; 0 if gone. */
export function rssBytes(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match === null ? 0 : Number(match[1]) * 1024
  } catch {
    return 0
  }
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ, 100 on Linux). */
const USER_HZ = 100

/**
 * CPU time `pid` has used so far, user + system, every thread (a master's request workers included), from
 * /proc/<pid>/stat, in ms (10 ms resolution); 0 if gone.
 */
export function cpuTimeMs(pid: number): number {
  try {
    // Fields after the command name (which may hold spaces): state is the 1st, utime the 12th, stime the 13th.
    const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ
  } catch {
    return 0
  }
}

/** Starts `command` in its own process group (so it and its children can be stopped together), tracked. */
export function spawnGroup(command: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  track(child)
  return child
}

/**
 * Runs a command to completion, bounded by `ms`: past it the process (and its group) is killed by pid and
 * the promise rejects naming the command and what it printed. Resolves once its output is complete.
 */
export function runProcess(
  command: string,
  args: readonly string[],
  options: { ms: number; cwd?: string; env?: NodeJS.ProcessEnv; name?: string },
): Promise<RunResult> {
  const name = options.name ?? [command, ...args].join(' ')
  return new Promise((resolve, reject) => {
    const child = spawnGroup(command, args, options)
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => {
      killGroup(child)
      reject(
        new ProcessWaitError(`${name} did not finish within ${options.ms} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`, {
          process: name,
          pid: child.pid ?? -1,
          limit: options.ms,
        }),
      )
    }, options.ms)
    child.once('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

/** A daemon started as a real process in its own process group, with what it printed so far. */
export class DaemonProcess {
  stderr = ''
  stdout = ''
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private readonly watchers = new Set<() => void>()

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    if (child.exitCode === null && child.signalCode === null) track(child)
    child.stdout?.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString()
      this.notify()
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString()
      this.notify()
    })
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.notify()
        resolve({ code, signal })
      })
    })
  }

  /** Starts `command` as a daemon in its own process group. */
  static spawn(name: string, command: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): DaemonProcess {
    return new DaemonProcess(name, spawnGroup(command, args, options))
  }

  get pid(): number {
    return this.child.pid ?? -1
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  private notify(): void {
    for (const watcher of this.watchers) watcher()
  }

  /** Waits until stderr+stdout match `pattern`; fails naming the pattern, or at once if the process exits. */
  waitForOutput(pattern: RegExp, ms: number): Promise<RegExpMatchArray> {
    const context = { process: this.name, pid: this.pid, limit: ms, pattern: String(pattern) }
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const match = (this.stderr + this.stdout).match(pattern)
        if (match !== null) finish(() => resolve(match))
        else if (!this.running)
          finish(() => reject(new ProcessWaitError(`${this.name} (pid ${this.pid}) exited before printing ${pattern}:\n${this.stderr}`, context)))
      }
      const timer = setTimeout(
        () => finish(() => reject(new ProcessWaitError(`${this.name} (pid ${this.pid}) did not print ${pattern} within ${ms} ms:\n${this.stderr}`, context))),
        ms,
      )
      const finish = (settle: () => void): void => {
        clearTimeout(timer)
        this.watchers.delete(check)
        settle()
      }
      this.watchers.add(check)
      check()
    })
  }

  /** Sends `signal` to the process group and waits (bounded) for the exit; SIGKILL after `ms`. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', ms = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.running) return this.exited
    killGroup(this.child, signal)
    const timer = setTimeout(() => killGroup(this.child, 'SIGKILL'), ms)
    const result = await this.exited
    clearTimeout(timer)
    return result
  }
}
