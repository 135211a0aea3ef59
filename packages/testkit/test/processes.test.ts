import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'
import { DaemonProcess, ProcessWaitError, cpuTimeMs, killAllProcesses, pidAlive, runProcess } from '../src/index.js'

afterAll(() => killAllProcesses())

const node = (script: string) => spawn(process.execPath, ['-e', script], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })

describe('DaemonProcess', () => {
  it('waits for a line, then stops the process group with SIGTERM', async () => {
    const daemon = new DaemonProcess('sleeper', node("process.stderr.write('ready on 4506\\n'); setInterval(() => {}, 1000)"))
    const match = await daemon.waitForOutput(/ready on (\d+)/, 10_000)
    expect(match[1]).toBe('4506')
    expect(daemon.running).toBe(true)
    expect(await daemon.stop('SIGTERM')).toEqual({ code: null, signal: 'SIGTERM' })
    expect(daemon.running).toBe(false)
  })

  it('fails at once, naming the pattern, when the process exits without printing it', async () => {
    const daemon = new DaemonProcess('quitter', node("process.stderr.write('config error\\n'); process.exit(1)"))
    const waiting = daemon.waitForOutput(/transport zeromq: publish/, 10_000)
    await expect(waiting).rejects.toThrow(/quitter .* exited before printing .*config error/s)
    await expect(waiting).rejects.toBeInstanceOf(ProcessWaitError)
  })

  it('kills children of the daemon too (the whole group)', async () => {
    const daemon = new DaemonProcess(
      'parent',
      node(
        "const c = require('child_process').spawn('sleep', ['30'], {stdio: 'ignore'}); process.stderr.write('child ' + c.pid + '\\n'); setInterval(() => {}, 1000)",
      ),
    )
    const [, pid] = await daemon.waitForOutput(/child (\d+)/, 10_000)
    await daemon.stop()
    // The group was signalled: the grandchild goes too (or becomes a zombie awaiting a reaper, never
    // running). Its exit follows the signal by a moment, so wait for it, bounded.
    const alive = (): boolean => {
      try {
        process.kill(Number(pid), 0)
        return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[2]?.startsWith('Z')
      } catch {
        return false
      }
    }
    for (let tries = 0; alive() && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(alive()).toBe(false)
  })
})

describe('runProcess', () => {
  it('runs a command to completion with all of its output', async () => {
    const result = await runProcess(process.execPath, ['-e', "process.stdout.write('x'.repeat(100000)); process.stderr.write('done'); process.exitCode = 3"], {
      ms: 10_000,
    })
    expect(result).toEqual({ code: 3, signal: null, stdout: 'x'.repeat(100000), stderr: 'done' })
  })

  it('kills a command that outlives its bound, by group, and says what it printed', async () => {
    const error = await runProcess(process.execPath, ['-e', "process.stdout.write('started ' + process.pid); setInterval(() => {}, 1000)"], {
      ms: 500,
      name: 'sleeper',
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ProcessWaitError)
    expect((error as Error).message).toMatch(/^sleeper did not finish within 500 ms\nstdout:\nstarted (\d+)/)
    const pid = Number(/started (\d+)/.exec((error as Error).message)![1])
    // SIGKILL to the group lands at once; its exit follows by a moment, so wait for it, bounded.
    for (let tries = 0; pidAlive(pid) && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(pidAlive(pid)).toBe(false)
  })
})

describe('cpuTimeMs', () => {
  it("counts a process's CPU time as it spins and gives 0 for a pid that is gone", async () => {
    const spinner = node("process.stderr.write('spinning\\n'); const end = Date.now() + 60000; while (Date.now() < end) {}")
    try {
      await new Promise((resolve) => spinner.stderr!.once('data', resolve))
      const before = cpuTimeMs(spinner.pid!)
      // Spin until the process has used 200 ms more CPU (bounded: a loaded machine gives it less than its share).
      let after = before
      for (let tries = 0; after - before < 200 && tries < 600; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        after = cpuTimeMs(spinner.pid!)
      }
      expect(after - before).toBeGreaterThanOrEqual(200)
    } finally {
      spinner.kill('SIGKILL')
    }
    await new Promise((resolve) => spinner.once('exit', resolve))
    for (let tries = 0; pidAlive(spinner.pid!) && tries < 500; tries++) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(cpuTimeMs(spinner.pid!)).toBe(0)
  })
})
