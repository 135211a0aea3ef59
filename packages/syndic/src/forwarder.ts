/**
 * The way up to one upper master: announcements and returns gathered per job and sent as one sealed
 * `_syndic_return` every `syndic_event_forward_timeout` (announcements at once: the top's client waits for
 * them), one batch in flight at a time. A batch the upper master does not acknowledge goes to a bounded
 * disk spool and is sent again, oldest first, after the next auth and on a timer, so nothing is lost
 * while the upper master is down; it stores each return once however often it arrives.
 */
import type { SyndicJobEntry, SyndicMinionReturn, SyndicReturnLoad } from '@brine/protocol'
import { encodedBytes, fitReturn, NotAcknowledgedError, RETURN_FRAME_RESERVE_BYTES, type MasterLink } from '@brine/link'
import { silentLogger, type Logger } from '@brine/core'
import { returnTryTimeoutMs } from '@brine/config'
import type { BatchSpool } from './batch-spool.js'
import { SyndicFileError, SyndicSpoolFullError } from './errors.js'

/** Returns per `_syndic_return` request at most; {@link splitBatches} also keeps each batch within the frame. */
export const MAX_RETURNS_PER_BATCH = 5000

/** A job's pending announcement and returns, as {@link splitBatches} takes them. */
export interface PendingJob {
  fun?: string
  load?: Record<string, unknown>
  master_id?: string
  minions: Set<string>
  pending?: string[]
  returns: Map<string, SyndicMinionReturn>
}

export interface SplitOptions {
  /** Returns per batch at most (default {@link MAX_RETURNS_PER_BATCH}). */
  maxReturns?: number
  /** The frame one sealed batch must fit (the link's `max_frame_bytes`). */
  maxFrameBytes: number
  /** Told of each return too big for a frame on its own, before it goes up cut to fit. */
  onTruncated?: (jid: string, minion: string, originalBytes: number, bytes: number) => void
}

/** Bytes counted for what wraps a batch's entries: `{cmd: '_syndic_return', id, jobs: [...]}` with a syndic id of up to 237 bytes. */
const BATCH_WRAPPING_BYTES = 320
/** Bytes counted per entry for its `returns` key and the map headers that grow as returns are added. */
const ENTRY_SLACK_BYTES = 32

/**
 * `jobs` as `_syndic_return` batches of at most `maxReturns` returns whose encoded size stays within
 * `maxFrameBytes` less what the seal and envelope add ({@link RETURN_FRAME_RESERVE_BYTES}): a job's
 * entry (its announcement, load and function) goes with its first part; a job split over batches
 * continues in entries that announce the minions of their own returns. A return that does not fit a
 * frame on its own is cut as a minion cuts it (the longest strings, each marked), never lost.
 */
export function* splitBatches(jobs: ReadonlyMap<string, PendingJob>, options: SplitOptions): Generator<SyndicJobEntry[]> {
  const maxReturns = options.maxReturns ?? MAX_RETURNS_PER_BATCH
  const budget = Math.max(4096, options.maxFrameBytes - RETURN_FRAME_RESERVE_BYTES)
  let batch: SyndicJobEntry[] = []
  let count = 0
  let bytes = BATCH_WRAPPING_BYTES
  const fresh = (): void => {
    ;[batch, count, bytes] = [[], 0, BATCH_WRAPPING_BYTES]
  }
  for (const [jid, job] of jobs) {
    const head: SyndicJobEntry = { jid }
    if (job.fun !== undefined) head.fun = job.fun
    if (job.master_id !== undefined) head.master_id = job.master_id
    if (job.load !== undefined) head.load = job.load
    head.minions = [...job.minions]
    if (job.pending !== undefined) head.pending = job.pending
    const headBytes = encodedBytes(head) + ENTRY_SLACK_BYTES
    if (batch.length > 0 && bytes + headBytes > budget) {
      yield batch
      fresh()
    }
    let entry = head
    batch.push(entry)
    bytes += headBytes
    // A continuation entry of this job (without its minion and return): what a return must fit beside in a batch of its own.
    const skeleton = (): SyndicJobEntry => {
      const continuation: SyndicJobEntry = { jid, minions: [] }
      if (job.fun !== undefined) continuation.fun = job.fun
      if (job.master_id !== undefined) continuation.master_id = job.master_id
      return continuation
    }
    const skeletonBytes = encodedBytes(skeleton()) + ENTRY_SLACK_BYTES
    for (const [minion, original] of job.returns) {
      const idBytes = encodedBytes(minion)
      // Alone in a batch, in a continuation that announces it: the id counts twice there.
      const reserve = RETURN_FRAME_RESERVE_BYTES + BATCH_WRAPPING_BYTES + skeletonBytes + 2 * idBytes
      const { ret, bytes: retBytes } = fitted(jid, minion, original, options.maxFrameBytes, reserve, options.onTruncated)
      if (count >= maxReturns || bytes + retBytes + 2 * idBytes > budget) {
        // Whatever the batch holds goes now (a head without returns is an announcement on its own); this return starts the next.
        yield batch
        fresh()
        entry = skeleton()
        batch.push(entry)
        bytes += skeletonBytes
      }
      ;(entry.returns ??= {})[minion] = ret
      if (entry !== head) entry.minions!.push(minion)
      count++
      bytes += retBytes + (entry === head ? idBytes : 2 * idBytes)
    }
  }
  if (batch.length > 0) yield batch
}

