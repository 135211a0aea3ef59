import { silentLogger, type Logger } from '@brine/core'
import {
  parseJobReturnTag,
  parseSyndicAnnouncement,
  returnOfEvent,
  type BusEvent,
  type PublishReply,
  type StoredReturn,
  type StoredReturns,
  type Target,
} from '@brine/protocol'
import type { JobRecord } from './job-cache.js'

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

/**
 * The most minion ids one find_job publish lists. Each listed minion receives the whole list (a targeted publish
 * is one message per minion on NATS, and on ZeroMQ and TCP with filtering), so a round's bytes grow with the
 * square of the ids one list names: more missing minions than this are asked in several lists, or by the job's
 * own target ({@link findJobTargets}).
 */
export const FIND_JOB_LIST_MAX = 500

/** The longest job target (in characters, a list's ids counted) a find_job round asks in place of lists. */
export const FIND_JOB_TARGET_MAX_CHARS = 4096

/**
 * What one find_job round publishes to ask `missing` (of the job's `expected` minions) whether they still run the
 * job, so that no minion receives more than {@link FIND_JOB_LIST_MAX} ids however large the fleet: a list of the
 * missing minions (Salt's way since 2015.8) while they are that few; else, when the job's own `target` is short and
 * most of its minions are missing, that target (Salt's way before: one message per minion, the few that already
 * returned answering too); else lists of at most that many ids each.
 */
export function findJobTargets(missing: readonly string[], expected: number, target?: Target): Target[] {
  if (missing.length <= FIND_JOB_LIST_MAX) return [{ tgt: [...missing], tgt_type: 'list' }]
  const own = target?.tgt_type ?? 'glob'
  if (target !== undefined && own !== 'list' && targetChars(target.tgt) <= FIND_JOB_TARGET_MAX_CHARS && missing.length * 2 >= expected) {
    return [{ tgt: target.tgt, tgt_type: own }]
  }
  const lists: Target[] = []
  for (let first = 0; first < missing.length; first += FIND_JOB_LIST_MAX) lists.push({ tgt: missing.slice(first, first + FIND_JOB_LIST_MAX), tgt_type: 'list' })
  return lists
}

function targetChars(tgt: Target['tgt']): number {
  return typeof tgt === 'string' ? tgt.length : tgt.reduce((sum, word) => sum + word.length + 1, 0)
}

/**
 * What the collector asks of whoever runs the job: the local client over the wire, the master in-process.
 */
export interface JobSource {
  /** Publishes `saltutil.find_job [jid]` to `target` (a list of missing minions, or the job's own target) and returns that job's reply. */
  findJob(jid: string, target: Target, options: { timeout: number; signal?: AbortSignal }): Promise<PublishReply>
  /** The returns stored for `jid`. May throw: the collector then goes on as if the cache held none. */
  storedReturns(jid: string, options: { signal?: AbortSignal }): Promise<StoredReturns>
}

export interface CollectReturnsOptions {
  jid: string
  /** The minions expected to return. Returns of others (a syndic's minions) are yielded too. */
  minions: readonly string[]
  /** The job's own target, which a find_job round may ask instead of listing many missing minions ({@link findJobTargets}). */
  target?: Target
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
 * The bus reader under deadlines: the next event before a given time, or why there is none. One timer per
 * deadline, not one per event: a phase's events all wait for the same `until`.
 */
class DeadlineReader {
  readonly #iterator: AsyncIterator<BusEvent>
  readonly #signal: AbortSignal | undefined
  readonly #aborted: Promise<'aborted'>
  #stopAbortWait: () => void = () => {}
  #pending: Promise<IteratorResult<BusEvent>> | undefined
  #timer: NodeJS.Timeout | undefined
  #timerUntil = Number.NaN
  #expired: Promise<'timeout'> = Promise.resolve('timeout')

