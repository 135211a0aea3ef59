import type { ClientCredentials } from './clear-request.js'
import type { TargetType, Tgt } from '@brine/protocol'
import { BatchSizeError } from './errors.js'
import type { CliReturn, WaitOptions } from './job.js'

/** A batch size as given: a number of minions, or a percentage of the minions that answered the ping. */
export type BatchSize = { count: number } | { percent: number }

/**
 * Parses Salt's batch size: a whole number of minions (`3`) or a percentage (`10%`, or Salt's `%10`).
 * Anything else, zero included (Salt would loop forever on it), is a {@link BatchSizeError} naming `key`.
 */
export function parseBatchSize(value: string | number, key = 'batch'): BatchSize {
  const text = String(value).trim()
  if (text.includes('%')) {
    const digits = text.replace(/^%+|%+$/g, '')
    if (!/^\d+(\.\d+)?$/.test(digits)) throw new BatchSizeError(text, key, 'not a percentage')
    const percent = Number(digits)
    if (percent <= 0) throw new BatchSizeError(text, key, 'a percentage must be above 0%')
    return { percent }
  }
  if (!/^\d+$/.test(text)) throw new BatchSizeError(text, key, 'not a whole number')
  const count = Number(text)
  if (count < 1) throw new BatchSizeError(text, key, 'at least one minion must run at a time')
  return { count }
}

/**
 * How many minions run at once (Salt's `get_bnum`): the count, or the percentage of `minions`, rounded
 * down, and up to 1 when it falls below one. (Salt multiplies the fraction first, so 29% of 100 is 28
 * there; the product is taken first here, so it is 29.)
 */
export function batchSizeFor(size: BatchSize, minions: number): number {
  if ('count' in size) return size.count
  const share = (size.percent * minions) / 100
  return share < 1 ? Math.ceil(share) : Math.floor(share)
}

/** A published job as batch mode reads it: @brine/client's {@link Job} (published with `listen: true`). */
export interface BatchJob {
  readonly jid: string
  readonly minions: readonly string[]
  /** With `order_masters`: the syndics that may announce more minions (the publish reply's `syndics`). */
  readonly syndics?: Readonly<Record<string, readonly string[]>>
  /** A list target's ids that are not accepted minions (the publish reply's `missing`). */
  readonly missing?: readonly string[]
  returns(options?: WaitOptions): AsyncIterable<CliReturn>
  close(): Promise<void>
}

/** How batch mode publishes each job (the ping, then one per batch). */
export interface BatchJobOptions {
  tgtType: TargetType
  kwarg?: Record<string, unknown>
  ret?: string
  metadata?: Record<string, unknown>
  timeout?: number
  signal?: AbortSignal
}

/** What batch mode needs of a client: a publish whose returns reader is open before the publish goes out. */
export interface BatchHost {
  runJob(tgt: Tgt, fun: string, arg: readonly unknown[], options: BatchJobOptions): Promise<BatchJob>
}

export interface BatchOptions {
  /** Salt's `tgt_type` of the target (default glob); every batch is then published as a list target. */
  tgtType?: TargetType
  kwarg?: Record<string, unknown>
  /** Returners to send the returns to as well (Salt's `ret`). */
  ret?: string
  /** Salt's job metadata, on every batch's job (not on the ping). */
  metadata?: Record<string, unknown>
  /** Minions at a time: a count or a percentage of those that answered the ping (Salt's `batch`, default `10%`). */
  batch?: string | number
  /** ms a minion's slot stays empty after it returned, before the next minion takes it (Salt's `batch_wait`, seconds). */
  batchWait?: number
  /** Stop at the first minion that fails (non-zero retcode, success false, or no return): Salt's `failhard`. */
  failhard?: boolean
  /** ms the ping and each batch wait before asking the missing minions `saltutil.find_job` (default: config `timeout`). */
  timeout?: number
  /** ms each find_job round waits (default: config `gather_job_timeout`). */
  gatherJobTimeout?: number
  /**
   * A `test.ping` job already published to the target (with its reader open), to serve as the ping
   * pre-pass instead of a new one: what `brine` does when `batch_safe_limit` switched it to batch mode.
   */
  ping?: BatchJob
  /** Ends the run: no further batch is published, nothing more is yielded (the jobs sent keep running). */
  signal?: AbortSignal
  /** Publish every job (the ping and each batch) as this eauth user, whose ACL the master applies. */
  credentials?: ClientCredentials
}