/** `ret` as it fits a frame of `maxFrameBytes` with `reserveBytes` kept for what wraps it (cut by the minion's rules when it does not). */
function fitted(
  jid: string,
  minion: string,
  ret: SyndicMinionReturn,
  maxFrameBytes: number,
  reserveBytes: number,
  onTruncated: SplitOptions['onTruncated'],
): { ret: SyndicMinionReturn; bytes: number } {
  // fitReturn measures a whole `_return` load: a little more than the return inside a batch, so its size bounds the return's.
  const fit = fitReturn(
    {
      cmd: '_return',
      id: minion,
      jid,
      fun: '',
      fun_args: ret.fun_args,
      return: ret.return,
      retcode: ret.retcode,
      success: ret.success,
      ...(ret.out === undefined ? {} : { out: ret.out }),
    },
    maxFrameBytes,
    reserveBytes,
  )
  if (!fit.truncated) return { ret, bytes: fit.bytes }
  onTruncated?.(jid, minion, fit.originalBytes, fit.bytes)
  const cut: SyndicMinionReturn = { return: fit.load.return, retcode: ret.retcode, success: ret.success, fun_args: fit.load.fun_args }
  if (ret.out !== undefined) cut.out = ret.out
  return { ret: cut, bytes: fit.bytes }
}

/** What the forwarder reports, for the syndic's events and its open-job bookkeeping. */
export type ForwarderEvent =
  | { type: 'batch-forwarded'; master: string; jobs: number; returns: number; fromSpool: boolean }
  | { type: 'batch-spooled'; master: string; file: string; returns: number }
  | { type: 'spool-full'; master: string; returns: number; message: string }

export interface ForwarderOptions {
  /** The syndic's id (what it authenticated as). */
  id: string
  link: MasterLink
  spool: BatchSpool
  /** syndic_event_forward_timeout, ms. */
  intervalMs: number
  /** The wait before the spool is tried again and a batch's per-try timeout before it grows with its size, ms (return_retry_timer). */
  retryDelayMs: () => number
  /** syndic_jid_forward_cache_hwm: jids whose load was already sent up. */
  loadCacheSize: number
  /** The link's `max_frame_bytes`: every batch is split to fit it. */
  maxFrameBytes: number
  /** Called when the returns of a batch were acknowledged, spooled or (spool full) dropped: they need not be read again. */
  onSettled: (settled: ReadonlyMap<string, readonly string[]>) => void
  onEvent?: (event: ForwarderEvent) => void
  logger?: Logger
  signal: AbortSignal
}

/** What a job carries up besides its returns. */
export interface JobMeta {
  fun?: string
  load?: Record<string, unknown>
  master_id?: string
}

export class UpperForwarder {
  readonly #o: ForwarderOptions
  readonly #logger: Logger
  #pending = new Map<string, PendingJob>()
  /** Jids whose load this master has had (Salt's jid_forward_cache), oldest first. */
  readonly #loadSent = new Set<string>()
  #timer: NodeJS.Timeout | undefined
  #retryTimer: NodeJS.Timeout | undefined
  #urgent = false
  #sending: Promise<void> | undefined
  #draining: Promise<void> | undefined
  #drainAgain = false
  #fullLogged = 0

