import { silentLogger, type Logger } from '@brine/transport'
import type { BusEvent } from './event-bus.js'
import type { JobRecord } from './job-cache.js'
import type { PublishReply } from './protocol/loads.js'
import { parseJobReturnTag, parseSyndicAnnouncement } from './protocol/tags.js'

/**
 * What {@link collectReturns} yields: one minion's return (Salt's `get_cli_returns` item), or a minion
 * that neither returned nor was found still running the job. `fromCache` marks a return read back from
 * the master's job cache (its event was not seen by this reader); it keeps the stored retcode and success.
 */
export type CollectedReturn =
  | { id: string; status: 'returned'; ret: unknown; retcode: number; jid: string; success?: boolean; out?: string; fromCache?: true }
  | { id: string; status: 'missing'; jid: string }

/** A minion's return as the collector yields it. */
export type ReceivedReturn = Extract<CollectedReturn, { status: 'returned' }>

/** One return as the job cache keeps it: Salt's `get_jid` shape (`jobs.list_job`'s `Result` entries). */
export interface StoredReturn {
  return: unknown
  retcode?: number
  success?: boolean
  out?: string
}

/** The returns the job cache holds for one jid, by minion id. */
export type StoredReturns = Readonly<Record<string, StoredReturn>>

/**
 * What the collector asks of whoever runs the job: the local client over the wire, the master in-process.
 */
export interface JobSource {
  /** Publishes `saltutil.find_job [jid]` to `ids` (a list target) and returns that job's reply. */
  findJob(jid: string, ids: readonly string[], options: { timeout: number; signal?: AbortSignal }): Promise<PublishReply>
  /** The returns stored for `jid`. May throw: the collector then goes on as if the cache held none. */
  storedReturns(jid: string, options: { signal?: AbortSignal }): Promise<StoredReturns>
}

export interface CollectReturnsOptions {
  jid: string
  /** The minions expected to return. Returns of others (a syndic's minions) are yielded too. */
  minions: readonly string[]
  /**
   * With `order_masters`: the syndics expected to announce their minions (the publish reply's `syndics`),
   * each with the minions it announced before that the target may select. The collector waits up to
   * `syndicWait` past `timeout` for each to announce its whole subtree; a syndic that never does has its
   * candidates asked find_job (through the tree) and reported missing.
   */
  syndics?: Readonly<Record<string, readonly string[]>>
  /** ms (config `syndic_wait`) a syndic may take to announce, on top of `timeout`. */
  syndicWait?: number
  /**
   * The bus's job events (`salt/job/…`, so find_job answers are seen as well, and `syndic/…` for
   * announcements when there are syndics), opened before the job was
   * published, or before the cache is first read with `catchUp`. The collector ends it when it is done.
   */
  events: AsyncIterable<BusEvent>
  source: JobSource
  /**
   * Narrows what `events` buffers to the events of these jids (undefined: every job event again), so a
   * reader shared by the bus with other jobs' returns does not queue theirs. The collector names its jid
   * and its find_job rounds' jids, and widens it while a find_job publish is on its way (its answers may
   * come before its jid is known).
   */
  focus?: (jids: ReadonlySet<string> | undefined) => void
  /** Reads the job cache before waiting: for a reader opened after the publish, whose early returns the bus did not show it. */
  catchUp?: boolean
  /** ms to wait for returns before asking the missing minions `saltutil.find_job`. */
  timeout: number
  /** ms each find_job round waits for answers, and the extension while a minion still runs the job. */
  gatherJobTimeout: number
  /** Ends the wait; nothing more is yielded, no `missing` markers. */
  signal?: AbortSignal
  logger?: Logger
}

type Next = BusEvent | 'timeout' | 'end' | 'aborted'

/**
 * The one return collector (DESIGN §4 step 5), for the local client, the master's runners and batch
 * mode: yields the returns of `jid` as they arrive; at `timeout` asks the missing minions
 * `saltutil.find_job` and, for each round in which one of them still runs the job, waits
 * `gatherJobTimeout` more; then reads the job cache once for returns the bus dropped (a bounded
 * reader that fell behind), keeping their retcode and success; and reports the rest `missing`.
 */