/** Where a batch run stands: minions done (returned or missing), running now, not sent their job yet. */
export interface BatchProgress {
  done: number
  running: number
  waiting: number
}

/**
 * What {@link runBatch} yields, in order: one `ping` (who answered the pre-pass and gets the job, who did
 * not and gets none, and the batch size those give); then a `batch` each time a batch is published (a new
 * jid, a list target) and a `return` for each of its minions (a return, or `missing` when it did not
 * return); and, when `failhard` stopped the run, a last `failhard` naming the minion, those still running
 * their job and those never sent it. No minion matched: `ping` has no minions and nothing follows.
 */
export type BatchEvent =
  | { type: 'ping'; jid: string; minions: string[]; up: string[]; down: string[]; size: number }
  | { type: 'batch'; jid: string; minions: string[]; progress: BatchProgress }
  | { type: 'return'; item: CliReturn; progress: BatchProgress }
  | { type: 'failhard'; id: string; jid: string; running: string[]; unsent: string[] }

/** True when a minion's outcome stops a `failhard` run: no return, a non-zero retcode, or success false. */
export function failedReturn(item: CliReturn): boolean {
  return item.status === 'missing' || item.retcode !== 0 || item.success === false
}

type Arrival = { kind: 'item'; jid: string; item: CliReturn } | { kind: 'end'; jid: string; error?: unknown }

/** The returns of every job in flight, merged in arrival order; `next` also wakes for a deadline or an abort. */
class Inbox {
  readonly #items: Arrival[] = []
  #wake: (() => void) | undefined

  push(arrival: Arrival): void {
    this.#items.push(arrival)
    this.#wake?.()
  }

  async next(until: number | undefined, signal: AbortSignal | undefined): Promise<Arrival | 'timeout' | 'aborted'> {
    for (;;) {
      if (signal?.aborted === true) return 'aborted'
      const arrival = this.#items.shift()
      if (arrival !== undefined) return arrival
      if (until !== undefined && Date.now() >= until) return 'timeout'
      await new Promise<void>((resolve) => {
        let timer: NodeJS.Timeout | undefined
        const wake = (): void => {
          clearTimeout(timer)
          signal?.removeEventListener('abort', wake)
          this.#wake = undefined
          resolve()
        }
        this.#wake = wake
        if (until !== undefined) timer = setTimeout(wake, until - Date.now())
        signal?.addEventListener('abort', wake, { once: true })
      })
    }
  }
}

/** How the run publishes its jobs and waits for their returns, from the batch options. */
class BatchPublisher {
  readonly wait: WaitOptions = {}
  readonly #host: BatchHost
  readonly #options: BatchOptions

  constructor(host: BatchHost, options: BatchOptions) {
    this.#host = host
    this.#options = options
    if (options.timeout !== undefined) this.wait.timeout = options.timeout
    if (options.gatherJobTimeout !== undefined) this.wait.gatherJobTimeout = options.gatherJobTimeout
  }

