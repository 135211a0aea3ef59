import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { tags } from '@brine/protocol'
import { rootCaller, type Master } from '../src/index.js'
import { addressOf, type EventLog, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterAll(stopNatsServer)

/**
 * Issue 27, finding 1: only keys an operator accepted as syndics' may speak for minions, each minion is
 * pinned to the syndic that first answered for it, and what a syndic may announce is bounded. Each case
 * plays the attack a peer on the loopback network played, and asserts the refusal and what was stored.
 */

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

afterEach(runCleanups)

const ret = (value: unknown) => ({ return: value, retcode: 0, success: true, fun_args: [] })
const everyone = { tgt: '*', tgt_type: 'glob' as const, fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' }

async function acceptSyndic(master: Master, id: string): Promise<void> {
  expect((await master.service.wheel(rootCaller(), { fun: 'key.accept_syndic', match: id })).return).toEqual({ syndics: [id] })
}

/** Starts a top master (order_masters, auto_accept) and authenticates each of `ids` to it. */
async function topWith(
  transport: string,
  ids: readonly string[],
  overrides: Record<string, unknown> = {},
): Promise<{ master: Master; events: EventLog; peers: Record<string, FakeMinion> }> {
  const dir = await tempDir()
  const { master, events } = await startMaster(dir, { transport, auto_accept: true, order_masters: true, ...overrides })
  const address = addressOf(master)
  const subscribers = watchSubscribers(master.endpoints[0]!.publish)
  const started = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
  await subscribers(ids.length)
  const peers: Record<string, FakeMinion> = {}
  for (const peer of started) {
    expect(await peer.auth()).toEqual({ ok: true })
    peers[peer.id] = peer
  }
  return { master, events, peers }
}

const refusalName = (reply: Record<string, unknown>): unknown => (reply['error'] as { name?: unknown } | undefined)?.name

const runner = async (master: Master, fun: string, kwarg: Record<string, unknown> = {}): Promise<unknown> =>
  (await master.service.runner(rootCaller(), { fun, kwarg })).return

describe.each(TRANSPORTS)('syndic trust over %s', (transport) => {
  it("(a, c) refuses an ordinary minion's _syndic_return and _syndic_event: nothing stored, fired or remembered, later jobs unchanged", async () => {
    const { master, events, peers } = await topWith(transport, ['web1'])
    const web1 = peers['web1']!
    const published = await master.service.publish(rootCaller(), everyone)
    expect(published).toMatchObject({ minions: ['web1'], syndics: {} })

    // (a) It announces a minion that does not exist, and returns for it.
    const forged = await web1.sealed({
      cmd: '_syndic_return',
      id: 'web1',
      jobs: [{ jid: published.jid, fun: 'test.ping', minions: ['ghost'], pending: [], returns: { ghost: ret('FORGED') } }],
    })
    expect(forged['ok']).toBe(false)
    expect(refusalName(forged)).toBe('SyndicNotAcceptedError')
    expect((forged['error'] as { message: string }).message).toContain('brine-key --accept-syndic web1')
    // (c) An empty batch, and a syndic event.
    expect(refusalName(await web1.sealed({ cmd: '_syndic_return', id: 'web1', jobs: [] }))).toBe('SyndicNotAcceptedError')
    expect(refusalName(await web1.sealed({ cmd: '_syndic_event', id: 'web1', events: [{ tag: tags.syndicStart('web1'), data: {} }] }))).toBe(
      'SyndicNotAcceptedError',
    )

    // Its own return is the barrier: anything the refused requests had caused would have been fired before it.
    expect(await web1.returnJob(published.jid)).toEqual({ ok: true })
    await events.next(tags.jobReturn(published.jid, 'web1'))
    expect(events.events.filter((event) => event.tag.includes('ghost') || event.tag.startsWith('syndic/') || event.tag === tags.syndicStart('web1'))).toEqual(
      [],
    )
    expect(Object.keys((await master.jobs.getJob(published.jid))!.returns)).toEqual(['web1'])

    // Later jobs: web1 is still a minion that is expected, and no syndic is waited for.
    expect(await master.service.publish(rootCaller(), everyone)).toMatchObject({ minions: ['web1'], syndics: {} })
    expect(await runner(master, 'syndics.list')).toEqual({})
    await master.service.settle()
    await expect(stat(join(master.opts.cachedir, 'syndics', 'web1'))).rejects.toMatchObject({ code: 'ENOENT' })
  })

  it('(b) refuses a minion answering for a real minion behind a real syndic; the real return is stored', async () => {
    const { master, events, peers } = await topWith(transport, ['web1', 'syn1'])
    await acceptSyndic(master, 'syn1')
    const { syn1, web1 } = peers as Record<string, FakeMinion>
    expect(await syn1!.sealed({ cmd: '_syndic_event', id: 'syn1', events: [{ tag: tags.syndicStart('syn1'), data: { id: 'syn1' } }] })).toEqual({ ok: true })
    const published = await master.service.publish(rootCaller(), everyone)
    expect(published).toMatchObject({ minions: ['web1'], syndics: { syn1: [] } })

    // The forged answer comes first, before the real one is up.
    const forged = await web1!.sealed({
      cmd: '_syndic_return',
      id: 'web1',
      jobs: [{ jid: published.jid, minions: ['below1'], pending: [], returns: { below1: ret('FORGED') } }],
    })
    expect(refusalName(forged)).toBe('SyndicNotAcceptedError')
    expect(
      await syn1!.sealed({
        cmd: '_syndic_return',
        id: 'syn1',
        jobs: [{ jid: published.jid, fun: 'test.ping', minions: ['below1'], pending: [], returns: { below1: ret(true) } }],
      }),
    ).toEqual({ ok: true })
    expect((await events.next(tags.jobReturn(published.jid, 'below1'))).data).toMatchObject({ id: 'below1', return: true })
    expect(events.tagged(tags.jobReturn(published.jid, 'below1'))).toHaveLength(1)
    expect((await master.jobs.getJob(published.jid))!.returns['below1']).toMatchObject({ return: true })
    // The job's syndic set is the real syndic only, now and for later jobs.
    expect(await master.service.publish(rootCaller(), everyone)).toMatchObject({ minions: ['web1'], syndics: { syn1: ['below1'] } })
  })

  it('(d) pins each minion to the syndic that first answered for it until an operator moves it', async () => {
    const { master, events, peers } = await topWith(transport, ['syn1', 'syn2'])
    await acceptSyndic(master, 'syn1')
    await acceptSyndic(master, 'syn2')
    const { syn1, syn2 } = peers as Record<string, FakeMinion>
    const answer = (syndic: FakeMinion, jid: string, value: unknown) =>
      syndic.sealed({
        cmd: '_syndic_return',
        id: syndic.id,
        jobs: [{ jid, fun: 'test.ping', minions: ['below1'], pending: [], returns: { below1: ret(value) } }],
      })

    const first = await master.service.publish(rootCaller(), everyone)
    expect(await answer(syn1!, first.jid, 'from syn1')).toEqual({ ok: true })
    await events.next(tags.jobReturn(first.jid, 'below1'))

    // A second syndic answering for below1 (a compromised syndic lying about another's subtree) is refused.
    const second = await master.service.publish(rootCaller(), everyone)
    const stolen = await answer(syn2!, second.jid, 'from syn2')
    expect(stolen['refused']).toEqual([
      { jid: second.jid, id: 'below1', reason: 'minion "below1" is pinned to syndic syn1, not syn2 (an operator moves it: brine-run syndics.move)' },
      { jid: second.jid, id: 'below1', reason: `syndic syn2 did not announce minion "below1" for job ${second.jid}` },
    ])
    expect(await answer(syn1!, second.jid, 'from syn1')).toEqual({ ok: true })
    expect((await events.next(tags.jobReturn(second.jid, 'below1'))).data).toMatchObject({ return: 'from syn1' })
    expect(events.tagged(tags.syndicJobNew('syn2', second.jid))).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ minions: [] }) as unknown }),
    ])

    // The operator moves it: syn2 may answer for it from now on, syn1 may not.
    expect(await runner(master, 'syndics.move', { minions: 'below1', syndic: 'syn2' })).toEqual({ below1: { from: 'syn1', to: 'syn2' } })
    expect(await runner(master, 'syndics.list')).toEqual({ syn1: { syndic_key: true, minions: [] }, syn2: { syndic_key: true, minions: ['below1'] } })
    const third = await master.service.publish(rootCaller(), everyone)
    expect(third).toMatchObject({ syndics: { syn1: [], syn2: ['below1'] } })
    expect((await answer(syn1!, third.jid, 'from syn1'))['refused']).toContainEqual({
      jid: third.jid,
      id: 'below1',
      reason: 'minion "below1" is pinned to syndic syn2, not syn1 (an operator moves it: brine-run syndics.move)',
    })
    expect(await answer(syn2!, third.jid, 'from syn2')).toEqual({ ok: true })
    expect((await events.next(tags.jobReturn(third.jid, 'below1'))).data).toMatchObject({ return: 'from syn2' })
    expect(events.tagged(tags.jobReturn(third.jid, 'below1'))).toHaveLength(1)

    // A move to a key that is not a syndic's is refused (Salt's runner failure text), and changes nothing.
    expect(await runner(master, 'syndics.move', { minions: 'below1', syndic: 'nobody' })).toMatch(
      /^Exception occurred in runner syndics\.move: MalformedRequestError: .*"nobody" is not accepted as a syndic/,
    )
    expect(await runner(master, 'syndics.list')).toEqual({ syn1: { syndic_key: true, minions: [] }, syn2: { syndic_key: true, minions: ['below1'] } })
    // The pins survive a restart of the registry's files.
    await master.stop()
    const { SyndicRegistry } = await import('../src/syndics.js')
    const registry = new SyndicRegistry(master.opts.cachedir)
    await registry.load()
    expect([registry.ownerOf('below1'), registry.minionsOf('syn1')]).toEqual(['syn2', []])
  })

  it('(d) bounds a syndic by syndic_max_minions: a bigger batch is refused whole, and it never answers for more in all', async () => {
    const { master, events, peers } = await topWith(transport, ['syn1'], { syndic_max_minions: 5 })
    await acceptSyndic(master, 'syn1')
    const syn1 = peers['syn1']!
    const ids = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => `below${from + index}`)
    const batch = (jid: string, minions: string[]) => ({
      cmd: '_syndic_return',
      id: 'syn1',
      jobs: [{ jid, fun: 'test.ping', minions, pending: [], returns: Object.fromEntries(minions.map((id) => [id, ret(true)])) }],
    })
    const published = await master.service.publish(rootCaller(), everyone)

    // Six distinct minions in one batch: refused whole.
    const big = await syn1.sealed(batch(published.jid, ids(0, 6)))
    expect(big['ok']).toBe(false)
    expect(big['error']).toMatchObject({ name: 'SyndicLimitError', context: { size: 6, limit: 5, key: 'syndic_max_minions' } })
    // Three, then three more: the syndic answers for five at most; the sixth is refused.
    expect(await syn1.sealed(batch(published.jid, ids(0, 3)))).toEqual({ ok: true })
    const more = await syn1.sealed(batch(published.jid, ids(3, 6)))
    expect((more['refused'] as Array<{ id: string; reason: string }>).filter((refusal) => refusal.reason.includes('syndic_max_minions'))).toEqual([
      { jid: published.jid, id: 'below5', reason: 'syndic syn1 already answers for 5 minions (syndic_max_minions 5)' },
    ])
    await events.next(tags.jobReturn(published.jid, 'below4'))
    expect(Object.keys((await master.jobs.getJob(published.jid))!.returns).sort()).toEqual(ids(0, 5))
    expect(events.events.filter((event) => event.tag.startsWith(`salt/job/${published.jid}/ret/`))).toHaveLength(5)
    expect(await runner(master, 'syndics.list')).toEqual({ syn1: { syndic_key: true, minions: ids(0, 5) } })
  })

  it('decodes a sealed batch within max_frame_entries: more entries under the frame size are refused with FrameLimitError', async () => {
    const { master, events, peers } = await topWith(transport, ['syn1'], { max_frame_entries: 2000 })
    await acceptSyndic(master, 'syn1')
    const syn1 = peers['syn1']!
    const published = await master.service.publish(rootCaller(), everyone)
    const minions = Array.from({ length: 5000 }, (_, index) => `b${index}`)
    // The answer is sealed to the sender and names the bound.
    const refused = await syn1.sealed({ cmd: '_syndic_return', id: 'syn1', jobs: [{ jid: published.jid, minions, pending: [] }] })
    expect(refused).toMatchObject({ ok: false, error: { name: 'FrameLimitError', context: { key: 'max_frame_entries', limit: 2000 } } })
    expect((refused['error'] as { message: string }).message).toContain('max_frame_entries (2000)')
    // The syndic's next, ordinary batch is served, and is the only announcement.
    expect(
      await syn1.sealed({ cmd: '_syndic_return', id: 'syn1', jobs: [{ jid: published.jid, minions: ['b1'], pending: [], returns: { b1: ret(true) } }] }),
    ).toEqual({ ok: true })
    await events.next(tags.jobReturn(published.jid, 'b1'))
    expect(events.tagged(tags.syndicJobNew('syn1', published.jid)).map((event) => event.data['minions'])).toEqual([['b1']])
  })
})

