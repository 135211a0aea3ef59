/**
 * Issue 15's replay and acceptance findings, each reproduced as an attacker on the loopback network would
 * try it — real sockets, a real Master and (for publishes) a real Minion in this process, on both transports
 * — with the clocks injected instead of waited for, and the refusal asserted:
 *
 * - a recorded publish replayed after 101 other jobs, after its expiry, and after the master is gone;
 * - replayed sealed requests: `_grains` (no rollback), `_minion_event` ×100 (no extra event), and `_auth`
 *   after `brine-key -d` with auto_accept (a pending key, not an accepted one);
 * - returns for a job the minion was not sent, for a jid never issued, for jids in the future (no file
 *   opened for 1,100 future days), and the return a minion with stale grains on the master still owes;
 * - a master whose clock runs ahead of the minion's anchor: publishes re-checked, requests re-sealed.
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { buildAuthRequest, MinionBoxes, readRootKey, rootKeyPath } from '@brine/crypt'
import { loadTransport } from '@brine/common'
import { createJidGenerator, tags } from '@brine/protocol'
import { Minion } from '@brine/minion'
import { type Clock, type MinionEvent } from '@brine/link'
import { type PublishServer, type RequestClient } from '@brine/transport'
import { silentLogger, type WireValue } from '@brine/core'
import { deadline } from '@brine/testkit'
import { Recorder } from '../../minion/test/recorder.js'
import { testMinionConfig } from '../../minion/test/stand-in-master.js'
import { UnstorableValueError } from '@brine/returners'
import { Master, MemoryJobStore } from '../src/index.js'
import {
  addressOf,
  cleanups,
  clearClient,
  EventLog,
  FakeMinion,
  type MasterAddress,
  masterConfig,
  runCleanups,
  stopNatsServer,
  tempDir,
  WAIT_MS,
  watchSubscribers,
} from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const
const DAY_MS = 86_400_000

/** One clock for the master and the minions of a test: real time plus a shift the test moves. */
class TestClock implements Clock {
  shift = 0
  readonly wall = (): number => Date.now() + this.shift
  readonly monotonic = (): number => performance.now() + this.shift
}

interface Started {
  master: Master
  events: EventLog
  address: MasterAddress
  client: RequestClient
  dir: string
  /** Publishes as the local client does (root key); the reply's jid and expected minions. */
  publish: (load: Record<string, unknown>) => Promise<{ jid: string; minions: string[] }>
  wheel: (load: Record<string, unknown>) => Promise<unknown>
}

async function start(transport: string, clock: TestClock, overrides: Record<string, unknown> = {}, dir?: string): Promise<Started> {
  dir ??= await tempDir()
  const config = await masterConfig(dir, { transport, auto_accept: true, ...overrides })
  // An in-memory job cache unless the test asks for the real one by name.
  const inMemory = overrides['master_job_cache'] === undefined
  const master = new Master(config, { now: clock.wall, ...(inMemory ? { jobs: new MemoryJobStore() } : {}) })
  cleanups.push(() => master.stop())
  const events = new EventLog(master)
  await master.start()
  const address = addressOf(master)
  const client = await clearClient(transport, address)
  const key = await readRootKey(rootKeyPath(master.opts.cachedir))
  const publish = async (load: Record<string, unknown>) =>
    (await client.send({ enc: 'clear', load: { cmd: 'publish', tgt_type: 'glob', arg: [], kwarg: {}, ret: '', user: 'root', key, ...load } })) as {
      jid: string
      minions: string[]
    }
  const wheel = async (load: Record<string, unknown>) =>
    ((await client.send({ enc: 'clear', load: { cmd: 'wheel', key, ...load } })) as { return: unknown }).return
  return { master, events, address, client, dir, publish, wheel }
}

/** A real minion, configured with only `master` and `master_port`: it learns the publish port from the auth reply. */
async function startMinion(transport: string, started: Started, id: string, clock: TestClock): Promise<{ minion: Minion; recorder: Recorder<MinionEvent> }> {
  const broker = started.address.broker === undefined ? {} : { extra: { nats_servers: started.address.broker.servers } }
  const opts = await testMinionConfig(transport, started.dir, { host: started.address.host, retPort: started.address.retPort }, id, broker)
  expect(opts.publish_port).toBeUndefined()
  const minion = new Minion(opts, { logger: silentLogger, clock })
  cleanups.push(() => minion.stop())
  const recorder = new Recorder<MinionEvent>(minion)
  await minion.start()
  await deadline(minion.authenticated, WAIT_MS, `minion ${id} to authenticate`)
  await started.events.next(tags.minionStart(id))
  return { minion, recorder }
}