  /** The ping's publish options: the target's type. */
  pingOptions(tgtType: TargetType): BatchJobOptions {
    const out: BatchJobOptions = { tgtType }
    if (this.#options.timeout !== undefined) out.timeout = this.#options.timeout
    if (this.#options.signal !== undefined) out.signal = this.#options.signal
    return out
  }

  /** Each batch's publish options: a list target, with the job's kwarg and returners. */
  batchOptions(): BatchJobOptions {
    const out = this.pingOptions('list')
    if (this.#options.kwarg !== undefined) out.kwarg = this.#options.kwarg
    if (this.#options.ret !== undefined) out.ret = this.#options.ret
    if (this.#options.metadata !== undefined) out.metadata = this.#options.metadata
    return out
  }

  /** Publishes, or undefined when the run was aborted meanwhile. */
  async publish(target: Tgt, fun: string, args: readonly unknown[], jobOptions: BatchJobOptions): Promise<BatchJob | undefined> {
    try {
      return await this.#host.runJob(target, fun, args, jobOptions)
    } catch (error) {
      if (this.#options.signal?.aborted === true) return undefined
      throw error
    }
  }
}

/** The ping pre-pass's outcome: who answered (sorted) and who did not. */
async function pingOutcome(ping: BatchJob, wait: WaitOptions, signal: AbortSignal | undefined): Promise<{ up: string[]; down: string[] }> {
  const up = new Set<string>()
  const down: string[] = []
  try {
    for await (const item of ping.returns(signal === undefined ? wait : { ...wait, signal })) {
      if (item.status === 'returned') up.add(item.id)
      else down.push(item.id)
    }
  } finally {
    await ping.close()
  }
  return { up: [...up].sort(), down: down.sort() }
}

/**
 * Salt's batch mode (`salt/cli/batch.py`), over the one return collector: pings the target and keeps
 * the minions that answer (the others are reported and get no job); then keeps at most `batch` of them
 * running at once, each batch published as a new job (a new jid, a list target) as soon as slots are
 * free, a slot freeing when its minion returns (or, after `timeout` and find_job, is found missing) and
 * `batchWait` ms later. It never hangs on an offline minion: every wait is the collector's bounded one.
 * With `failhard` it stops at the first failure; the jobs already sent keep running on their minions.
 */
export async function* runBatch(host: BatchHost, tgt: Tgt, fun: string, arg: readonly unknown[], options: BatchOptions = {}): AsyncGenerator<BatchEvent> {
  const size = parseBatchSize(options.batch ?? '10%')
  const publisher = new BatchPublisher(host, options)
  // The ping pre-pass: who answers gets the job.
  const ping = options.ping ?? (await publisher.publish(tgt, 'test.ping', [], publisher.pingOptions(options.tgtType ?? 'glob')))
  if (ping === undefined) return
  const { up, down } = await pingOutcome(ping, publisher.wait, options.signal)
  if (options.signal?.aborted === true) return
  const count = batchSizeFor(size, up.length)
  yield { type: 'ping', jid: ping.jid, minions: [...ping.minions], up, down, size: count }
  if (up.length === 0) return
  yield* new BatchRun(publisher, { fun, arg, ready: up, count, options }).run()
}

type Step = 'go on' | 'stop'

/** The batches after the ping: slots, jobs in flight, their returns, and failhard. */
class BatchRun {
  readonly #publisher: BatchPublisher
  readonly #fun: string
  readonly #arg: readonly unknown[]
  /** The minions that answered the ping, in the order they are sent their job. */
  readonly #ready: readonly string[]
  /** Minions at a time. */
  readonly #count: number
  readonly #options: BatchOptions
  readonly #jobOptions: BatchJobOptions
  readonly #inbox = new Inbox()
  /** Jobs whose returns are being read, each with the switch that ends its reading. */
  readonly #jobs = new Map<string, { job: BatchJob; stop: AbortController }>()
  /** Minions running their batch's job: id to jid. */
  readonly #running = new Map<string, string>()
  /** When each slot held back by `batchWait` frees, ascending. */
  readonly #cooling: number[] = []
  /** How many of `ready` were sent their job. */
  #next = 0
  #done = 0

  constructor(publisher: BatchPublisher, run: { fun: string; arg: readonly unknown[]; ready: readonly string[]; count: number; options: BatchOptions }) {
    this.#publisher = publisher
    this.#fun = run.fun
    this.#arg = run.arg
    this.#ready = run.ready
    this.#count = run.count
    this.#options = run.options
    this.#jobOptions = publisher.batchOptions()
  }

  async *run(): AsyncGenerator<BatchEvent> {
    const { signal } = this.#options
    const stopAll = (): void => this.#stopAll()
    signal?.addEventListener('abort', stopAll, { once: true })
    try {
      for (;;) {
        const slots = this.#freeSlots()
        const step = slots > 0 && this.#next < this.#ready.length ? yield* this.#publishBatch(slots) : yield* this.#awaitArrival()
        if (step === 'stop') return
      }
    } finally {
      signal?.removeEventListener('abort', stopAll)
      this.#stopAll()
      await Promise.all([...this.#jobs.values()].map(({ job }) => job.close()))
    }
  }

  #freeSlots(): number {
    const now = Date.now()
    while (this.#cooling.length > 0 && this.#cooling[0]! <= now) this.#cooling.shift()
    return this.#count - this.#running.size - this.#cooling.length
  }

  /** The next batch into the free slots, published and read. */
  async *#publishBatch(slots: number): AsyncGenerator<BatchEvent, Step> {
    const ids = this.#ready.slice(this.#next, this.#next + slots)
    this.#next += ids.length
    const job = await this.#publisher.publish(ids, this.#fun, this.#arg, this.#jobOptions)
    if (job === undefined) return 'stop'
    const stop = new AbortController()
    this.#jobs.set(job.jid, { job, stop })
    for (const id of ids) this.#running.set(id, job.jid)
    yield { type: 'batch', jid: job.jid, minions: ids, progress: this.#progress() }
    this.#read(job, stop)
    // A minion the master no longer expects (its key went away since the ping) gets no job.
    const expected = new Set(job.minions)
    return yield* this.#reportMissing(
      ids.filter((id) => !expected.has(id)),
      job.jid,
    )
  }

  /** A return, a reader's end, or the next slot `batchWait` releases while minions still wait for one. */
  async *#awaitArrival(): AsyncGenerator<BatchEvent, Step> {
    if (this.#running.size === 0 && this.#next >= this.#ready.length) return 'stop'
    const until = this.#next < this.#ready.length && this.#cooling.length > 0 ? this.#cooling[0] : undefined
    const arrival = await this.#inbox.next(until, this.#options.signal)
    if (arrival === 'aborted') return 'stop'
    if (arrival === 'timeout') return 'go on'
    if (arrival.kind === 'end') return yield* this.#readerEnded(arrival.jid, arrival.error)
    const { item } = arrival
    if (this.#running.get(item.id) !== arrival.jid) {
      // A return from a minion this batch did not name (a syndic's): shown, but it holds no slot.
      if (item.status === 'returned') yield { type: 'return', item, progress: this.#progress() }
      return 'go on'
    }
    this.#finish(item.id)
    yield { type: 'return', item, progress: this.#progress() }
    if (this.#options.failhard === true && failedReturn(item)) {
      yield this.#stopped(item.id, item.jid)
      return 'stop'
    }
    return 'go on'
  }

  async *#readerEnded(jid: string, error: unknown): AsyncGenerator<BatchEvent, Step> {
    const entry = this.#jobs.get(jid)
    this.#jobs.delete(jid)
    await entry?.job.close()
    if (error !== undefined && this.#options.signal?.aborted !== true) throw error
    // The collector accounts for every minion; should a reader end early all the same, its minions are missing, not waited for.
    const left = [...this.#running].filter(([, running]) => running === jid).map(([id]) => id)
    return yield* this.#reportMissing(left, jid)
  }

  /** Reports `ids` of job `jid` as not returning; 'stop' when `failhard` ends the run on them. */
  *#reportMissing(ids: readonly string[], jid: string): Generator<BatchEvent, Step> {
    for (const id of ids) {
      this.#finish(id)
      yield { type: 'return', item: { id, status: 'missing', jid }, progress: this.#progress() }
      if (this.#options.failhard === true) {
        yield this.#stopped(id, jid)
        return 'stop'
      }
    }
    return 'go on'
  }

  #read(job: BatchJob, stop: AbortController): void {
    void (async () => {
      try {
        for await (const item of job.returns({ ...this.#publisher.wait, signal: stop.signal })) this.#inbox.push({ kind: 'item', jid: job.jid, item })
        this.#inbox.push({ kind: 'end', jid: job.jid })
      } catch (error) {
        this.#inbox.push({ kind: 'end', jid: job.jid, error })
      }
    })()
  }

  #finish(id: string): void {
    this.#running.delete(id)
    this.#done++
    const batchWait = this.#options.batchWait ?? 0
    if (batchWait > 0) this.#cooling.push(Date.now() + batchWait)
  }

  #progress(): BatchProgress {
    return { done: this.#done, running: this.#running.size, waiting: this.#ready.length - this.#next }
  }

  #stopped(id: string, jid: string): BatchEvent {
    return { type: 'failhard', id, jid, running: [...this.#running.keys()].sort(), unsent: this.#ready.slice(this.#next) }
  }

  #stopAll(): void {
    for (const { stop } of this.#jobs.values()) stop.abort()
  }
}
