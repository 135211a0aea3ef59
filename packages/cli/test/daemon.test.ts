import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { MasterConfig, MinionConfig } from '@brine/common'
import { deadline, deferred } from '@brine/transport-compliance'
import { runMaster, runMinion, type Daemon } from '../src/commands/daemon.js'
import { memoryIO } from './helpers.js'

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'brine-daemon-'))
})
afterAll(() => rm(dir, { recursive: true, force: true }))

/** A daemon class that records its config and lifecycle. */
function fakeDaemon<C>(options: { failStart?: string } = {}) {
  const record = { opts: undefined as C | undefined, started: deferred(), stopped: 0 }
  class FakeDaemon implements Daemon {
    constructor(opts: C) {
      record.opts = opts
    }
    async start(): Promise<void> {
      if (options.failStart !== undefined) throw new Error(options.failStart)
      record.started.resolve()
    }
    async stop(): Promise<void> {
      record.stopped++
    }
  }
  return { record, load: async () => FakeDaemon }
}

describe('brine-master and brine-minion', () => {
  it('start with flag overrides and stop cleanly when signalled (exit 0)', async () => {
    const { record, load } = fakeDaemon<MasterConfig>()
    const controller = new AbortController()
    const io = memoryIO({ signal: controller.signal })
    const running = runMaster(['-c', dir, '--transport', 'tcp', '--ret-port', '4606', '--set', 'timeout=9'], io, { load })
    await deadline(record.started.promise, 5000, 'the master to start')
    expect(record.opts).toMatchObject({ transport: 'tcp', ret_port: 4606, timeout: 9 })
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    expect(record.stopped).toBe(1)
  })

  it('exits 1 with the ConfigError text on a bad config', async () => {
    await writeFile(join(dir, 'minion'), 'id: web1\nmaster_port: lots\n')
    const io = memoryIO()
    expect(await runMinion(['-c', dir], io, { load: fakeDaemon<MinionConfig>().load })).toBe(1)
    expect(io.err()).toMatch(/^brine-minion: .*minion:2: master_port must be a port number/)
    const badFlag = memoryIO()
    expect(await runMinion(['-c', join(dir, 'none'), '--transport', 'zmq'], badFlag, { load: fakeDaemon<MinionConfig>().load })).toBe(1)
    expect(badFlag.err()).toMatch(/unknown transport 'zmq'.*did you mean 'zeromq'/)
  })

  it('exits 1 when the daemon cannot start, and refuses -d', async () => {
    const { load } = fakeDaemon<MinionConfig>({ failStart: 'address 0.0.0.0:4506 is already in use' })
    const io = memoryIO()
    expect(await runMinion(['-c', join(dir, 'none'), '--id', 'web1'], io, { load })).toBe(1)
    expect(io.err()).toBe('brine-minion: cannot start: address 0.0.0.0:4506 is already in use\n')
    const daemonize = memoryIO()
    expect(await runMaster(['-d'], daemonize, { load: fakeDaemon<MasterConfig>().load })).toBe(64)
    expect(daemonize.err()).toMatch(/-d\/--daemon is not supported/)
  })
})
