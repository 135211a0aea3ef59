import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { DaemonProcess } from '../src/fleet.js'

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
    await expect(daemon.waitForOutput(/transport zeromq: publish/, 10_000)).rejects.toThrow(/quitter .* exited before printing .*config error/s)
  })

  it('kills children of the daemon too (the whole group)', async () => {
    const daemon = new DaemonProcess(
      'parent',
      node("const c = require('child_process').spawn('sleep', ['30'], {stdio: 'ignore'}); process.stderr.write('child ' + c.pid + '\\n'); setInterval(() => {}, 1000)"),
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