  constructor(options: ForwarderOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  get master(): string {
    return this.#o.link.master
  }

  /** Returns waiting to be sent (not yet in a batch). */
  get queued(): number {
    let count = 0
    for (const job of this.#pending.values()) count += job.returns.size
    return count
  }

  /** Batches waiting in the spool. */
  get spooled(): number {
    return this.#o.spool.size
  }

  start(): void {
    this.#timer = setInterval(() => this.#tick(), Math.max(10, this.#o.intervalMs))
    this.#timer.unref()
  }

  #job(jid: string, meta: JobMeta): PendingJob {
    let job = this.#pending.get(jid)
    if (job === undefined) {
      job = { minions: new Set(), returns: new Map() }
      this.#pending.set(jid, job)
    }
    if (meta.fun !== undefined) job.fun = meta.fun
    if (meta.master_id !== undefined) job.master_id = meta.master_id
    if (meta.load !== undefined && !this.#loadSent.has(jid)) job.load = meta.load
    return job
  }

  /** Announces minions for `jid` (and the lower syndics still to hear from); sent at the next chance, not at the next tick. */
  announce(jid: string, minions: Iterable<string>, pending: readonly string[] | undefined, meta: JobMeta = {}): void {
    const job = this.#job(jid, meta)
    for (const id of minions) job.minions.add(id)
    if (pending !== undefined) job.pending = [...pending]
    this.#soon()
  }

  /**
   * Queues one minion's return; it announces that minion too (the upper master may have restarted and
   * forgotten). `last`: the job has nothing more to wait for here, so the batch goes now rather than at the
   * next tick.
   */
  addReturn(jid: string, minion: string, ret: SyndicMinionReturn, meta: JobMeta = {}, last = false): void {
    const job = this.#job(jid, meta)
    job.minions.add(minion)
    job.returns.set(minion, ret)
    if (last) this.#soon()
  }

  #soon(): void {
    this.#urgent = true
    queueMicrotask(() => this.#tick())
  }

  #tick(): void {
    if (this.#o.signal.aborted || this.#sending !== undefined) return
    if (this.#pending.size === 0) return
    this.#urgent = false
    this.#sending = this.#sendPending().finally(() => {
      this.#sending = undefined
      if (this.#urgent) queueMicrotask(() => this.#tick())
    })
  }

  /** Takes everything pending, in batches that fit a frame ({@link splitBatches}), and sends or spools each. */
  async #sendPending(): Promise<void> {
    const taken = this.#pending
    this.#pending = new Map()
    for (const batch of this.#split(taken)) await this.#deliver(batch)
  }

  #split(jobs: ReadonlyMap<string, PendingJob>): Generator<SyndicJobEntry[]> {
    return splitBatches(jobs, {
      maxFrameBytes: this.#o.maxFrameBytes,
      onTruncated: (jid, minion, originalBytes, bytes) =>
        this.#logger.warning(
          `return of minion ${minion} for job ${jid} is ${originalBytes} bytes, more than fits in max_frame_bytes (${this.#o.maxFrameBytes}); forwarding it truncated to ${bytes} bytes, each cut marked`,
        ),
    })
  }

  /** Sends one batch now if the link is up and nothing older waits in the spool; else spools it. */
  async #deliver(jobs: SyndicJobEntry[]): Promise<void> {
    const status = this.#o.link.status
    let why: string
    if (status.authenticated && status.connected && this.#o.spool.size === 0 && !this.#o.signal.aborted) {
      try {
        await this.#send(jobs)
        this.#settled(jobs)
        this.#o.onEvent?.({ type: 'batch-forwarded', master: this.master, jobs: jobs.length, returns: countReturns(jobs), fromSpool: false })
        return
      } catch (error) {
        if (this.#refused(error, jobs)) return
        why = `${(error as Error).name}: ${(error as Error).message}`
      }
    } else {
      why = !status.authenticated
        ? 'not authenticated'
        : !status.connected
          ? 'not connected'
          : this.#o.signal.aborted
            ? 'the syndic is stopping'
            : 'older batches are spooled'
    }
    await this.#spool(jobs, why)
  }