describe.each(TRANSPORTS)('max_pending_keys over %s', (transport) => {
  it('refuses a new id once minions_pre holds the bound; pending and accepted minions still authenticate', async () => {
    const dir = await tempDir()
    const { master } = await startMaster(dir, { transport, max_pending_keys: 3 })
    const address = addressOf(master)
    const start = (id: string) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))
    const wheel = async (fun: string, extra: Record<string, unknown> = {}) => (await master.service.wheel(rootCaller(), { fun, ...extra })).return

    const old = await start('old')
    expect(await old.auth()).toEqual({ ok: false, reason: 'pending' })
    await wheel('key.accept', { match: 'old' })
    const stranger = await Promise.all(['new0', 'new1', 'new2', 'new3', 'new4'].map(start))
    for (const minion of stranger.slice(0, 3)) expect(await minion.auth()).toEqual({ ok: false, reason: 'pending' })
    // Full: the next new ids are refused and nothing is written.
    for (const minion of stranger.slice(3)) expect(await minion.auth()).toEqual({ ok: false, reason: 'pending limit' })
    expect(master.store.pendingRefused).toBe(2)
    expect(await wheel('key.list_all')).toMatchObject({ minions_pre: ['new0', 'new1', 'new2'], minions: ['old'] })
    // A key already pending asks again (still pending, not refused); the accepted minion still gets in.
    expect(await stranger[0]!.auth()).toEqual({ ok: false, reason: 'pending' })
    expect(await old.auth()).toEqual({ ok: true })
    // Room made by the operator is room again.
    await wheel('key.reject', { match: 'new0' })
    expect(await stranger[3]!.auth()).toEqual({ ok: false, reason: 'pending' })
    expect(await wheel('key.list_all')).toMatchObject({ minions_pre: ['new1', 'new2', 'new3'] })
  })
})
