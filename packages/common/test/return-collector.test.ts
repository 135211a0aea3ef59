import { describe, expect, it } from 'vitest'
import { BoundedQueue } from '@brine/core'
import { deadline } from '@brine/transport-compliance'
import { jobEventJid, storedReturnsOfListJob, tags, type BusEvent, type StoredReturns, type Target } from '@brine/protocol'
import { collectReturns, FIND_JOB_LIST_MAX, findJobTargets, type CollectedReturn, type CollectReturnsOptions, type JobSource } from '../src/return-collector.js'

const JID = '20260101000000000001'
let findJobCounter = 0
const findJobJid = (): string => `20260101000000${String(500_000 + ++findJobCounter).padStart(6, '0')}`

/**
 * A bus reader fed by the test: events pushed before or while the collector reads. With `accepts`, an event
 * it refuses when fired is not buffered (as LocalClient's reader filters by tag), and counted in `skipped()`.
 */
function bus(
  accepts?: (tag: string) => boolean,
  capacity = 1000,
): {
  events: BoundedQueue<BusEvent>
  ret: (jid: string, id: string, value: unknown, extra?: Record<string, unknown>) => void
  skipped: () => number
} {
  const events = new BoundedQueue<BusEvent>(capacity)
  let skipped = 0
  return {
    events,
    ret: (jid, id, value, extra = {}) => {
      const tag = tags.jobReturn(jid, id)
      if (accepts !== undefined && !accepts(tag)) skipped++
      else events.push({ tag, data: { cmd: '_return', id, jid, fun: 'test.ping', fun_args: [], return: value, retcode: 0, success: true, ...extra } })
    },
    skipped: () => skipped,
  }
}

interface Recorded extends JobSource {
  /** Each find_job publish: a list's ids, or (`target`) another target and the ids it reached. */
  findJobs: Array<{ jid: string; ids: string[]; timeout: number; target?: Target }>
  lookups: number
}

/** A find_job publish as recorded: a list's ids, or the target asked. */
function asked(jid: string, target: Target, timeout: number): Recorded['findJobs'][number] {
  if (target.tgt_type === 'list' && Array.isArray(target.tgt)) return { jid, ids: [...target.tgt], timeout }
  return { jid, ids: [], timeout, target }
}

function source(
  options: { onFindJob?: (round: number, findJid: string, ids: readonly string[], target: Target) => string[]; stored?: () => StoredReturns } = {},
): Recorded {
  const recorded: Recorded = {
    findJobs: [],
    lookups: 0,
    async findJob(jid, target, { timeout }) {
      const round = asked(jid, target, timeout)
      recorded.findJobs.push(round)
      const findJid = findJobJid()
      const minions = options.onFindJob?.(recorded.findJobs.length, findJid, round.ids, target) ?? round.ids
      return { jid: findJid, minions }
    },
    async storedReturns() {
      recorded.lookups++
      if (options.stored === undefined) throw new Error('no job cache here')
      return options.stored()
    },
  }
  return recorded
}

/** A source whose minion `slow` still runs JID at the first find_job, and has returned by the second. */
function slowMinion(ret: ReturnType<typeof bus>['ret']): Recorded {
  return source({
    onFindJob: (round, findJid, ids) => {
      if (round === 1) ret(findJid, 'slow', { jid: JID, fun: 'test.sleep' }, { fun: 'saltutil.find_job' })
      else {
        // By the second round the real return has arrived.
        ret(JID, 'slow', 'done')
        ret(findJid, 'slow', {}, { fun: 'saltutil.find_job' })
      }
      return [...ids]
    },
  })
}

async function collect(options: CollectReturnsOptions): Promise<CollectedReturn[]> {
  const out: CollectedReturn[] = []
  await deadline(
    (async () => {
      for await (const item of collectReturns(options)) out.push(item)
    })(),
    10_000,
    'the collector to finish',
  )
  return out
}

