import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { silentLogger } from '@brine/core'
import { tags, type BusEvent, type JobLoad, type SyndicMinionReturn } from '@brine/protocol'
import { Announcements } from '@brine/master'
import type { UpperForwarder } from '../src/index.js'
import { Relay } from '../src/relay.js'
import { ReturnFollower } from '../src/return-follower.js'

const TOP = 'top:4506'
const JID = '20260101000000000001'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

type Call =
  | { type: 'announce'; jid: string; minions: string[]; pending: readonly string[] | undefined }
  | { type: 'return'; jid: string; minion: string; ret: SyndicMinionReturn; last: boolean }

/** The forwarder to the top, recording what it is asked to send up, in order. */
function fakeUpper(): { upper: UpperForwarder; calls: Call[] } {
  const calls: Call[] = []
  const upper = {
    announce: (jid: string, minions: Iterable<string>, pending: readonly string[] | undefined) =>
      calls.push({ type: 'announce', jid, minions: [...minions], pending: pending === undefined ? undefined : [...pending] }),
    addReturn: (jid: string, minion: string, ret: SyndicMinionReturn, _meta: unknown, last = false) => calls.push({ type: 'return', jid, minion, ret, last }),
  }
  return { upper: upper as unknown as UpperForwarder, calls }
}

/**
 * What the top master holds for this syndic ("mid") after `calls`, each taken as a batch of its own in the
 * order sent (the worst case: the forwarder may merge them): the minions it announced and the lower syndics
 * the top still waits for through it. A return announces its minion and leaves the pending syndics as they were.
 */
function topView(calls: readonly Call[], jid: string): { minions: string[]; pending: readonly string[] } {
  const top = new Announcements()
  const minions = new Set<string>()
  let pending: readonly string[] = []
  for (const call of calls) {
    if (call.jid !== jid) continue
    const named = call.type === 'announce' ? call.minions : [call.minion]
    for (const id of named) minions.add(id)
    pending = top.announce(jid, 'mid', named, call.type === 'announce' ? call.pending : undefined).pending
  }
  return { minions: [...minions].sort(), pending }
}

/** A promise with its resolve and reject at hand: the syndic's master's publish reply, sent when the test says. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: Error) => void } {
  let resolve!: (value: T) => void
  let reject!: (error: Error) => void
  const promise = new Promise<T>((yes, no) => {
    resolve = yes
    reject = no
  })
  return { promise, resolve, reject }
}

/** A syndic's relay and follower over fakes: its own master answers the publish when the test resolves `reply`. */
async function middleSyndic() {
  const dir = await mkdtemp(join(tmpdir(), 'rf-'))
  const { upper, calls } = fakeUpper()
  const reply = deferred<unknown>()
  const controller = new AbortController()
  const request = (load: Record<string, unknown>): Promise<unknown> =>
    load['cmd'] === 'publish' ? reply.promise : Promise.reject(new Error(`unexpected request ${String(load['cmd'])}`))
  const follower = new ReturnFollower({
    journal: join(dir, 'jobs.journal'),
    ttlMs: 60_000,
    upper: (master) => (master === TOP ? upper : undefined),
    request,
    emit: () => {},
    logger: silentLogger,
    signal: controller.signal,
    track: () => {},
  })
  cleanups.push(async () => {
    controller.abort()
    await follower.close()
    await rm(dir, { recursive: true, force: true })
  })
  await follower.load()
  const relay = new Relay({
    opts: { master_id: null, timeout: 5 },
    request,
    upper: () => upper,
    follower,
    emit: () => {},
    logger: silentLogger,
    signal: controller.signal,
  })
  return { follower, relay, calls, reply }
}

const job: JobLoad = { jid: JID, tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root', to: 5 } as unknown as JobLoad

/** The lower syndic "low" announcing its minions (its own subtree complete) on this syndic's master's bus. */
const lowAnnounces = (minions: string[]): BusEvent => ({ tag: tags.syndicJobNew('low', JID), data: { jid: JID, minions, missing: [], syndic_pending: [] } })
const returnOf = (minion: string): BusEvent => ({
  tag: tags.jobReturn(JID, minion),
  data: { id: minion, jid: JID, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true },
})
/** This syndic's master's publish reply: its own minion m1, and the lower syndic low still to announce. */
const publishReply = { jid: JID, minions: ['m1'], syndics: { low: [] } }

describe("the syndic's follower, when a lower syndic speaks before its own master's publish reply came back", () => {
  it("applies the lower syndic's early announcement at open: the top holds no pending syndic for it, and the job closes once every return went up", async () => {
    const { follower, relay, calls, reply } = await middleSyndic()
    const relayed = relay.relay(TOP, job)
    // low got the job from this syndic's master first and announced before the master's reply reached this syndic.
    expect(follower.take(lowAnnounces(['l1', 'l2']))).toBe(true)
    reply.resolve(publishReply)
    await relayed

    // Once the relay has announced, the top waits for no one through this syndic, and knows all three minions.
    expect(topView(calls, JID)).toEqual({ minions: ['l1', 'l2', 'm1'], pending: [] })
    for (const minion of ['m1', 'l1', 'l2']) follower.take(returnOf(minion))
    expect(calls.filter((call) => call.type === 'return').map((call) => [call.type === 'return' && call.minion, call.type === 'return' && call.last])).toEqual([
      ['m1', false],
      ['l1', false],
      ['l2', true],
    ])
    follower.settle([[JID, ['m1', 'l1', 'l2']]])
    expect(follower.size).toBe(0)
  })

  it("holds a lower syndic's early return too, and sends it up after this syndic's announcement of the job", async () => {
    const { follower, relay, calls, reply } = await middleSyndic()
    const relayed = relay.relay(TOP, job)
    follower.take(lowAnnounces(['l1']))
    follower.take(returnOf('l1'))
    // Nothing about the job went up before this syndic knew its own minions and which lower syndics it waits for.
    expect(calls).toEqual([])
    reply.resolve(publishReply)
    await relayed

    expect(calls[0]).toMatchObject({ type: 'announce', jid: JID, pending: [] })
    expect(calls.slice(1)).toEqual([
      { type: 'return', jid: JID, minion: 'l1', ret: expect.objectContaining({ return: true }) as SyndicMinionReturn, last: false },
    ])
    expect(topView(calls, JID)).toEqual({ minions: ['l1', 'm1'], pending: [] })
    follower.take(returnOf('m1'))
    expect(calls.at(-1)).toMatchObject({ type: 'return', minion: 'm1', last: true })
  })

  it("a job its master did not take: what was held goes up with the relay's empty announcement, and nothing stays held", async () => {
    const { follower, relay, calls, reply } = await middleSyndic()
    const relayed = relay.relay(TOP, job)
    follower.take(lowAnnounces(['l1']))
    reply.reject(new Error('the master is gone'))
    await relayed

    expect(topView(calls, JID)).toEqual({ minions: ['l1'], pending: [] })
    // Nothing is held for the job any more: the next announcement goes straight up.
    follower.take(lowAnnounces(['l2']))
    expect(calls.at(-1)).toEqual({ type: 'announce', jid: JID, minions: ['l2'], pending: undefined })
  })
})