/** A subscriber on the publish port anyone can open: the attacker's recorder of publishes. */
async function eavesdrop(
  transport: string,
  address: MasterAddress,
  id: string,
): Promise<{ envelopes: WireValue[]; next: (count: number) => Promise<WireValue> }> {
  const client = (await loadTransport(transport)).createPublishClient({
    host: address.host,
    port: address.publishPort,
    id,
    ...(address.broker === undefined ? {} : { broker: address.broker }),
  })
  cleanups.push(() => client.close())
  await client.start()
  const envelopes: WireValue[] = []
  const waiters: Array<() => void> = []
  void (async () => {
    for await (const envelope of client) {
      envelopes.push(envelope)
      for (const wake of waiters.splice(0)) wake()
    }
  })()
  const next = async (count: number): Promise<WireValue> => {
    while (envelopes.length < count) await deadline(new Promise<void>((resolve) => waiters.push(resolve)), WAIT_MS, `publish #${count} at the eavesdropper`)
    return envelopes[count - 1]
  }
  return { envelopes, next }
}

/** Runs `fun` on `id` through the master and waits for its stored return event. */
async function runJob(started: Started, id: string, fun = 'test.ping', arg: unknown[] = []): Promise<string> {
  const { jid, minions } = await started.publish({ tgt: id, fun, arg })
  expect(minions).toEqual([id])
  await started.events.next(tags.jobReturn(jid, id))
  return jid
}

const returnsOf = (started: Started, jid: string, id: string) => started.events.tagged(tags.jobReturn(jid, id))

/** A master (publish_ttl 60 s) and minion web1 on one clock; a broadcast job web1 ran, as an eavesdropper recorded it. */
async function recordedJob(
  transport: string,
): Promise<{ clock: TestClock; started: Started; recorder: Recorder<MinionEvent>; jid: string; recorded: WireValue }> {
  const clock = new TestClock()
  const started = await start(transport, clock, { publish_ttl: 60 })
  const { recorder } = await startMinion(transport, started, 'web1', clock)
  const spy = await eavesdrop(transport, started.address, 'eavesdropper')
  await watchSubscribers(started.master.endpoints[0]!.publish)(2)
  const { jid } = await started.publish({ tgt: '*', fun: 'test.echo', arg: ['once'] })
  await started.events.next(tags.jobReturn(jid, 'web1'))
  return { clock, started, recorder, jid, recorded: await spy.next(1) }
}