export async function* collectReturns(options: CollectReturnsOptions): AsyncGenerator<CollectedReturn> {
  const { jid, source, signal, gatherJobTimeout } = options
  const logger = options.logger ?? silentLogger
  const iterator = options.events[Symbol.asyncIterator]()
  /** Expected minions not yet returned: kept as returns arrive, so a return costs O(1), not O(N). */
  const outstanding = new Set(options.minions)
  const returned = new Set<string>()
  /** Syndics that have not announced their whole subtree yet, with the candidates reported missing if they never do. */
  const unsettled = new Map<string, readonly string[]>(Object.entries(options.syndics ?? {}))
  const start = Date.now()
  /** The latest a syndic may announce: `timeout` + `syndic_wait` from the start (Salt's wait for syndics). */
  const syndicDeadline = start + options.timeout + (options.syndicWait ?? 0)
  /** find_job answers of the round in progress: jid → (id → still running). */
  const findJobs = new Map<string, Map<string, boolean>>()
  let pending: Promise<IteratorResult<BusEvent>> | undefined
  let stopAbortWait: () => void = () => {}
  const abortedPromise = new Promise<'aborted'>((resolve) => {
    if (signal === undefined) return
    if (signal.aborted) return resolve('aborted')
    const onAbort = (): void => resolve('aborted')
    signal.addEventListener('abort', onAbort, { once: true })
    stopAbortWait = () => signal.removeEventListener('abort', onAbort)
  })
  const aborted = (): boolean => signal?.aborted === true

  /** One timer per deadline, not one per event: a phase's events all wait for the same `until`. */
  let timer: NodeJS.Timeout | undefined
  let timerUntil = Number.NaN
  let expired: Promise<'timeout'> = Promise.resolve('timeout')
  const expiry = (until: number, remaining: number): Promise<'timeout'> => {
    if (until !== timerUntil) {
      clearTimeout(timer)
      timerUntil = until
      expired = new Promise<'timeout'>((resolve) => (timer = setTimeout(resolve, remaining, 'timeout')))
    }
    return expired
  }

  /** The next job event before `until` (epoch ms). */
  const next = async (until: number): Promise<Next> => {
    if (aborted()) return 'aborted'
    const remaining = until - Date.now()
    if (remaining <= 0) return 'timeout'
    pending ??= iterator.next()
    const result = await Promise.race([pending, expiry(until, remaining), abortedPromise])
    if (result === 'timeout' || result === 'aborted') return result
    pending = undefined
    return result.done === true ? 'end' : result.value
  }
  const focus = (): void => options.focus?.(new Set([jid, ...findJobs.keys()]))

  const take = (id: string, item: ReceivedReturn): CollectedReturn | undefined => {
    if (returned.has(id)) return undefined
    returned.add(id)
    outstanding.delete(id)
    return item
  }

  /** A syndic's announcement for our job: its minions join the expected ones; an empty `pending` settles it. */
  const announced = (event: BusEvent): void => {
    const announcement = parseSyndicAnnouncement(event)
    if (announcement === undefined || announcement.jid !== jid) return
    for (const id of announcement.minions) if (!returned.has(id)) outstanding.add(id)
    if (announcement.pending.length === 0) unsettled.delete(announcement.syndic)
    else if (!unsettled.has(announcement.syndic)) unsettled.set(announcement.syndic, [])
  }

  /** One event: a return of our job comes back to be yielded; a find_job answer is noted; an announcement widens the wait. */
  const handle = (event: BusEvent): CollectedReturn | undefined => {
    const parsed = parseJobReturnTag(event.tag)
    if (parsed === undefined) {
      if (unsettled.size > 0 || options.syndics !== undefined) announced(event)
      return undefined
    }
    const data = event.data
    if (parsed.jid === jid) return take(parsed.id, returnOf(jid, parsed.id, data))
    const round = findJobs.get(parsed.jid)
    if (round !== undefined && round.has(parsed.id)) {
      const ret = data['return']
      // Salt: a non-empty dict means the job is still in the minion's running-job table.
      round.set(parsed.id, typeof ret === 'object' && ret !== null && Object.keys(ret).length > 0)
    }
    return undefined
  }

  /** Returns the cache holds for `ids` (all of them when undefined) that were not yielded yet. */
  const fromCache = async (ids: ReadonlySet<string> | undefined): Promise<CollectedReturn[]> => {
    let stored: StoredReturns
    try {
      stored = await source.storedReturns(jid, signal === undefined ? {} : { signal })
    } catch (error) {
      logger.debug(`job cache lookup for ${jid} failed: ${(error as Error).message}`)
      return []
    }
    const items: CollectedReturn[] = []
    for (const id of ids ?? Object.keys(stored)) {
      const entry = Object.hasOwn(stored, id) ? stored[id] : undefined
      if (entry === undefined || typeof entry !== 'object' || entry === null) continue
      const item = take(id, storedItem(jid, id, entry))
      if (item !== undefined) items.push(item)
    }
    return items
  }

  try {
    focus()
    if (options.catchUp === true && !aborted()) yield* await fromCache(undefined)
    let deadline = start + options.timeout
    /** Until when phase 1 waits: the deadline, or later while a syndic may still announce. */
    const phaseOneUntil = (): number => (unsettled.size > 0 ? Math.max(deadline, syndicDeadline) : deadline)
    waiting: for (;;) {
      // Phase 1: returns until everyone answered (and every syndic announced) or the deadline passed.
      while (outstanding.size > 0 || unsettled.size > 0) {
        const event = await next(phaseOneUntil())
        if (event === 'end' || event === 'aborted') break waiting
        if (event === 'timeout') break
        const item = handle(event)
        if (item !== undefined) yield item
      }
      if (aborted()) break
      // A syndic that never announced (dead, or cut off): the minions it answered for before are asked and reported.
      for (const [syndic, candidates] of unsettled) {
        if (candidates.length > 0) logger.debug(`syndic ${syndic} did not announce its minions for ${jid}; expecting ${candidates.join(', ')}`)
        for (const id of candidates) if (!returned.has(id)) outstanding.add(id)
      }
      unsettled.clear()
      if (outstanding.size === 0) break
      // Phase 2: ask the missing minions whether they are still running the job.
      let round: Map<string, boolean>
      try {
        const asked = [...outstanding]
        options.focus?.(undefined)
        const reply = await source.findJob(jid, asked, signal === undefined ? { timeout: gatherJobTimeout } : { timeout: gatherJobTimeout, signal })
        // Behind syndics the top master cannot tell who will be reached: every asked minion may answer.
        const reached = reply.syndics !== undefined && Object.keys(reply.syndics).length > 0 ? asked : reply.minions
        if (reached.length === 0) break
        round = new Map(reached.map((id) => [id, false]))
        findJobs.set(reply.jid, round)
        focus()
      } catch (error) {
        if (!aborted()) logger.warning(`find_job for ${jid} failed: ${(error as Error).message}`)
        break
      }
      /** Asked minions that have neither answered find_job nor returned (a count, not a scan per event). */
      const unanswered = new Set(round.keys())
      const roundDeadline = Date.now() + gatherJobTimeout
      while (outstanding.size > 0) {
        const event = await next(roundDeadline)
        if (event === 'end' || event === 'aborted') break waiting
        if (event === 'timeout') break
        const item = handle(event)
        if (item !== undefined) {
          unanswered.delete(item.id)
          yield item
        }
        const parsed = parseJobReturnTag(event.tag)
        if (parsed !== undefined && findJobs.get(parsed.jid) === round) unanswered.delete(parsed.id)
        if (unanswered.size === 0) break
      }
      if (aborted() || outstanding.size === 0) break
      const stillRunning = [...round].filter(([id, running]) => running && !returned.has(id))
      if (stillRunning.length === 0) break
      logger.debug(`job ${jid} still running on ${stillRunning.map(([id]) => id).join(', ')}; waiting ${gatherJobTimeout} ms more`)
      deadline = Date.now() + gatherJobTimeout
    }
    if (!aborted() && outstanding.size > 0) {
      // The bus drops events for a reader that falls behind (bounded memory by design), so a minion may
      // have returned without our seeing it: the job cache has the last word, asked once.
      yield* await fromCache(outstanding)
    }
    if (!aborted()) for (const id of [...outstanding]) yield { id, status: 'missing', jid }
  } finally {
    clearTimeout(timer)
    stopAbortWait()
    await iterator.return?.()
  }
}

