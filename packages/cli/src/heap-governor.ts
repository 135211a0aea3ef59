import type { Logger } from '@brine/core'

/**
 * The master's old generation under memory pressure. V8 collects the old generation once it has grown a set share
 * past what survived the previous full collection; the master sets that share to 150 % (`MASTER_HEAP_GROWING_PERCENT`),
 * which costs little CPU while a load runs, but through a burst of returns it multiplies whatever is live then (the
 * requests in flight, the bus readers' queues, the job cache's index) by 2.5, and V8 keeps the pages a collection
 * frees for its next allocations until a memory-reducing collection, so the process stays as large as its heap has
 * been. So the share is a function of the process's resident size: past {@link HEAP_PRESSURE_HIGH_BYTES} V8
 * collects at {@link HEAP_PRESSURE_GROWING_PERCENT} past what is live, and once the size is back under
 * {@link HEAP_PRESSURE_LOW_BYTES} (the load over, the idle collection done) at the relaxed share again. Full
 * collections come more often while it is tight, most of their marking concurrent; nothing is refused or dropped.
 */
export interface HeapGovernorOptions {
  /** The process's resident bytes now. */
  rssBytes: () => number
  /** Sets V8's `--heap-growing-percent` (it takes effect at the next full collection). */
  setGrowingPercent: (percent: number) => void
  /**
   * A full collection, run once as the share tightens: V8 sets the old generation's next limit only at a full
   * collection, and the one before the pressure set it at the relaxed share.
   */
  collect?: () => void
  /** The share while under pressure, % (default {@link HEAP_PRESSURE_GROWING_PERCENT}). */
  tightPercent?: number
  /** The share otherwise, % (the master's own). */
  relaxedPercent: number
  /** Resident size at and above which the share is tight, bytes (default {@link HEAP_PRESSURE_HIGH_BYTES}). */
  highBytes?: number
  /** Resident size under which it is relaxed again, bytes (default {@link HEAP_PRESSURE_LOW_BYTES}). */
  lowBytes?: number
  logger?: Logger
}

/** Past this resident size the master is in a burst, well beyond what 1,000 minions and a load's job cache hold at rest. */
export const HEAP_PRESSURE_HIGH_BYTES = 208 * 1024 * 1024
/** Back under this, the pressure is over: far enough under the mark that the share does not flip at every collection. */
export const HEAP_PRESSURE_LOW_BYTES = 176 * 1024 * 1024
/** The old generation's growth past what is live while under pressure, %. */
export const HEAP_PRESSURE_GROWING_PERCENT = 25
/** How often the governor looks (ms): often enough that a burst cannot grow the heap far past the mark before it does. */
export const HEAP_PRESSURE_CHECK_EVERY_MS = 250

export class HeapGovernor {
  readonly #o: HeapGovernorOptions
  readonly #tightPercent: number
  readonly #highBytes: number
  readonly #lowBytes: number
  #timer: NodeJS.Timeout | undefined
  /** Whether the tight share is set. */
  tight = false
  /** Times the share went tight so far. */
  tightenings = 0

  constructor(options: HeapGovernorOptions) {
    this.#o = options
    this.#tightPercent = options.tightPercent ?? HEAP_PRESSURE_GROWING_PERCENT
    this.#highBytes = options.highBytes ?? HEAP_PRESSURE_HIGH_BYTES
    this.#lowBytes = Math.min(options.lowBytes ?? HEAP_PRESSURE_LOW_BYTES, this.#highBytes)
  }

  /** Looks every {@link HEAP_PRESSURE_CHECK_EVERY_MS} until {@link stop}; the timer does not keep the process alive. */
  start(): void {
    this.#timer ??= setInterval(() => this.check(), HEAP_PRESSURE_CHECK_EVERY_MS).unref()
  }

  /** Stops looking and leaves the relaxed share set. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer)
    this.#timer = undefined
    if (this.tight) this.#set(false, this.#o.rssBytes())
  }

  /** One look: tightens at the high mark, relaxes under the low one. Returns whether the share is tight now. */
  check(): boolean {
    const rss = this.#o.rssBytes()
    if (!this.tight && rss >= this.#highBytes) this.#set(true, rss)
    else if (this.tight && rss < this.#lowBytes) this.#set(false, rss)
    return this.tight
  }

  #set(tight: boolean, rss: number): void {
    const percent = tight ? this.#tightPercent : this.#o.relaxedPercent
    this.#o.setGrowingPercent(percent)
    this.tight = tight
    if (tight) {
      this.tightenings++
      this.#o.collect?.()
    }
    this.#o.logger?.debug(`resident ${Math.round(rss / 1048576)} MiB: old generation collected at ${percent} % past what is live`)
  }
}