describe('collectReturns', () => {
  it('narrows a focusing reader to its jid and its find_job rounds, and still sees a find_job answer that comes before the reply', async () => {
    // A reader that, like LocalClient's, buffers only what passes the focus when the event is fired.
    let focused: ReadonlySet<string> | undefined
    const focuses: Array<string[] | undefined> = []
    const { events, ret: fire, skipped } = bus((tag) => focused === undefined || focused.has(jobEventJid(tag) ?? ''))
    // The minion answers find_job before the publish reply (with the round's jid) reaches the collector.
    const jobs = slowMinion(fire)
    const collecting = collect({
      jid: JID,
      minions: ['web1', 'slow'],
      events,
      source: jobs,
      timeout: 50,
      gatherJobTimeout: 200,
      focus: (jids) => {
        focused = jids
        focuses.push(jids === undefined ? undefined : [...jids])
      },
    })
    fire(JID, 'web1', true)
    fire('20260101000000000099', 'web1', 'another job in flight')
    const items = await collecting
    expect(items.map((item) => [item.id, item.status])).toEqual([
      ['web1', 'returned'],
      ['slow', 'returned'],
    ])
    expect(skipped()).toBe(1)
    expect(focuses[0]).toEqual([JID])
    // Widened while each find_job is published, then narrowed to the job and the rounds' jids.
    expect(focuses[1]).toBeUndefined()
    expect(focuses[2]).toEqual([JID, expect.stringMatching(/^202601010000005/)])
    expect(focuses[3]).toBeUndefined()
    expect(focuses[4]).toHaveLength(3)
  })

  it('yields returns as they arrive, keeps retcode, success and out, and stops once every expected minion returned', async () => {
    const { events, ret } = bus()
    const jobs = source()
    ret(JID, 'web1', true)
    ret(JID, 'db1', 'boom', { retcode: 2, success: false, out: 'txt' })
    // An answer to another job on the same reader is not ours.
    ret('20260101000000000099', 'web1', 'other job')
    const items = await collect({ jid: JID, minions: ['web1', 'db1'], events, source: jobs, timeout: 60_000, gatherJobTimeout: 60_000 })
    expect(items).toEqual([
      { id: 'web1', status: 'returned', ret: true, retcode: 0, success: true, jid: JID },
      { id: 'db1', status: 'returned', ret: 'boom', retcode: 2, success: false, out: 'txt', jid: JID },
    ])
    expect(jobs.findJobs).toEqual([])
    expect(jobs.lookups).toBe(0)
    // The collector ended its reader.
    expect(events.isEnded).toBe(true)
  })

  it('asks the missing minions find_job and waits gather_job_timeout more while one still runs the job', async () => {
    const { events, ret } = bus()
    const jobs = slowMinion(ret)
    ret(JID, 'web1', true)
    const items = await collect({ jid: JID, minions: ['web1', 'slow'], events, source: jobs, timeout: 50, gatherJobTimeout: 200 })
    expect(items.map((item) => [item.id, item.status])).toEqual([
      ['web1', 'returned'],
      ['slow', 'returned'],
    ])
    expect(jobs.findJobs).toEqual([
      { jid: JID, ids: ['slow'], timeout: 200 },
      { jid: JID, ids: ['slow'], timeout: 200 },
    ])
  })

  it('recovers returns the bus dropped from the job cache, keeping retcode and success, then reports the rest missing', async () => {
    const { events, ret } = bus()
    // `quiet` was stored but its event never reached this reader; `idle` answers find_job with nothing running.
    const jobs = source({
      onFindJob: (_round, findJid, ids) => {
        ret(findJid, 'idle', {}, { fun: 'saltutil.find_job' })
        return [...ids]
      },
      stored: () => ({
        web1: { return: true, retcode: 0, success: true },
        quiet: { return: 'failed', retcode: 3, success: false, out: 'txt' },
        other: { return: 'not asked for' },
      }),
    })
    ret(JID, 'web1', true)
    const items = await collect({ jid: JID, minions: ['web1', 'quiet', 'ghost', 'idle'], events, source: jobs, timeout: 50, gatherJobTimeout: 100 })
    expect(items).toEqual([
      { id: 'web1', status: 'returned', ret: true, retcode: 0, success: true, jid: JID },
      { id: 'quiet', status: 'returned', ret: 'failed', retcode: 3, success: false, out: 'txt', jid: JID, fromCache: true },
      { id: 'ghost', status: 'missing', jid: JID },
      { id: 'idle', status: 'missing', jid: JID },
    ])
    expect(jobs.findJobs).toHaveLength(1)
    expect(jobs.lookups).toBe(1)
  })

  it('reports missing as before when the job cache cannot be read or find_job fails', async () => {
    const { events } = bus()
    const jobs = source()
    jobs.findJob = async () => {
      throw new Error('master gone')
    }
    expect(await collect({ jid: JID, minions: ['ghost'], events, source: jobs, timeout: 20, gatherJobTimeout: 20 })).toEqual([
      { id: 'ghost', status: 'missing', jid: JID },
    ])
    expect(jobs.lookups).toBe(1)
  })

  it('catches up from the job cache first for a reader opened after the publish, without yielding a return twice', async () => {
    const { events, ret } = bus()
    const jobs = source({ stored: () => ({ early: { return: 'before the reader', retcode: 1, success: false }, syndicated: { return: true } }) })
    // `early`'s event arrives on the reader too (it was in flight): it is not yielded again.
    ret(JID, 'early', 'before the reader', { retcode: 1, success: false })
    ret(JID, 'late', 'after')
    const items = await collect({ jid: JID, minions: ['early', 'late'], events, source: jobs, catchUp: true, timeout: 60_000, gatherJobTimeout: 60_000 })
    expect(items).toEqual([
      { id: 'early', status: 'returned', ret: 'before the reader', retcode: 1, success: false, jid: JID, fromCache: true },
      // A stored return of a minion that was not expected (a syndic's) is a return of the job all the same.
      { id: 'syndicated', status: 'returned', ret: true, retcode: 0, jid: JID, fromCache: true },
      { id: 'late', status: 'returned', ret: 'after', retcode: 0, success: true, jid: JID },
    ])
  })

  it('ends without markers when the signal aborts, and ends its reader', async () => {
    const { events } = bus()
    const controller = new AbortController()
    const jobs = source()
    const gathering = collect({ jid: JID, minions: ['ghost'], events, source: jobs, timeout: 60_000, gatherJobTimeout: 60_000, signal: controller.signal })
    controller.abort()
    expect(await gathering).toEqual([])
    expect(events.isEnded).toBe(true)
    expect(jobs.findJobs).toEqual([])
  })
})