  /** The upper master answered and refused the whole batch: sending it again would not help. Logged, not kept. */
  #refused(error: unknown, jobs: readonly SyndicJobEntry[]): boolean {
    if (!(error instanceof NotAcknowledgedError)) return false
    // Not yet accepted as a syndic up there: the operator's `brine-key --accept-syndic` is the fix, and
    // the batch is kept (spooled) until then rather than lost. Said once per batch as it is spooled.
    if (error.refusal === 'SyndicNotAcceptedError') {
      this.#logger.warning(
        `${this.master} does not accept this syndic's key as a syndic's: on that master, run brine-key --accept-syndic ${this.#o.id}; batches are spooled until then`,
      )
      return false
    }
    this.#logger.error(
      `${this.master} refused a batch of ${countReturns(jobs)} return(s) for job(s) ${jobs
        .map((job) => job.jid)
        .slice(0, 5)
        .join(', ')}: ${error.message}; not sent again`,
    )
    this.#settled(jobs)
    return true
  }

  async #send(jobs: SyndicJobEntry[]): Promise<void> {
    const load: SyndicReturnLoad = { cmd: '_syndic_return', id: this.#o.id, jobs }
    // A batch carries its jobs' returns: like a minion's return, its try grows with its sealed size.
    const delayMs = this.#o.retryDelayMs()
    await this.#o.link.send(load as unknown as { cmd: string }, { timeout: (sealedBytes) => returnTryTimeoutMs(delayMs, sealedBytes), tries: 1 })
    for (const entry of jobs) if (entry.load !== undefined) this.#rememberLoad(entry.jid)
  }

  #rememberLoad(jid: string): void {
    this.#loadSent.delete(jid)
    this.#loadSent.add(jid)
    while (this.#loadSent.size > Math.max(1, this.#o.loadCacheSize)) this.#loadSent.delete(this.#loadSent.keys().next().value as string)
  }

  /** Writes a batch to the spool (or logs it lost when the spool is full); true when it was kept. */
  async #spool(jobs: SyndicJobEntry[], why: string): Promise<boolean> {
    const returns = countReturns(jobs)
    try {
      const file = await this.#o.spool.write(jobs)
      this.#logger.info(`batch of ${returns} return(s) for ${jobs.length} job(s) not delivered to ${this.master} (${why}); spooled to ${file}`)
      this.#o.onEvent?.({ type: 'batch-spooled', master: this.master, file, returns })
      this.#settled(jobs)
      this.#scheduleRetry()
      return true
    } catch (error) {
      const message = error instanceof SyndicSpoolFullError ? error.message : `could not spool a batch for ${this.master}: ${(error as Error).message}`
      // Logged the first time and every 100th after, so a long outage does not flood the log.
      if (this.#fullLogged++ % 100 === 0) {
        this.#logger.error(
          `${message}; ${returns} return(s) of job(s) ${jobs
            .map((job) => job.jid)
            .slice(0, 5)
            .join(', ')} lost for ${this.master}${this.#fullLogged > 1 ? ` (${this.#fullLogged} batches so far)` : ''}`,
        )
      }
      this.#o.onEvent?.({ type: 'spool-full', master: this.master, returns, message })
      this.#settled(jobs)
      return false
    }
  }

  #settled(jobs: readonly SyndicJobEntry[]): void {
    const settled = new Map<string, string[]>()
    for (const entry of jobs) if (entry.returns !== undefined) settled.set(entry.jid, Object.keys(entry.returns))
    if (settled.size > 0) this.#o.onSettled(settled)
  }

  #scheduleRetry(): void {
    if (this.#retryTimer !== undefined || this.#o.signal.aborted) return
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined
      void this.drain()
    }, this.#o.retryDelayMs())
    this.#retryTimer.unref()
  }

  /** Sends spooled batches, oldest first, until the spool is empty or one is not acknowledged. Single-flight. */
  drain(): Promise<void> {
    if (this.#draining !== undefined) {
      this.#drainAgain = true
      return this.#draining
    }
    this.#draining = this.#drainLoop()
      .catch((error: unknown) => this.#logger.error(`sending the spooled batches to ${this.master} failed`, error))
      .finally(() => {
        this.#draining = undefined
        if (this.#drainAgain && !this.#o.signal.aborted) {
          this.#drainAgain = false
          void this.drain()
        }
      })
    return this.#draining
  }

  async #drainLoop(): Promise<void> {
    for (;;) {
      this.#drainAgain = false
      const status = this.#o.link.status
      if (this.#o.signal.aborted || !status.authenticated) return // the next auth drains
      let batch
      try {
        batch = await this.#o.spool.oldest()
      } catch (error) {
        if (!(error instanceof SyndicFileError)) throw error
        this.#logger.error(error.message)
        continue
      }
      if (batch === undefined) return
      try {
        await this.#send(batch.jobs)
      } catch (error) {
        if (this.#refused(error, batch.jobs)) {
          await this.#o.spool.remove(batch.file)
          continue
        }
        if (this.#o.signal.aborted) return
        this.#logger.info(`spooled batch ${batch.file} still not acknowledged by ${this.master} (${(error as Error).message}); will retry`)
        this.#scheduleRetry()
        return
      }
      await this.#o.spool.remove(batch.file)
      this.#logger.info(`delivered spooled batch ${batch.file} (${countReturns(batch.jobs)} return(s)) to ${this.master}`)
      this.#o.onEvent?.({ type: 'batch-forwarded', master: this.master, jobs: batch.jobs.length, returns: countReturns(batch.jobs), fromSpool: true })
    }
  }

  /**
   * Stops the timers; what is still pending is spooled (so a restart sends it), and a batch in flight
   * is waited for.
   */
  async close(): Promise<void> {
    clearInterval(this.#timer)
    clearTimeout(this.#retryTimer)
    this.#timer = undefined
    this.#retryTimer = undefined
    await this.#sending
    await this.#draining
    const left = this.#pending
    this.#pending = new Map()
    for (const batch of this.#split(left)) await this.#spool(batch, 'the syndic is stopping')
  }
}

function countReturns(jobs: readonly SyndicJobEntry[]): number {
  let count = 0
  for (const entry of jobs) count += Object.keys(entry.returns ?? {}).length
  return count
}