describe.each(TRANSPORTS)('replayed publishes over %s', (transport) => {
  it('a recorded publish replayed after 101 other jobs does not run again, nor once it has expired', async () => {
    const { clock, started, recorder, jid, recorded } = await recordedJob(transport)
    // Salt's minion remembers 100 jids: these push the first one out of any count-based memory.
    for (let index = 0; index < 101; index++) await runJob(started, 'web1')

    await started.master.publisher.publish(recorded)
    await recorder.waitFor('publish-ignored', (event) => event.jid === jid, `the replay of ${jid} to be seen`)
    expect(recorder.of('publish-ignored').filter((event) => event.jid === jid)).toEqual([
      { type: 'publish-ignored', master: expect.any(String), jid, fun: 'test.echo', reason: 'duplicate jid' },
    ])

    // Once its expiry (publish_ttl) has passed in the master's clock, the publish itself is refused.
    clock.shift += 61_000
    await started.master.publisher.publish(recorded)
    const dropped = await recorder.waitFor('publish-dropped', (event) => event.jid === jid, `the expired replay of ${jid} to be dropped`)
    expect(dropped.reason).toMatch(new RegExp(`^job ${jid} refused: expired$`))
    // It ran once: one job-received, one return stored, one event.
    expect(recorder.of('job-received').filter((event) => event.jid === jid)).toHaveLength(1)
    expect(returnsOf(started, jid, 'web1')).toHaveLength(1)
    // And the minion still runs new jobs, on the master's moved clock.
    await runJob(started, 'web1', 'test.echo', ['after'])
  })

  it('a recorded publish replayed after the master is gone does not run, fresh or expired', async () => {
    const { clock, started, recorder, jid, recorded } = await recordedJob(transport)

    // The master goes away; the attacker takes its publish port and waits for the minion to come back to it.
    await started.master.stop()
    const rogue: PublishServer = (await loadTransport(transport)).createPublishServer({
      host: '127.0.0.1',
      port: started.address.publishPort,
      ...(started.address.broker === undefined ? {} : { broker: started.address.broker }),
    })
    cleanups.push(() => rogue.close())
    const subscribed = watchSubscribers(rogue)
    await rogue.start()
    await subscribed(1)

    // Still inside its validity: the minion remembers it ran that jid.
    await rogue.publish(recorded)
    await recorder.waitFor('publish-ignored', (event) => event.jid === jid, 'the fresh replay to be seen')
    // Later, expired: the minion cannot reach the master to check its clock again, so it refuses it.
    clock.shift += 61_000
    await rogue.publish(recorded)
    const dropped = await recorder.waitFor('publish-dropped', (event) => event.jid === jid, 'the expired replay to be dropped')
    expect(dropped.reason).toBe(`job ${jid} refused: the master could not be reached to check it`)
    expect(recorder.of('auth-failed').length).toBeGreaterThanOrEqual(1)
    expect(recorder.of('job-received').filter((event) => event.jid === jid)).toHaveLength(1)
  })

  it('a master whose clock jumped ahead: the minion checks its clock again, runs the job, and re-seals the return it found stale', async () => {
    const minionClock = new TestClock()
    const masterClock = new TestClock()
    const started = await start(transport, masterClock, { publish_ttl: 60 })
    const { recorder } = await startMinion(transport, started, 'web1', minionClock)
    await watchSubscribers(started.master.endpoints[0]!.publish)(1)
    const authenticated = recorder.of('authenticated').length
    // Ten minutes: beyond clock_skew (a publish "from the future") and beyond request_window (a stale request).
    masterClock.shift += 600_000
    const jid = await runJob(started, 'web1', 'test.echo', ['jumped'])
    expect(recorder.of('authenticated').length).toBe(authenticated + 1)
    expect(started.events.tagged(tags.jobReturn(jid, 'web1'))[0]?.data).toMatchObject({ return: 'jumped' })

    // It jumps again while a job runs: the return, stamped with the minion's older anchor, is refused as stale
    // and sealed again after the minion hears the master's clock; stored once.
    const { jid: slow } = await started.publish({ tgt: 'web1', fun: 'test.sleep', arg: [1] })
    await recorder.waitFor('job-received', (event) => event.jid === slow, 'the sleeping job to start')
    const stale = started.master.replayStats().stale
    masterClock.shift += 600_000
    await started.events.next(tags.jobReturn(slow, 'web1'))
    expect(started.master.replayStats().stale).toBeGreaterThan(stale)
    expect(returnsOf(started, slow, 'web1')).toHaveLength(1)
    expect(recorder.of('return-refused')).toEqual([])
  })
})