describe('find_job rounds for many missing minions', () => {
  const ids = (count: number, prefix = 'm'): string[] => Array.from({ length: count }, (_, index) => `${prefix}${index}`)

  it("findJobTargets: one list while few are missing; the job's own short target when most are; else lists of at most FIND_JOB_LIST_MAX", () => {
    const star = { tgt: '*', tgt_type: 'glob' as const }
    expect(findJobTargets(['a', 'b'], 20_000, star)).toEqual([{ tgt: ['a', 'b'], tgt_type: 'list' }])
    expect(findJobTargets(ids(FIND_JOB_LIST_MAX), 20_000, star)).toEqual([{ tgt: ids(FIND_JOB_LIST_MAX), tgt_type: 'list' }])
    // 19,000 of 20,000 missing: the job's own target, one message per minion instead of 19,000 lists of 19,000 ids.
    expect(findJobTargets(ids(19_000), 20_000, star)).toEqual([star])
    expect(findJobTargets(ids(1200), 2000, { tgt: 'web* and G@os:Debian', tgt_type: 'compound' })).toEqual([
      { tgt: 'web* and G@os:Debian', tgt_type: 'compound' },
    ])
    // Not when few of the job's minions are missing (the target would ask all of them), nor without a target,
    // nor when the target is itself a list or a long one (it would carry as many ids as it names).
    for (const [missing, expected, target] of [
      [ids(1200), 20_000, star],
      [ids(1200), 1200, undefined],
      [ids(1200), 1200, { tgt: ids(1200), tgt_type: 'list' as const }],
      [ids(1200), 1200, { tgt: ids(1200).join(' or '), tgt_type: 'compound' as const }],
    ] as const) {
      const lists = findJobTargets(missing, expected, target)
      expect(lists).toHaveLength(3)
      expect(lists.every((list) => list.tgt_type === 'list' && list.tgt.length <= FIND_JOB_LIST_MAX)).toBe(true)
      expect(lists.flatMap((list) => list.tgt)).toEqual(missing)
    }
  })

  it("without the job's target, asks 1,300 missing minions in lists of at most FIND_JOB_LIST_MAX ids, each once per round, and extends the wait for one still running in any list", async () => {
    const { events, ret } = bus(undefined, 10_000)
    const minions = ids(1300)
    const running = new Set(['m7', 'm1299'])
    const jobs = source({
      onFindJob: (call, findJid, asked) => {
        for (const id of asked) {
          // Round one (three lists): m7 and m1299 still run the job; by round two they have returned.
          if (call > 3 && running.has(id)) ret(JID, id, 'done')
          ret(findJid, id, call <= 3 && running.has(id) ? { jid: JID, fun: 'test.sleep' } : {}, { fun: 'saltutil.find_job' })
        }
        return [...asked]
      },
    })
    const items = await collect({ jid: JID, minions, events, source: jobs, timeout: 20, gatherJobTimeout: 1000 })
    expect(items.filter((item) => item.status === 'returned').map((item) => item.id)).toEqual(['m7', 'm1299'])
    expect(items.filter((item) => item.status === 'missing')).toHaveLength(1298)
    expect(jobs.findJobs.map((round) => round.ids.length)).toEqual([500, 500, 300, 500, 500, 300])
    expect(jobs.findJobs.slice(0, 3).flatMap((round) => round.ids)).toEqual(minions)
  })

  it("by the job's own target when most of its minions are missing: only the missing ones it reaches are waited for, and one still running extends the wait", async () => {
    const { events, ret } = bus(undefined, 10_000)
    const minions = ids(1000)
    // 100 returned; of the 900 missing, m999 still runs the job; the target reaches all 1,000 and one the job did not.
    for (const id of minions.slice(0, 100)) ret(JID, id, true)
    const jobs = source({
      onFindJob: (call, findJid, _asked, target) => {
        expect(target).toEqual({ tgt: 'm*', tgt_type: 'glob' })
        if (call === 2) ret(JID, 'm999', 'done')
        for (const id of minions.slice(100, 999)) ret(findJid, id, {}, { fun: 'saltutil.find_job' })
        ret(findJid, 'm999', call === 1 ? { jid: JID, fun: 'test.sleep' } : {}, { fun: 'saltutil.find_job' })
        return [...minions, 'newcomer']
      },
    })
    const items = await collect({ jid: JID, minions, events, source: jobs, target: { tgt: 'm*', tgt_type: 'glob' }, timeout: 50, gatherJobTimeout: 1000 })
    expect(items.filter((item) => item.status === 'returned')).toHaveLength(101)
    expect(items.filter((item) => item.status === 'missing').map((item) => item.id)).toEqual(minions.slice(100, 999))
    expect(jobs.findJobs.map((round) => round.target?.tgt)).toEqual(['m*', 'm*'])
  })
})

