import { collectReturns, type CollectedReturn, type JobSource } from '@brine/common'
import { type BusEvent, type Target } from '@brine/protocol'
import type { Logger } from '@brine/core'
import { JobClosedError } from './errors.js'

/**
 * What {@link Job.returns} yields: a minion's return, or a minion that never answered. `fromCache`
 * marks a return read back from the master's job cache (its event never reached this reader, or came
 * before the reader opened); it keeps the stored retcode and success.
 */
export type CliReturn = CollectedReturn

export interface WaitOptions {
  /** ms before the first find_job (default: config `timeout`). */
  timeout?: number
  /** ms each find_job round waits, and the extension per still-running minion (default: config `gather_job_timeout`). */
  gatherJobTimeout?: number
  signal?: AbortSignal
}

/** A reader of the master's job events (`salt/job/…`), and how to end it. */
export interface JobEventReader {
  events: AsyncIterable<BusEvent>
  stop: () => void
  /** Buffers from now on only the events of these jids (undefined: every job event); see CollectReturnsOptions.focus. */
  focus?: (jids: ReadonlySet<string> | undefined) => void
}

/** What a Job needs of the client that published it. */
export interface JobHost {
  /** Opens a reader of the bus's job events (registered at once, so nothing fired after this call is missed). */
  openReader(): JobEventReader
  /** find_job and the job cache, for the return collector. */
  source: JobSource
  /** Config `timeout`, `gather_job_timeout` and `syndic_wait`, in ms. */
  waits(): { timeout: number; gatherJobTimeout: number; syndicWait?: number }
  logger: Logger
}

/**
 * A published job: its jid, the minions expected to return, and its returns on demand. A Job that
 * is never collected holds no bus reader (unless it was published with `listen: true`, whose reader
 * was opened before the publish and is held until `returns()` finishes or `close()`). `returns()`
 * opens a reader, then reads the job cache for returns that arrived before it (race-free: a return
 * is stored before its event is fired), then yields the rest as they arrive, with Salt's find_job wait.
 *
 * ```ts
 * await using job = await client.runJob('web*', 'cmd.run', ['uptime'])
 * for await (const ret of job.returns()) console.log(ret.id, ret.status)
 * ```
 */
export class Job implements AsyncDisposable {
  readonly jid: string
  readonly minions: readonly string[]
  /**
   * With `order_masters`: the syndics that may announce minions for this job, each with the minions it
   * answered for before that the target may select; undefined on a master without syndics.
   */
  readonly syndics: Readonly<Record<string, readonly string[]>> | undefined
  /** A list target's ids that are not accepted minions (Salt's `missing`): they cannot return. */
  readonly missing: readonly string[]
  /** The job's target as published, when known: a find_job round may ask it instead of listing many missing minions. */
  readonly target: Target | undefined
  readonly #host: JobHost
  /** A reader opened before the publish, for the first returns() to use (no cache catch-up needed). */
  #early: JobEventReader | undefined
  readonly #readers = new Set<JobEventReader>()
  #closed = false

  constructor(
    host: JobHost,
    jid: string,
    minions: readonly string[],
    early?: JobEventReader,
    syndics?: Readonly<Record<string, readonly string[]>>,
    missing: readonly string[] = [],
    target?: Target,
  ) {
    this.#host = host
    this.jid = jid
    this.minions = [...minions]
    this.syndics = syndics
    this.missing = [...missing]
    this.target = target
    this.#early = early
  }

  /** Whether anyone may return: an expected minion, or a syndic that may announce some. */
  get expectsReturns(): boolean {
    return this.minions.length > 0 || Object.keys(this.syndics ?? {}).length > 0
  }

  /** True while this Job holds an open bus reader. */
  get listening(): boolean {
    return this.#early !== undefined || this.#readers.size > 0
  }

  /**
   * The returns of this job from the expected minions as they arrive (and from minions that were not
   * expected; behind syndics, those each syndic announces, waiting up to `syndic_wait` past `timeout` for
   * the announcements), then a `missing` marker for each minion that neither returned nor was found
   * still running the job: at `timeout` the missing minions are asked `saltutil.find_job`; each one
   * still running extends the wait by `gatherJobTimeout`; the job cache has the last word. `signal`
   * ends the wait without markers. Nothing is expected (no minion matched): yields nothing.
   */
  async *returns(options: WaitOptions = {}): AsyncGenerator<CliReturn> {
    if (this.#closed) throw new JobClosedError(this.jid)
    const early = this.#early
    this.#early = undefined
    if (!this.expectsReturns) {
      early?.stop()
      return
    }
    const reader = early ?? this.#host.openReader()
    this.#readers.add(reader)
    const waits = this.#host.waits()
    try {
      yield* collectReturns({
        jid: this.jid,
        minions: this.minions,
        ...(this.target === undefined ? {} : { target: this.target }),
        ...(this.syndics === undefined ? {} : { syndics: this.syndics, syndicWait: waits.syndicWait ?? 0 }),
        events: reader.events,
        ...(reader.focus === undefined ? {} : { focus: reader.focus }),
        source: this.#host.source,
        catchUp: early === undefined,
        timeout: options.timeout ?? waits.timeout,
        gatherJobTimeout: options.gatherJobTimeout ?? waits.gatherJobTimeout,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        logger: this.#host.logger,
      })
    } finally {
      reader.stop()
      this.#readers.delete(reader)
    }
  }

  /** Stops reading returns (the job keeps running on the minions). Idempotent. */
  async close(): Promise<void> {
    this.#closed = true
    this.#early?.stop()
    this.#early = undefined
    for (const reader of this.#readers) reader.stop()
    this.#readers.clear()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
