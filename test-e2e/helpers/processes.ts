import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface RunResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

const live = new Set<ChildProcess>()

/**
 * Runs a command to completion, bounded by `ms`: past it the process (and its group) is killed by pid and
 * the promise rejects naming the command and what it printed.
 */
export function run(command: string, args: string[], options: { ms: number; cwd?: string; env?: NodeJS.ProcessEnv }): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? REPO_ROOT, env: options.env ?? process.env, detached: true })
    live.add(child)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => {
      killGroup(child)
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${options.ms} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`))
    }, options.ms)
    child.once('error', (error) => {
      clearTimeout(timer)
      live.delete(child)
      reject(error)
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      live.delete(child)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

/** Kills a child's whole process group by its pid (never by name). */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // Already gone.
  }
}

/** Kills every process these helpers started that is still running; for afterAll. */
export function killAll(): void {
  for (const child of live) killGroup(child)
  live.clear()
}