describe.each(TRANSPORTS)('replayed sealed requests over %s', (transport) => {
  async function acceptedMinions(started: Started, ...ids: string[]): Promise<FakeMinion[]> {
    const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, started.address, join(started.dir, `m-${id}`))))
    for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
    return minions
  }

  it('a replayed _grains does not roll the grains back, inside the window or after it', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock)
    const [web1] = await acceptedMinions(started, 'web1')
    const old = web1!.box!.seal({ cmd: '_grains', id: 'web1', grains: { role: 'db' } }, clock.wall())
    expect(web1!.box!.open(await web1!.request.send(old))).toEqual({ ok: true })
    expect(await web1!.sealed({ cmd: '_grains', id: 'web1', grains: { role: 'web' } })).toEqual({ ok: true })
    expect((await started.publish({ tgt: 'role:web', tgt_type: 'grain', fun: 'test.ping' })).minions).toEqual(['web1'])

    // The recorded bytes again: answered as already handled, applied never.
    expect(web1!.box!.open(await web1!.request.send(old))).toEqual({ ok: true, duplicate: true })
    expect((await started.publish({ tgt: 'role:web', tgt_type: 'grain', fun: 'test.ping' })).minions).toEqual(['web1'])
    expect((await started.publish({ tgt: 'role:db', tgt_type: 'grain', fun: 'test.ping' })).minions).toEqual([])
    // After request_window (300 s) the recording is refused outright.
    clock.shift += 301_000
    const refused = web1!.box!.open(await web1!.request.send(old)) as { ok: boolean; error: { name: string; message: string } }
    expect(refused).toMatchObject({ ok: false, error: { name: 'StaleRequestError' } })
    expect(refused.error.message).toMatch(/^sealed request from minion "web1" sealed at .* outside the window of ±300000 ms \(request_window\)/)
    expect((await started.publish({ tgt: 'role:web', tgt_type: 'grain', fun: 'test.ping' })).minions).toEqual(['web1'])
  })

  it("stamps its sealed answers with the master's clock, which a minion whose anchor lags catches up from", async () => {
    const clock = new TestClock()
    const started = await start(transport, clock)
    const [web1] = await acceptedMinions(started, 'web1')
    // The master's clock an hour ahead of this host's: an answer stamped by the host's clock would be an hour behind it.
    clock.shift += 3_600_000
    const before = clock.wall()
    const answer = web1!.box!.openDetailed(await web1!.request.send(web1!.box!.seal({ cmd: '_minion_event', id: 'web1', events: [] }, clock.wall())))
    expect(answer.load).toMatchObject({ ok: true })
    expect(answer.timestamp).toBeGreaterThanOrEqual(before)
    expect(answer.timestamp).toBeLessThanOrEqual(clock.wall())
  })

  it('100 replays of a _minion_event fire no extra event and add nothing to the nonce memory', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock)
    const [web1] = await acceptedMinions(started, 'web1')
    const tag = 'salt/minion/web1/custom'
    const recorded = web1!.box!.seal({ cmd: '_minion_event', id: 'web1', events: [{ tag, data: { n: 1 } }] }, clock.wall())
    expect(web1!.box!.open(await web1!.request.send(recorded))).toEqual({ ok: true })
    await started.events.next(tag)
    const before = started.master.replayStats()
    for (let replay = 0; replay < 100; replay++) expect(web1!.box!.open(await web1!.request.send(recorded))).toEqual({ ok: true, duplicate: true })
    // A later event from the same minion is fired: the bus is in order, so the replays had their chance before it.
    expect(await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [{ tag: 'salt/minion/web1/after', data: {} }] })).toEqual({ ok: true })
    await started.events.next('salt/minion/web1/after')
    expect(started.events.tagged(tag)).toHaveLength(1)
    const after = started.master.replayStats()
    expect(after.duplicates - before.duplicates).toBe(100)
    expect(after.entries).toBe(before.entries + 1)
  })

  it('a copy of a 2 MB return it holds is answered as already handled without being opened again; stored and fired once', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock)
    const [web1] = await acceptedMinions(started, 'web1')
    const { jid } = await started.publish({ tgt: ['web1'], tgt_type: 'list', fun: 'test.echo' })
    const output = 'y'.repeat(2_000_000)
    const sealed = web1!.box!.seal({ cmd: '_return', id: 'web1', jid, fun: 'test.echo', fun_args: [], return: output, retcode: 0, success: true }, clock.wall())
    expect(web1!.box!.open(await web1!.request.send(sealed))).toEqual({ ok: true })
    await started.events.next(tags.jobReturn(jid, 'web1'))
    const before = started.master.replayStats()
    const opens = vi.spyOn(MinionBoxes.prototype, 'open')
    // A known minion's request is opened without waiting for its key (openNow), or else by open.
    const opensNow = vi.spyOn(MinionBoxes.prototype, 'openNow')
    const opened = (): number => opens.mock.calls.length + opensNow.mock.results.filter((result) => result.value !== undefined).length
    try {
      // The same bytes twice more, as a minion's tries after the first was answered: answered, sealed to it, not opened.
      for (let copy = 0; copy < 2; copy++) expect(web1!.box!.open(await web1!.request.send(sealed))).toEqual({ ok: true, duplicate: true })
      expect(opens).not.toHaveBeenCalled()
      expect(opensNow).not.toHaveBeenCalled()
      // A request it does not hold is opened as always, once.
      expect(await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true })
      expect(opened()).toBe(1)
    } finally {
      opens.mockRestore()
      opensNow.mockRestore()
    }
    expect(started.master.replayStats().duplicates - before.duplicates).toBe(2)
    expect(((await started.master.jobs.getJob(jid))?.returns['web1'] as { return?: unknown } | undefined)?.return).toBe(output)
    expect(started.events.tagged(tags.jobReturn(jid, 'web1'))).toHaveLength(1)
  })

  it('a replayed _auth after brine-key -d with auto_accept leaves the key pending; the minion itself is accepted again', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock, { auto_accept: true })
    const [web1] = await acceptedMinions(started, 'web1')
    // What the attacker recorded: web1's signed _auth, in the clear.
    const recorded = buildAuthRequest('web1', web1!.keys, clock.wall())
    expect(((await started.client.send({ enc: 'clear', load: recorded })) as { ret: boolean }).ret).toBe(true)
    clock.shift += 1000
    expect(await started.wheel({ fun: 'key.delete', match: 'web1' })).toEqual({ minions: ['web1'] })

    const replayed = (await started.client.send({ enc: 'clear', load: recorded })) as { ret: boolean; reason?: string }
    expect(replayed).toMatchObject({ ret: false, reason: 'pending' })
    expect(await started.wheel({ fun: 'key.list_all' })).toEqual({
      minions_pre: ['web1'],
      minions: [],
      minions_rejected: [],
      minions_denied: [],
      local: ['master.key', 'master.pub'],
    })
    expect(await started.master.store.acceptedKeys('web1')).toBeUndefined()
    // However often: still pending, and nothing it sealed opens.
    for (let replay = 0; replay < 5; replay++)
      expect(await started.client.send({ enc: 'clear', load: recorded })).toMatchObject({ ret: false, reason: 'pending' })
    expect((await started.wheel({ fun: 'key.list_all' })) as Record<string, string[]>).toMatchObject({ minions: [] })

    // The minion, signing now (after the deletion, in the master's clock it heard), is a new key under auto_accept: accepted.
    expect(await web1!.auth(clock.wall())).toEqual({ ok: true })
    expect(await started.wheel({ fun: 'key.list_all' })).toEqual({
      minions_pre: [],
      minions: ['web1'],
      minions_rejected: [],
      minions_denied: [],
      local: ['master.key', 'master.pub'],
    })
  })
})

