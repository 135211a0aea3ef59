import { spawn } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { deadline } from '@brine/testkit'

/** The lock the files that install Debian packages share: dpkg's own lock refuses a second caller, it does not wait. */
const HOST_LOCK = join(tmpdir(), 'brine-e2e-dpkg.lock')

/**
 * Holds an exclusive flock(1) on `path` until the returned release is called, so that test files (each in a worker
 * of its own) take turns at what the lock guards. The lock belongs to a child `flock` process: the kernel drops it
 * when that process ends, so a test run that dies leaves no stale lock behind.
 */
export async function holdFileLock(path: string, ms: number, what: string): Promise<() => void> {
  const holder = spawn('flock', ['--exclusive', path, '--command', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] })
  const locked = new Promise<void>((resolve, reject) => {
    let output = ''
    holder.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes('locked\n')) resolve()
    })
    holder.once('error', reject)
    holder.once('exit', (code) => reject(new Error(`flock ${path} exited with ${String(code)} before taking the lock`)))
  })
  const release = (): void => {
    holder.stdin.end()
    if (holder.exitCode === null) holder.kill()
  }
  try {
    await deadline(locked, ms, `the lock ${path} (${what})`)
  } catch (error) {
    release()
    throw error
  }
  return release
}

/** The lock of the test files that run dpkg (deb, host-modules): they take turns while every other file runs beside them. */
export function holdHostLock(ms: number): Promise<() => void> {
  return holdFileLock(HOST_LOCK, ms, 'another test file installing packages holds it')
}