describe('collectReturns behind syndics (order_masters)', () => {
  const announce = (events: BoundedQueue<BusEvent>, syndic: string, jid: string, minions: string[], pending: string[] = []): void => {
    events.push({ tag: tags.syndicJobNew(syndic, jid), data: { jid, minions, syndic_pending: pending } })
  }

  it('expects the minions each syndic announces and ends once they returned and every syndic announced its whole subtree, without waiting for the timeout', async () => {
    const { events, ret } = bus()
    const jobs = source()
    ret(JID, 'direct1', true)
    // syndic1 passes the job down a level: its own master's minion first, then what its lower syndic announced.
    announce(events, 'syndic1', JID, ['mid1'], ['low'])
    ret(JID, 'mid1', true)
    announce(events, 'syndic2', JID, ['s2-a', 's2-b'])
    announce(events, 'syndic1', '20260101000000000099', ['other-job'])
    ret(JID, 's2-a', true)
    ret(JID, 's2-b', true)
    const gathering = collect({
      jid: JID,
      minions: ['direct1'],
      syndics: { syndic1: ['mid1'], syndic2: [] },
      syndicWait: 60_000,
      events,
      source: jobs,
      timeout: 60_000,
      gatherJobTimeout: 60_000,
    })
    // Everyone announced so far returned, but syndic1 still waits for its lower syndic: so does the collector.
    announce(events, 'syndic1', JID, ['low1'], [])
    ret(JID, 'low1', true)
    const items = await gathering
    expect(items.map((item) => `${item.id}:${item.status}`)).toEqual(['direct1:returned', 'mid1:returned', 's2-a:returned', 's2-b:returned', 'low1:returned'])
    expect(jobs.findJobs).toEqual([])
  })

  it('a syndic that never announces: after timeout + syndic_wait its known minions are asked find_job through the tree and reported missing; the syndic itself never is', async () => {
    const { events, ret } = bus()
    const jobs = source({ onFindJob: () => [] })
    ret(JID, 'direct1', true)
    announce(events, 'alive', JID, ['a1'])
    ret(JID, 'a1', true)
    const items = await collect({
      jid: JID,
      minions: ['direct1'],
      syndics: { alive: ['a1'], dead: ['d1', 'd2'] },
      syndicWait: 50,
      events,
      source: jobs,
      timeout: 50,
      gatherJobTimeout: 50,
    })
    expect(items).toEqual([
      { id: 'direct1', status: 'returned', ret: true, retcode: 0, success: true, jid: JID },
      { id: 'a1', status: 'returned', ret: true, retcode: 0, success: true, jid: JID },
      { id: 'd1', status: 'missing', jid: JID },
      { id: 'd2', status: 'missing', jid: JID },
    ])
    // The find_job went to the dead syndic's minions (the top master knows none of them directly: the reply names no minion).
    expect(jobs.findJobs.map((round) => round.ids)).toEqual([['d1', 'd2']])
  })

  it("waits a find_job round through the syndics even when the top master's reply names no direct minion", async () => {
    const { events, ret } = bus()
    const jobs: Recorded = {
      findJobs: [],
      lookups: 0,
      async findJob(jid, target, { timeout }) {
        jobs.findJobs.push(asked(jid, target, timeout))
        const findJid = findJobJid()
        // slow1 is still running the job (behind a syndic), then returns.
        queueMicrotask(() => {
          ret(findJid, 'slow1', { jid: JID, fun: 'test.sleep' })
          ret(JID, 'slow1', 'done')
        })
        return { jid: findJid, minions: [], syndics: { syndic1: ['slow1'] } }
      },
      async storedReturns() {
        jobs.lookups++
        return {}
      },
    }
    announce(events, 'syndic1', JID, ['slow1'])
    const items = await collect({
      jid: JID,
      minions: [],
      syndics: { syndic1: [] },
      syndicWait: 10,
      events,
      source: jobs,
      timeout: 20,
      gatherJobTimeout: 60_000,
    })
    expect(items).toEqual([{ id: 'slow1', status: 'returned', ret: 'done', retcode: 0, success: true, jid: JID }])
  })
})

describe('storedReturnsOfListJob', () => {
  it("reads jobs.list_job's Result and nothing else", () => {
    expect(storedReturnsOfListJob({ jid: JID, Function: 'test.ping', Result: { web1: { return: true, retcode: 0, success: true }, bad: 'x' } })).toEqual({
      web1: { return: true, retcode: 0, success: true },
    })
    expect(storedReturnsOfListJob({ jid: JID })).toEqual({})
    expect(storedReturnsOfListJob('nope')).toEqual({})
  })
})