  constructor(events: AsyncIterable<BusEvent>, signal: AbortSignal | undefined) {
    this.#iterator = events[Symbol.asyncIterator]()
    this.#signal = signal
    this.#aborted = new Promise<'aborted'>((resolve) => {
      if (signal === undefined) return
      if (signal.aborted) return resolve('aborted')
      const onAbort = (): void => resolve('aborted')
      signal.addEventListener('abort', onAbort, { once: true })
      this.#stopAbortWait = () => signal.removeEventListener('abort', onAbort)
    })
  }

  get aborted(): boolean {
    return this.#signal?.aborted === true
  }

  /** The next job event before `until` (epoch ms). */
  async next(until: number): Promise<Next> {
    if (this.aborted) return 'aborted'
    const remaining = until - Date.now()
    if (remaining <= 0) return 'timeout'
    this.#pending ??= this.#iterator.next()
    const result = await Promise.race([this.#pending, this.#expiry(until, remaining), this.#aborted])
    if (result === 'timeout' || result === 'aborted') return result
    this.#pending = undefined
    return result.done === true ? 'end' : result.value
  }

  #expiry(until: number, remaining: number): Promise<'timeout'> {
    if (until !== this.#timerUntil) {
      clearTimeout(this.#timer)
      this.#timerUntil = until
      this.#expired = new Promise<'timeout'>((resolve) => (this.#timer = setTimeout(resolve, remaining, 'timeout')))
    }
    return this.#expired
  }

  async close(): Promise<void> {
    clearTimeout(this.#timer)
    this.#stopAbortWait()
    await this.#iterator.return?.()
  }
}

/**
 * The one return collector (DESIGN §4 step 5), for the local client, the master's runners and batch
 * mode: yields the returns of `jid` as they arrive; at `timeout` asks the missing minions
 * `saltutil.find_job` and, for each round in which one of them still runs the job, waits
 * `gatherJobTimeout` more; then reads the job cache once for returns the bus dropped (a bounded
 * reader that fell behind), keeping their retcode and success; and reports the rest `missing`.
 */
export async function* collectReturns(options: CollectReturnsOptions): AsyncGenerator<CollectedReturn> {
  const collector = new ReturnCollector(options)
  try {
    yield* collector.run()
  } finally {
    await collector.close()
  }
}

/**
 * One job's collection in explicit phases: wait for returns (and syndics' announcements) until the deadline;
 * ask the missing minions find_job and wait for that round's answers, extending the deadline while one still
 * runs the job; finish with the job cache and the `missing` markers.
 */
class ReturnCollector {
  readonly #o: CollectReturnsOptions
  readonly #jid: string
  readonly #logger: Logger
  readonly #reader: DeadlineReader
  /** Expected minions not yet returned: kept as returns arrive, so a return costs O(1), not O(N). */
  readonly #outstanding: Set<string>
  readonly #returned = new Set<string>()
  /** Syndics that have not announced their whole subtree yet, with the candidates reported missing if they never do. */
  readonly #unsettled: Map<string, readonly string[]>
  /** The latest a syndic may announce: `timeout` + `syndic_wait` from the start (Salt's wait for syndics). */
  readonly #syndicDeadline: number
  /** find_job answers of the rounds asked: jid to (id to still running). */
  readonly #findJobs = new Map<string, Map<string, boolean>>()
  /** Until when returns are awaited before the next find_job round. */
  #deadline: number

  constructor(options: CollectReturnsOptions) {
    this.#o = options
    this.#jid = options.jid
    this.#logger = options.logger ?? silentLogger
    this.#reader = new DeadlineReader(options.events, options.signal)
    this.#outstanding = new Set(options.minions)
    this.#unsettled = new Map(Object.entries(options.syndics ?? {}))
    const start = Date.now()
    this.#deadline = start + options.timeout
    this.#syndicDeadline = start + options.timeout + (options.syndicWait ?? 0)
  }

  async *run(): AsyncGenerator<CollectedReturn> {
    this.#focus()
    if (this.#o.catchUp === true && !this.#reader.aborted) yield* await this.#fromCache(undefined)
    for (;;) {
      if (!(yield* this.#awaitReturns()) || this.#reader.aborted) break
      this.#settleSyndics()
      if (this.#outstanding.size === 0) break
      const round = await this.#askFindJob()
      if (round === undefined || !(yield* this.#awaitRound(round))) break
      if (!this.#extendForRunning(round)) break
    }
    yield* this.#finish()
  }

  close(): Promise<void> {
    return this.#reader.close()
  }

  /** Phase 1: returns until everyone answered (and every syndic announced) or the deadline passed; false when the stream ended or was aborted. */
  async *#awaitReturns(): AsyncGenerator<CollectedReturn, boolean> {
    while (this.#outstanding.size > 0 || this.#unsettled.size > 0) {
      // Past the deadline while a syndic may still announce.
      const until = this.#unsettled.size > 0 ? Math.max(this.#deadline, this.#syndicDeadline) : this.#deadline
      const event = await this.#reader.next(until)
      if (event === 'end' || event === 'aborted') return false
      if (event === 'timeout') return true
      const item = this.#handle(event)
      if (item !== undefined) yield item
    }
    return true
  }

  /** A syndic that never announced (dead, or cut off): the minions it answered for before are asked and reported. */
  #settleSyndics(): void {
    for (const [syndic, candidates] of this.#unsettled) {
      if (candidates.length > 0) this.#logger.debug(`syndic ${syndic} did not announce its minions for ${this.#jid}; expecting ${candidates.join(', ')}`)
      for (const id of candidates) if (!this.#returned.has(id)) this.#outstanding.add(id)
    }
    this.#unsettled.clear()
  }

  /**
   * Phase 2: asks the missing minions whether they still run the job, in one publish or several
   * ({@link findJobTargets}); the round's minions, undefined when none can answer.
   */
  async #askFindJob(): Promise<Map<string, boolean> | undefined> {
    const asked = [...this.#outstanding]
    this.#o.focus?.(undefined)
    const targets = findJobTargets(asked, this.#o.minions.length, this.#o.target)
    const replies = await Promise.allSettled(targets.map((target) => this.#publishFindJob(target)))
    const wanted = new Set(asked)
    const round = new Map<string, boolean>()
    for (const result of replies) {
      if (result.status === 'rejected') {
        if (!this.#reader.aborted) this.#logger.warning(`find_job for ${this.#jid} failed: ${(result.reason as Error).message}`)
        continue
      }
      const reply = result.value
      // Behind syndics the top master cannot tell who will be reached: every asked minion may answer. The job's own
      // target reaches minions that returned already too: their answers are not waited for.
      const reached = reply.syndics !== undefined && Object.keys(reply.syndics).length > 0 ? asked : reply.minions.filter((id) => wanted.has(id))
      for (const id of reached) round.set(id, false)
      if (reached.length > 0) this.#findJobs.set(reply.jid, round)
    }
    this.#focus()
    return round.size === 0 ? undefined : round
  }

  #publishFindJob(target: Target): Promise<PublishReply> {
    const { signal, gatherJobTimeout } = this.#o
    return this.#o.source.findJob(this.#jid, target, signal === undefined ? { timeout: gatherJobTimeout } : { timeout: gatherJobTimeout, signal })
  }

  /** The round's answers (and returns) until every asked minion answered or `gatherJobTimeout` passed; false when the stream ended or was aborted. */
  async *#awaitRound(round: Map<string, boolean>): AsyncGenerator<CollectedReturn, boolean> {
    /** Asked minions that have neither answered find_job nor returned (a count, not a scan per event). */
    const unanswered = new Set(round.keys())
    const roundDeadline = Date.now() + this.#o.gatherJobTimeout
    while (this.#outstanding.size > 0) {
      const event = await this.#reader.next(roundDeadline)
      if (event === 'end' || event === 'aborted') return false
      if (event === 'timeout') return true
      const item = this.#handle(event)
      if (item !== undefined) {
        unanswered.delete(item.id)
        yield item
      }
      const parsed = parseJobReturnTag(event.tag)
      if (parsed !== undefined && this.#findJobs.get(parsed.jid) === round) unanswered.delete(parsed.id)
      if (unanswered.size === 0) return true
    }
    return true
  }

  /** After a round: true (and a later deadline) while an asked minion still runs the job and has not returned. */
  #extendForRunning(round: Map<string, boolean>): boolean {
    if (this.#reader.aborted || this.#outstanding.size === 0) return false
    const stillRunning = [...round].filter(([id, running]) => running && !this.#returned.has(id))
    if (stillRunning.length === 0) return false
    const { gatherJobTimeout } = this.#o
    this.#logger.debug(`job ${this.#jid} still running on ${stillRunning.map(([id]) => id).join(', ')}; waiting ${gatherJobTimeout} ms more`)
    this.#deadline = Date.now() + gatherJobTimeout
    return true
  }

  /** Phase 3: the job cache for returns the bus dropped, then the rest reported missing. */
  async *#finish(): AsyncGenerator<CollectedReturn> {
    if (this.#reader.aborted) return
    // The bus drops events for a reader that falls behind (bounded memory by design), so a minion may
    // have returned without our seeing it: the job cache has the last word, asked once.
    if (this.#outstanding.size > 0) yield* await this.#fromCache(this.#outstanding)
    if (this.#reader.aborted) return
    for (const id of [...this.#outstanding]) yield { id, status: 'missing', jid: this.#jid }
  }

  #focus(): void {
    this.#o.focus?.(new Set([this.#jid, ...this.#findJobs.keys()]))
  }

  #take(item: ReceivedReturn): CollectedReturn | undefined {
    if (this.#returned.has(item.id)) return undefined
    this.#returned.add(item.id)
    this.#outstanding.delete(item.id)
    return item
  }

  /** A syndic's announcement for our job: its minions join the expected ones; an empty `pending` settles it. */
  #announced(event: BusEvent): void {
    const announcement = parseSyndicAnnouncement(event)
    if (announcement === undefined || announcement.jid !== this.#jid) return
    for (const id of announcement.minions) if (!this.#returned.has(id)) this.#outstanding.add(id)
    if (announcement.pending.length === 0) this.#unsettled.delete(announcement.syndic)
    else if (!this.#unsettled.has(announcement.syndic)) this.#unsettled.set(announcement.syndic, [])
  }

  /** One event: a return of our job comes back to be yielded; a find_job answer is noted; an announcement widens the wait. */
  #handle(event: BusEvent): CollectedReturn | undefined {
    const parsed = parseJobReturnTag(event.tag)
    if (parsed === undefined) {
      if (this.#unsettled.size > 0 || this.#o.syndics !== undefined) this.#announced(event)
      return undefined
    }
    if (parsed.jid === this.#jid) return this.#take(receivedReturn(this.#jid, parsed.id, event.data))
    const round = this.#findJobs.get(parsed.jid)
    if (round !== undefined && round.has(parsed.id)) {
      const ret = event.data['return']
      // Salt: a non-empty dict means the job is still in the minion's running-job table.
      round.set(parsed.id, typeof ret === 'object' && ret !== null && Object.keys(ret).length > 0)
    }
    return undefined
  }

  /** Returns the cache holds for `ids` (all of them when undefined) that were not yielded yet. */
  async #fromCache(ids: ReadonlySet<string> | undefined): Promise<CollectedReturn[]> {
    const { signal } = this.#o
    let stored: StoredReturns
    try {
      stored = await this.#o.source.storedReturns(this.#jid, signal === undefined ? {} : { signal })
    } catch (error) {
      this.#logger.debug(`job cache lookup for ${this.#jid} failed: ${(error as Error).message}`)
      return []
    }
    const items: CollectedReturn[] = []
    for (const id of ids ?? Object.keys(stored)) {
      const entry = Object.hasOwn(stored, id) ? stored[id] : undefined
      if (entry === undefined || typeof entry !== 'object' || entry === null) continue
      const item = this.#take({ ...receivedReturn(this.#jid, id, entry as unknown as Record<string, unknown>), fromCache: true })
      if (item !== undefined) items.push(item)
    }
    return items
  }
}

/** A return event's data (or a stored entry) → the collector's item, through the one event → return conversion. */
function receivedReturn(jid: string, id: string, data: Readonly<Record<string, unknown>>): ReceivedReturn {
  const ret = returnOfEvent(data)
  const item: ReceivedReturn = { id, status: 'returned', ret: ret.return, retcode: ret.retcode, jid }
  if (ret.success !== undefined) item.success = ret.success
  if (ret.out !== undefined) item.out = ret.out
  return item
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
