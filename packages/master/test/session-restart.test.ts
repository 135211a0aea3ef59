/**
 * The session key across a master restart (docs/security.md, "The session key across a restart"): kept when no
 * minion that held it left `accepted`, so the fleet need not authenticate again; a new one of the next generation
 * otherwise. Minions made of crypt and a transport (FakeMinion), on every transport.
 */
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { createLogger } from '@brine/core'
import { StaleSessionKeyError } from '@brine/crypt'
import type { Master } from '../src/index.js'
import {
  addressOf,
  FakeMinion,
  natsFor,
  runCleanups,
  startMaster,
  startMasterWithMinions,
  stopNatsServer,
  tempDir,
  watchSubscribers,
  type EventLog,
} from './helpers.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

describe.each(TRANSPORTS)('a restarted master over %s', (transport) => {
  /** Stops `master` and starts another on the same dir and ports; `minions` subscribed to it again before it returns. */
  async function restart(
    master: Master,
    dir: string,
    minions: readonly FakeMinion[],
    overrides: Record<string, unknown> = {},
  ): Promise<{ master: Master; events: EventLog }> {
    await master.stop()
    const { opts } = master
    const nats = await natsFor(transport)
    const started = await startMaster(dir, {
      transport,
      ...nats.config,
      auto_accept: opts.auto_accept,
      publish_port: opts.publish_port,
      ret_port: opts.ret_port,
      ...overrides,
    })
    // Each fake minion's publish client reconnects and subscribes again by itself.
    await watchSubscribers(started.master.endpoints[0]!.publish)(minions.length)
    return started
  }

  it('keeps its session key: minions that authenticated before open the next publish without authenticating again', async () => {
    const dir = await tempDir()
    const { master, minions } = await startMasterWithMinions(dir, transport, ['web1', 'web2'])
    const [web1, web2] = minions as [FakeMinion, FakeMinion]
    const before = master.session
    expect(master.sessionStore.holders).toBe(2)
    const { master: again, events } = await restart(master, dir, minions)
    expect(again.sessionStore.reused).toBe(true)
    expect(again.session.gen).toBe(before.gen)
    expect(Buffer.compare(again.session.key, before.key)).toBe(0)

    const job = await publishPing(again)
    for (const [count, minion] of [
      [1, web1],
      [1, web2],
    ] as const) {
      expect(minion.open(await minion.nthPublish(count))).toMatchObject({ jid: job, fun: 'test.ping' })
      // Its box with the master is unchanged too: its return is taken as it is.
      expect(await minion.returnJob(job)).toEqual({ ok: true })
    }
    // A minion checking in after a reconnect learns that its key still holds.
    expect(await web1.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true, gen: before.gen })
    expect(events.tagged('salt/auth')).toEqual([])
    expect(events.tagged(`salt/job/${job}/ret/web1`)).toHaveLength(1)
  })

  it('refuses a sealed request recorded before the restart: the nonce memory went with the old process', async () => {
    const dir = await tempDir()
    const { master, minions } = await startMasterWithMinions(dir, transport, ['web1'])
    const [web1] = minions as [FakeMinion]
    const recorded = web1.box!.seal({ cmd: '_minion_event', id: 'web1', events: [] })
    expect(web1.box!.open(await web1.request.send(recorded))).toMatchObject({ ok: true })
    const { master: again } = await restart(master, dir, minions)
    const replayed = web1.box!.open(await web1.request.send(recorded)) as { ok: boolean; error?: { name?: string; context?: { reason?: string } } }
    expect(replayed).toMatchObject({ ok: false, error: { name: 'StaleRequestError', context: { reason: 'start' } } })
    expect(again.replayStats()).toMatchObject({ stale: 1, applied: 0 })
    // The same minion's fresh request goes through.
    expect(await web1.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true })
  })

  it('makes a new key of the next generation when a minion key was deleted while it was down; that minion cannot read on', async () => {
    const dir = await tempDir()
    const { master, minions } = await startMasterWithMinions(dir, transport, ['web1', 'web2'])
    const [web1, web2] = minions as [FakeMinion, FakeMinion]
    const before = master.session
    await master.stop()
    // The operator removes web2's key by hand while the master is down.
    await rm(join(master.opts.pki_dir, 'minions', 'web2'))
    const { master: again } = await restart(master, dir, minions, { auto_accept: false })
    expect(again.sessionStore.reused).toBe(false)
    expect(again.session.gen).toBe(before.gen + 1)

    const job = await publishPing(again)
    const [held1, held2] = [await web1.nthPublish(1), await web2.nthPublish(1)]
    expect(() => web1.open(held1)).toThrow(StaleSessionKeyError)
    expect(() => web2.open(held2)).toThrow(StaleSessionKeyError)
    // web1 is still accepted: authenticating fetches the new key, which opens the publish it holds.
    expect(await web1.auth()).toEqual({ ok: true })
    expect(web1.open(held1)).toMatchObject({ jid: job })
    // web2 is a new key to this master now: pending, no session key, the publish stays closed to it.
    expect(await web2.auth()).toEqual({ ok: false, reason: 'pending' })
    expect(() => web2.open(held2)).toThrow(StaleSessionKeyError)
  })

  it('a rotation while it runs is written: the next start keeps the rotated key', async () => {
    const dir = await tempDir()
    const { master, minions } = await startMasterWithMinions(dir, transport, ['web1'])
    const rotated = master.rotateSession('test')
    await master.sessionStore.flush()
    const [web1] = minions as [FakeMinion]
    expect(await web1.auth()).toEqual({ ok: true })
    const { master: again } = await restart(master, dir, minions)
    expect(again.sessionStore.reused).toBe(true)
    expect(again.session.gen).toBe(rotated.gen)
    const job = await publishPing(again)
    expect(web1.open(await web1.nthPublish(1))).toMatchObject({ jid: job })
  })
})