/** A return event's data → the collector's item (retcode 0 and no success when the event lacks them). */
function returnOf(jid: string, id: string, data: Record<string, unknown>): ReceivedReturn {
  const item: ReceivedReturn = {
    id,
    status: 'returned',
    ret: data['return'],
    retcode: typeof data['retcode'] === 'number' ? data['retcode'] : 0,
    jid,
  }
  if (typeof data['success'] === 'boolean') item.success = data['success']
  if (typeof data['out'] === 'string') item.out = data['out']
  return item
}

function storedItem(jid: string, id: string, entry: StoredReturn): ReceivedReturn {
  const item: ReceivedReturn = returnOf(jid, id, entry as unknown as Record<string, unknown>)
  item.fromCache = true
  return item
}

/**
 * `jobs.list_job`'s answer (Salt's `{jid, Function, …, Result: {id: {return, retcode, success, out?}}}`)
 * → the stored returns; `{}` for an unknown jid or any other shape.
 */
export function storedReturnsOfListJob(value: unknown): StoredReturns {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {}
  const result = (value as Record<string, unknown>)['Result']
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return {}
  const out: Record<string, StoredReturn> = {}
  for (const [id, entry] of Object.entries(result as Record<string, unknown>)) {
    if (typeof entry === 'object' && entry !== null && !Array.isArray(entry) && 'return' in entry) out[id] = entry as StoredReturn
  }
  return out
}

/**
 * A job record's returns in Salt's `get_jid` shape, `{id: {return, retcode, success, out?}}`: what
 * `jobs.list_job` and `jobs.print_job` show as `Result`, and what the collector recovers.
 */
export function storedReturnsOf(job: JobRecord | undefined): Record<string, StoredReturn> {
  const out: Record<string, StoredReturn> = {}
  if (job === undefined) return out
  for (const [id, ret] of Object.entries(job.returns)) {
    const entry: StoredReturn = { return: ret.return, retcode: ret.retcode, success: ret.success }
    if (ret.out !== undefined) entry.out = ret.out
    out[id] = entry
  }
  return out
}
