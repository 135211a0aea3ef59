import type { ClientCredentials } from './clear-request.js'
import type { TargetType, Tgt } from '@brine/common'
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
  const { signal } = options
  const aborted = (): boolean => signal?.aborted === true
  const batchWait = options.batchWait ?? 0
  const wait: WaitOptions = {}
  if (options.timeout !== undefined) wait.timeout = options.timeout
  if (options.gatherJobTimeout !== undefined) wait.gatherJobTimeout = options.gatherJobTimeout
  const publishOptions = (tgtType: TargetType): BatchJobOptions => {
    const out: BatchJobOptions = { tgtType }
    if (options.timeout !== undefined) out.timeout = options.timeout
    if (signal !== undefined) out.signal = signal
    return out
  }
  /** Publishes, or undefined when the run was aborted meanwhile. */
  const publish = async (target: Tgt, name: string, args: readonly unknown[], jobOptions: BatchJobOptions): Promise<BatchJob | undefined> => {
    try {
      return await host.runJob(target, name, args, jobOptions)
    } catch (error) {
      if (aborted()) return undefined
      throw error
    }
  }

  // The ping pre-pass: who answers gets the job.
  const ping = options.ping ?? (await publish(tgt, 'test.ping', [], publishOptions(options.tgtType ?? 'glob')))
  if (ping === undefined) return
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
  if (aborted()) return
  const ready = [...up].sort()
  const count = batchSizeFor(size, ready.length)
  yield { type: 'ping', jid: ping.jid, minions: [...ping.minions], up: ready, down: down.sort(), size: count }
  if (ready.length === 0) return

  const jobOptions = publishOptions('list')
  if (options.kwarg !== undefined) jobOptions.kwarg = options.kwarg
  if (options.ret !== undefined) jobOptions.ret = options.ret
  const inbox = new Inbox()
  /** Jobs whose returns are being read, each with the switch that ends its reading. */
  const jobs = new Map<string, { job: BatchJob; stop: AbortController }>()
  /** Minions running their batch's job: id → jid. */
  const running = new Map<string, string>()
  /** When each slot held back by `batchWait` frees, ascending. */
  const cooling: number[] = []
  let next = 0
  let done = 0
  const progress = (): BatchProgress => ({ done, running: running.size, waiting: ready.length - next })
  const finish = (id: string): void => {
    running.delete(id)
    done++
    if (batchWait > 0) cooling.push(Date.now() + batchWait)
  }
  const read = (job: BatchJob, stop: AbortController): void => {
    void (async () => {
      try {
        for await (const item of job.returns({ ...wait, signal: stop.signal })) inbox.push({ kind: 'item', jid: job.jid, item })
        inbox.push({ kind: 'end', jid: job.jid })
      } catch (error) {
        inbox.push({ kind: 'end', jid: job.jid, error })
      }
    })()
  }
  const stopped = (id: string, jid: string): BatchEvent => ({ type: 'failhard', id, jid, running: [...running.keys()].sort(), unsent: ready.slice(next) })
  /** Reports `ids` of job `jid` as not returning; true when `failhard` ends the run on them. */
  function* reportMissing(ids: readonly string[], jid: string): Generator<BatchEvent, boolean> {
    for (const id of ids) {
      finish(id)
      yield { type: 'return', item: { id, status: 'missing', jid }, progress: progress() }
      if (options.failhard === true) {
        yield stopped(id, jid)
        return true
      }
    }
    return false
  }
  const stopAll = (): void => {
    for (const { stop } of jobs.values()) stop.abort()
  }
  signal?.addEventListener('abort', stopAll, { once: true })
  try {
    for (;;) {
      const now = Date.now()
      while (cooling.length > 0 && cooling[0]! <= now) cooling.shift()
      const slots = count - running.size - cooling.length
      if (slots > 0 && next < ready.length) {
        const ids = ready.slice(next, next + slots)
        next += ids.length
        const job = await publish(ids, fun, arg, jobOptions)
        if (job === undefined) return
        const stop = new AbortController()
        jobs.set(job.jid, { job, stop })
        for (const id of ids) running.set(id, job.jid)
        yield { type: 'batch', jid: job.jid, minions: ids, progress: progress() }
        read(job, stop)
        // A minion the master no longer expects (its key went away since the ping) gets no job.
        const expected = new Set(job.minions)
        if (yield* reportMissing(ids.filter((id) => !expected.has(id)), job.jid)) return
        continue
      }
      if (running.size === 0 && next >= ready.length) return
      // Wake for a return, or for the next slot `batchWait` releases while minions still wait for one.
      const until = next < ready.length && cooling.length > 0 ? cooling[0] : undefined
      const arrival = await inbox.next(until, signal)
      if (arrival === 'aborted') return
      if (arrival === 'timeout') continue
      if (arrival.kind === 'end') {
        const entry = jobs.get(arrival.jid)
        jobs.delete(arrival.jid)
        await entry?.job.close()
        if (arrival.error !== undefined && !aborted()) throw arrival.error
        // The collector accounts for every minion; should a reader end early all the same, its minions are missing, not waited for.
        const left = [...running].filter(([, jid]) => jid === arrival.jid).map(([id]) => id)
        if (yield* reportMissing(left, arrival.jid)) return
        continue
      }
      const { item } = arrival
      if (running.get(item.id) !== arrival.jid) {
        // A return from a minion this batch did not name (a syndic's): shown, but it holds no slot.
        if (item.status === 'returned') yield { type: 'return', item, progress: progress() }
        continue
      }
      finish(item.id)
      yield { type: 'return', item, progress: progress() }
      if (options.failhard === true && failedReturn(item)) {
        yield stopped(item.id, item.jid)
        return
      }
    }
  } finally {
    signal?.removeEventListener('abort', stopAll)
    stopAll()
    await Promise.all([...jobs.values()].map(({ job }) => job.close()))
  }
}
