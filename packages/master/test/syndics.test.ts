import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { createJidGenerator, tags } from '@brine/protocol'
import type { ReturnLoad } from '@brine/protocol'
import { UnstorableValueError } from '@brine/returners'
import { MemoryJobStore, rootCaller, type Master } from '../src/index.js'
import { addressOf, type EventLog, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterAll(stopNatsServer)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

afterEach(runCleanups)

const ret = (value: unknown) => ({ return: value, retcode: 0, success: true, fun_args: [] })
const job = { tgt: 'below*', tgt_type: 'glob' as const, fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' }

/** The operator's `brine-key --accept-syndic ID -y`, through the same wheel call. */
async function acceptSyndic(master: Master, id: string): Promise<void> {
  expect((await master.service.wheel(rootCaller(), { fun: 'key.accept_syndic', match: id })).return).toEqual({ syndics: [id] })
}

/** Syndic `syn1` (a FakeMinion) authenticated to `master` and announced with its start event. */
async function attachSyndic(transport: (typeof TRANSPORTS)[number], dir: string, master: Master, events: EventLog): Promise<FakeMinion> {
  const address = addressOf(master)
  const syndic = await FakeMinion.start(transport, 'syn1', address, join(dir, 'm-syn1'))
  expect(await syndic.auth()).toEqual({ ok: true })
  await acceptSyndic(master, 'syn1')
  expect(await syndic.sealed({ cmd: '_syndic_event', id: 'syn1', events: [{ tag: tags.syndicStart('syn1'), data: { id: 'syn1' } }] })).toEqual({ ok: true })
  await events.next(tags.syndicStart('syn1'))
  return syndic
}

describe.each(TRANSPORTS)('a master of masters (order_masters) over %s', (transport) => {
  it('publishes to its syndic when no minion of its own matches, never expects the syndic itself, and names the syndic with the minions it announced before', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true, order_masters: true })
    const address = addressOf(master)
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const [web1, syndic] = await Promise.all(['web1', 'syn1'].map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
    await subscribers(2)
    expect(await web1!.auth()).toEqual({ ok: true })
    expect(await syndic!.auth()).toEqual({ ok: true })
    await acceptSyndic(master, 'syn1')
    expect(await syndic!.sealed({ cmd: '_syndic_event', id: 'syn1', events: [{ tag: tags.syndicStart('syn1'), data: { id: 'syn1' } }] })).toEqual({ ok: true })
    await events.next(tags.syndicStart('syn1'))

    const below = await master.service.publish(rootCaller(), job)
    expect(below).toMatchObject({ minions: [], syndics: { syn1: [] } })
    expect(syndic!.open(await syndic!.nthPublish(1))).toMatchObject({ jid: below.jid, tgt: 'below*' })
    // The syndic's key is accepted, but it is not a minion: '*' expects web1 only.
    expect(await master.service.publish(rootCaller(), { ...job, tgt: '*' })).toMatchObject({ minions: ['web1'], syndics: { syn1: [] } })

    const refused = await syndic!.sealed({
      cmd: '_syndic_return',
      id: 'syn1',
      jobs: [
        {
          jid: below.jid,
          fun: 'test.ping',
          minions: ['below1', 'below2', 'web1', 'other'],
          pending: ['low'],
          returns: { below1: ret(true), below3: ret(true), web1: ret('forged') },
        },
      ],
    })
    expect(refused['ok']).toBe(true)
    expect(refused['refused']).toEqual(
      expect.arrayContaining([
        { jid: below.jid, id: 'web1', reason: expect.stringContaining('"web1" is a minion of this master') as string },
        { jid: below.jid, id: 'other', reason: expect.stringContaining('not selected by the target of job "below*" (glob)') as string },
        { jid: below.jid, id: 'below3', reason: `syndic syn1 did not announce minion "below3" for job ${below.jid}` },
        { jid: below.jid, id: 'web1', reason: `syndic syn1 did not announce minion "web1" for job ${below.jid}` },
      ]),
    )
    expect((refused['refused'] as unknown[]).length).toBe(4)
    expect((await events.next(tags.syndicJobNew('syn1', below.jid))).data).toMatchObject({
      jid: below.jid,
      minions: ['below1', 'below2'],
      syndic_pending: ['low'],
    })
    expect((await events.next(tags.jobReturn(below.jid, 'below1'))).data).toMatchObject({ id: 'below1', jid: below.jid, return: true, fun: 'test.ping' })

    // A batch of returns alone (no `pending`: it beat the lower syndic's announcement up) leaves 'low' pending,
    // so no announcement event says otherwise and a client keeps waiting for low's minions.
    expect(
      await syndic!.sealed({ cmd: '_syndic_return', id: 'syn1', jobs: [{ jid: below.jid, minions: ['below2'], returns: { below2: ret(true) } }] }),
    ).toEqual({ ok: true })
    await events.next(tags.jobReturn(below.jid, 'below2'))

    // The same return again (a batch sent twice) is stored once and fires nothing; the subtree completes.
    expect(
      await syndic!.sealed({
        cmd: '_syndic_return',
        id: 'syn1',
        jobs: [{ jid: below.jid, minions: ['below1', 'below9'], pending: [], returns: { below1: ret(true), below9: ret(true) } }],
      }),
    ).toEqual({ ok: true })
    await events.next(tags.jobReturn(below.jid, 'below9'))
    expect(events.tagged(tags.jobReturn(below.jid, 'below1'))).toHaveLength(1)
    expect(events.tagged(tags.jobReturn(below.jid, 'below3'))).toHaveLength(0)
    expect(events.tagged(tags.jobReturn(below.jid, 'web1'))).toHaveLength(0)
    expect(events.tagged(tags.syndicJobNew('syn1', below.jid)).map((event) => [event.data['minions'], event.data['syndic_pending']])).toEqual([
      [['below1', 'below2'], ['low']],
      [['below9'], []],
    ])
    expect(Object.keys((await master.jobs.getJob(below.jid))!.returns).sort()).toEqual(['below1', 'below2', 'below9'])

    // A job this master never published is refused whole.
    const unknown = await syndic!.sealed({ cmd: '_syndic_return', id: 'syn1', jobs: [{ jid: '20200101000000000000', minions: ['x'], returns: { x: ret(1) } }] })
    expect(unknown['refused']).toEqual([
      { jid: '20200101000000000000', id: 'x', reason: 'job 20200101000000000000 was not published by this master' },
      { jid: '20200101000000000000', id: 'x', reason: 'job 20200101000000000000 was not published by this master' },
    ])

    // What a syndic announced is remembered: a later target names the candidates behind it.
    expect(await master.service.publish(rootCaller(), { ...job, tgt: 'below1' })).toMatchObject({ minions: [], syndics: { syn1: ['below1'] } })

    // Its master's other events go up once as syndic/<id>/<tag>; a lower syndic's stay as they are; job events never.
    await syndic!.sealed({
      cmd: '_syndic_event',
      id: 'syn1',
      events: [
        { tag: 'salt/auth', data: { id: 'x' } },
        { tag: 'syndic/low/salt/minion/low1/start', data: {} },
        { tag: 'salt/job/20200101000000000000/ret/x', data: {} },
        { tag: 'syndic/low/salt/job/20200101000000000000/new', data: { minions: ['x'] } },
      ],
    })
    await events.next('syndic/syn1/salt/auth')
    await events.next('syndic/low/salt/minion/low1/start')
    expect(events.events.filter((event) => event.tag.includes('20200101000000000000'))).toEqual([])

    await master.stop()
    expect(JSON.parse(await readFile(join(master.opts.cachedir, 'syndics', 'syn1'), 'utf8'))).toEqual({ minions: ['below1', 'below2', 'below9'] })
  })

  it('applies a replayed _syndic_return or _syndic_event once: the copy is answered "already handled", nothing stored or fired again', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true, order_masters: true })
    const syndic = await attachSyndic(transport, dir, master, events)
    const published = await master.service.publish(rootCaller(), job)
    expect(published).toMatchObject({ minions: [], syndics: { syn1: [] } })

    // An attacker on the wire records the sealed batch and sends the very bytes again, twice.
    const recorded = syndic.box!.seal({
      cmd: '_syndic_return',
      id: 'syn1',
      jobs: [{ jid: published.jid, fun: 'test.ping', minions: ['below1'], pending: [], returns: { below1: ret(true) } }],
    })
    expect(syndic.box!.open(await syndic.request.send(recorded))).toEqual({ ok: true })
    await events.next(tags.jobReturn(published.jid, 'below1'))
    for (let replay = 0; replay < 2; replay++) expect(syndic.box!.open(await syndic.request.send(recorded))).toEqual({ ok: true, duplicate: true })
    const event = syndic.box!.seal({ cmd: '_syndic_event', id: 'syn1', events: [{ tag: 'salt/auth', data: { id: 'x' } }] })
    expect(syndic.box!.open(await syndic.request.send(event))).toEqual({ ok: true })
    expect(syndic.box!.open(await syndic.request.send(event))).toEqual({ ok: true, duplicate: true })
    await events.next('syndic/syn1/salt/auth')

    // A fresh request after them: anything the replays caused would have been fired before its event.
    expect(await syndic.sealed({ cmd: '_syndic_event', id: 'syn1', events: [{ tag: 'salt/barrier', data: {} }] })).toEqual({ ok: true })
    await events.next('syndic/syn1/salt/barrier')
    expect(events.tagged(tags.jobReturn(published.jid, 'below1'))).toHaveLength(1)
    expect(events.tagged(tags.syndicJobNew('syn1', published.jid))).toHaveLength(1)
    expect(events.tagged('syndic/syn1/salt/auth')).toHaveLength(1)
    expect(master.replayStats().duplicates).toBe(3)
    expect(Object.keys((await master.jobs.getJob(published.jid))!.returns)).toEqual(['below1'])
  })

  it('refuses alone a return of a batch its job cache cannot store (a NaN in PostgreSQL) and stores the rest', async () => {
    const dir = await tempDir()
    // What the PostgreSQL cache does with a value jsonb cannot hold.
    const jobs = new (class extends MemoryJobStore {
      override async saveReturn(jid: string, id: string, load: ReturnLoad): Promise<boolean> {
        if (typeof load.return === 'number' && Number.isNaN(load.return)) throw new UnstorableValueError('return.return', 'NaN is not a finite number')
        return super.saveReturn(jid, id, load)
      }
    })()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true, order_masters: true }, { jobs })
    const syndic = await attachSyndic(transport, dir, master, events)
    const published = await master.service.publish(rootCaller(), job)
    const reply = await syndic.sealed({
      cmd: '_syndic_return',
      id: 'syn1',
      jobs: [{ jid: published.jid, fun: 'test.ping', minions: ['below1', 'below2'], pending: [], returns: { below1: ret(Number.NaN), below2: ret(true) } }],
    })
    expect(reply['ok']).toBe(true)
    expect(reply['refused']).toEqual([
      {
        jid: published.jid,
        id: 'below1',
        reason: expect.stringContaining('refused (unstorable): cannot store return.return as JSON: NaN is not a finite number') as string,
      },
    ])
    await events.next(tags.jobReturn(published.jid, 'below2'))
    expect(Object.keys((await master.jobs.getJob(published.jid))!.returns)).toEqual(['below2'])
  })

  it('refuses announcements and returns for a jid dated beyond clock_skew, before looking it up', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true, order_masters: true, clock_skew: 60 })
    const syndic = await attachSyndic(transport, dir, master, events)
    const future = createJidGenerator()(new Date(Date.now() + 3_600_000))
    const reply = await syndic.sealed({ cmd: '_syndic_return', id: 'syn1', jobs: [{ jid: future, minions: ['below1'], returns: { below1: ret(true) } }] })
    expect(reply['refused']).toEqual([
      {
        jid: future,
        id: 'below1',
        reason: expect.stringMatching(new RegExp(`^job ${future} is dated .*, more than 60000 ms \\(clock_skew\\) ahead of the master's clock`)) as string,
      },
      { jid: future, id: 'below1', reason: expect.stringMatching(/clock_skew/) as string },
    ])
    expect(events.events.filter((event) => event.tag.includes(future))).toEqual([])
    expect(await master.jobs.getJob(future)).toBeUndefined()
  })

  it('without order_masters and without syndics, a target that matches nobody publishes nothing', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: true })
    const reply = await master.service.publish(rootCaller(), job)
    expect(reply).toEqual({ jid: reply.jid, minions: [] })
    expect(events.events.filter((event) => event.tag.startsWith('salt/job/'))).toEqual([])
  })
})