describe.each(TRANSPORTS)('return acceptance over %s', (transport) => {
  it('refuses returns for a job the minion was not sent, a jid never issued and future jids: 1,100 future days open no file', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock, { master_job_cache: 'local_cache' })
    const [web1, web2] = await Promise.all(['web1', 'web2'].map((id) => FakeMinion.start(transport, id, started.address, join(started.dir, `m-${id}`))))
    for (const minion of [web1!, web2!]) expect(await minion.auth()).toEqual({ ok: true })

    const { jid, minions } = await started.publish({ tgt: ['web2'], tgt_type: 'list', fun: 'test.ping' })
    expect(minions).toEqual(['web2'])
    const notSent = await web1!.returnJob(jid)
    expect(notSent).toMatchObject({ ok: false, error: { name: 'ReturnRefusedError' } })
    expect((notSent['error'] as { message: string }).message).toBe(
      `return of minion "web1" for job ${jid} refused (not sent to this minion): the job was published to a list of minions without it`,
    )
    expect(await web2!.returnJob(jid)).toEqual({ ok: true })
    // The attacker's own jids (a generator of its own: the master's is this process's shared one).
    const forge = createJidGenerator()
    const unknown = forge(new Date(clock.wall()))
    expect(await web1!.returnJob(unknown)).toMatchObject({ ok: false, error: { name: 'ReturnRefusedError', context: { reason: 'unknown jid' } } })

    const jobs = join(started.master.opts.cachedir, 'jobs')
    const files = (await readdir(jobs)).sort()
    for (let days = 1; days <= 1100; days++) {
      const future = forge(new Date(clock.wall() + days * DAY_MS))
      const reply = await web1!.returnJob(future)
      expect(reply, `${days} days ahead`).toMatchObject({ ok: false, error: { name: 'ReturnRefusedError', context: { reason: 'future jid' } } })
    }
    expect((await readdir(jobs)).sort()).toEqual(files)
    expect((await started.master.jobs.getJob(jid))?.returns).toEqual({ web2: expect.objectContaining({ id: 'web2' }) })
    expect(await started.master.jobs.getJob(unknown)).toBeUndefined()
    expect(started.events.events.filter((event) => event.tag.includes('/ret/web1'))).toEqual([])
  })

  it('refuses for good a return its job cache cannot store (a NaN in PostgreSQL), so the minion drops it instead of spooling it forever', async () => {
    const clock = new TestClock()
    const dir = await tempDir()
    const config = await masterConfig(dir, { transport, auto_accept: true })
    // What the PostgreSQL cache does with a value jsonb cannot hold.
    const jobs = new (class extends MemoryJobStore {
      override async saveReturn(): Promise<boolean> {
        throw new UnstorableValueError('return.return', 'NaN is not a finite number')
      }
    })()
    const master = new Master(config, { now: clock.wall, jobs })
    cleanups.push(() => master.stop())
    await master.start()
    const address = addressOf(master)
    const client = await clearClient(transport, address)
    const key = await readRootKey(rootKeyPath(master.opts.cachedir))
    const web1 = await FakeMinion.start(transport, 'web1', address, join(dir, 'm-web1'))
    expect(await web1.auth()).toEqual({ ok: true })
    const { jid } = (await client.send({
      enc: 'clear',
      load: { cmd: 'publish', tgt: 'web1', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root', key },
    })) as { jid: string }
    const reply = await web1.returnJob(jid, Number.NaN)
    expect(reply).toMatchObject({ ok: false, error: { name: 'ReturnRefusedError', context: { reason: 'unstorable' } } })
    expect((reply['error'] as { message: string }).message).toContain('cannot store return.return as JSON: NaN is not a finite number')
  })

  it('answers a sealed return over max_frame_entries once unsealed with a sealed FrameLimitError, which the minion drops instead of spooling it forever', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock, { max_frame_entries: 2000 })
    const { recorder } = await startMinion(transport, started, 'web1', clock)
    // 1,500 arguments fit the publish; the return carries them twice (its value and fun_args): over 2,000 entries.
    const arg = Array.from({ length: 1500 }, (_, index) => index)
    const { jid } = await started.publish({ tgt: 'web1', fun: 'test.arg', arg })
    const refused = await recorder.waitFor('return-refused', (event) => event.jid === jid, 'the return refused for good', WAIT_MS)
    expect(refused).toMatchObject({ jid, reason: expect.stringContaining('FrameLimitError') as string })
    expect(returnsOf(started, jid, 'web1')).toEqual([])
    // The minion goes on: its next, ordinary return is stored.
    await runJob(started, 'web1')
  })

  it('keeps the return of a minion whose grains the master had stale, and refuses one accepted only after the publish', async () => {
    const clock = new TestClock()
    const started = await start(transport, clock, { auto_accept: false })
    const [web1, web2] = await Promise.all(['web1', 'web2'].map((id) => FakeMinion.start(transport, id, started.address, join(started.dir, `m-${id}`))))
    for (const minion of [web1!, web2!]) expect(await minion.auth()).toEqual({ ok: false, reason: 'pending' })
    await started.wheel({ fun: 'key.accept', match: ['web1', 'web2'] })
    for (const minion of [web1!, web2!]) expect(await minion.auth()).toEqual({ ok: true })
    // The master still believes web1 is a database; web1 has since become a web server and matches the target itself.
    expect(await web1!.sealed({ cmd: '_grains', id: 'web1', grains: { role: 'db' } })).toEqual({ ok: true })
    expect(await web2!.sealed({ cmd: '_grains', id: 'web2', grains: { role: 'web' } })).toEqual({ ok: true })
    const { jid, minions } = await started.publish({ tgt: 'role:web', tgt_type: 'grain', fun: 'test.ping' })
    expect(minions).toEqual(['web2'])
    expect(await web1!.returnJob(jid)).toEqual({ ok: true })
    await started.events.next(tags.jobReturn(jid, 'web1'))

    // A minion accepted after the publish could not have been sent it.
    clock.shift += 1000
    const [late] = await Promise.all(['late'].map((id) => FakeMinion.start(transport, id, started.address, join(started.dir, `m-${id}`))))
    expect(await late!.auth()).toEqual({ ok: false, reason: 'pending' })
    await started.wheel({ fun: 'key.accept', match: 'late' })
    expect(await late!.auth()).toEqual({ ok: true })
    expect(await late!.returnJob(jid)).toMatchObject({ ok: false, error: { name: 'ReturnRefusedError', context: { reason: 'not sent to this minion' } } })
  })
})