describe('a master restarted over a kept session key', () => {
  // Real threads: the built request worker (as a daemon runs it), not the inline pool tests from sources get.
  const workerScript = new URL('../dist/request-worker.js', import.meta.url)

  it("starts its request worker threads and derives its holders' shared keys as it starts when its holders are a herd; a master with no holders does neither", async () => {
    const dir = await tempDir()
    // One holder counts as a herd here (workerStartTasks: 1), so one fake minion stands for the many.
    const { master } = await startMaster(dir, { transport: 'tcp', auto_accept: true, worker_threads: 2 }, { workerScript, workerStartTasks: 1 })
    expect(master.requestWorkers()).toEqual({ running: 0, started: 0, retired: 0, tasks: {} })
    const web1 = await FakeMinion.start('tcp', 'web1', addressOf(master), join(dir, 'm-web1'))
    expect(await web1.auth()).toEqual({ ok: true })
    expect(master.sessionStore.holders).toBe(1)
    await master.stop()
    const { opts } = master
    const { master: again } = await startMaster(
      dir,
      { transport: 'tcp', auto_accept: true, worker_threads: 2, publish_port: opts.publish_port, ret_port: opts.ret_port },
      { workerScript, workerStartTasks: 1 },
    )
    expect(again.sessionStore.reused).toBe(true)
    expect(again.requestWorkers()).toMatchObject({ running: 2, started: 2 })
    // The holders' shared keys are derived in a batch as the master starts, not one task per minion's first request.
    await vi.waitFor(() => expect(again.requestWorkers()?.tasks['box-shared-keys']).toBe(1), { timeout: 10_000, interval: 20 })
    expect(await web1.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true })
    expect(again.requestWorkers()).toMatchObject({ running: 2, started: 2 })
    expect(again.requestWorkers()?.tasks['box-shared-key']).toBeUndefined()
  })

  it("derives its holders' shared keys on its own thread when their batches are fewer than a herd of tasks: no thread boots, and a check-in derives nothing", async () => {
    const dir = await tempDir()
    // Two tasks make a herd here, and two holders are as many minions; their keys are one batch, one task (as a thousand
    // holders are 8 tasks of the default 32).
    const { master } = await startMaster(dir, { transport: 'tcp', auto_accept: true, worker_threads: 2 }, { workerScript, workerStartTasks: 2 })
    const holders = await Promise.all(['web1', 'web2'].map((id) => FakeMinion.start('tcp', id, addressOf(master), join(dir, `m-${id}`))))
    for (const minion of holders) expect(await minion.auth()).toEqual({ ok: true })
    expect(master.sessionStore.holders).toBe(2)
    await master.stop()
    const { opts } = master
    const lines: string[] = []
    const logger = createLogger({ level: 'info', write: (line) => lines.push(line) })
    const { master: again } = await startMaster(
      dir,
      { transport: 'tcp', auto_accept: true, worker_threads: 2, publish_port: opts.publish_port, ret_port: opts.ret_port },
      { workerScript, workerStartTasks: 2, logger },
    )
    expect(again.sessionStore.reused).toBe(true)
    expect(again.requestWorkers()).toMatchObject({ running: 0, started: 0 })
    for (const minion of holders) expect(await minion.sealed({ cmd: '_minion_event', id: minion.id, events: [] })).toMatchObject({ ok: true })
    expect(again.requestWorkers()).toEqual({ running: 0, started: 0, retired: 0, tasks: {} })
    await again.stop()
    // The stop line counts the tasks run on the main thread: the holders' one batch, and no shared key for a check-in alone.
    const work = lines.find((line) => line.includes('worker_threads:') && line.includes('task(s) ran'))
    expect(work).toContain('0 task(s) ran on 0 of 2 worker threads; 1 on the main thread before they were warranted (box-shared-keys 1)')
  })

  it('leaves its threads unstarted when its holders are fewer than a herd: a few minions coming back cost no thread boot', async () => {
    const dir = await tempDir()
    const { master } = await startMaster(dir, { transport: 'tcp', auto_accept: true, worker_threads: 2 }, { workerScript })
    const web1 = await FakeMinion.start('tcp', 'web1', addressOf(master), join(dir, 'm-web1'))
    expect(await web1.auth()).toEqual({ ok: true })
    await master.stop()
    const { opts } = master
    const { master: again } = await startMaster(
      dir,
      { transport: 'tcp', auto_accept: true, worker_threads: 2, publish_port: opts.publish_port, ret_port: opts.ret_port },
      { workerScript },
    )
    expect(again.sessionStore.reused).toBe(true)
    expect(again.sessionStore.holders).toBe(1)
    expect(await web1.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true })
    expect(again.requestWorkers()).toMatchObject({ running: 0, started: 0 })
  })
})

/** Publishes test.ping to every minion through the master's service, as root; the jid. */
async function publishPing(master: Master): Promise<string> {
  const caller = await master.service.authorize({ cmd: 'publish', key: master.rootKey })
  const { jid } = await master.service.publish(caller, { tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' })
  return jid
}
