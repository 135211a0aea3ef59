import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import type { Logger } from '@brine/core'

/**
 * What a master gives back once a load is over. Under a stream of returns V8 lets its heap grow well past what is
 * live and keeps the pages it freed, and glibc keeps what the freed buffers held: after 200,000 returns a master
 * held twice its working size for as long as it ran. A memory-reducing collection (V8's last-resort flavour:
 * several full collections, the young generation shrunk, freed pages handed back) returns it, but it stops the
 * master while it runs (several full collections, none of them concurrent: hundreds of ms on a loaded machine),
 * so it runs only once the master's event loop has been idle a little while after its resident size grew. Run under
 * load (a bound on the resident size, collecting every few seconds) it held a 1,000-minion master under 300 MiB
 * through its throughput phase, but stalled it for seconds at a time through a burst.
 */
export interface IdleCollectorOptions {
  /** The memory-reducing collection ({@link memoryReducingGc}). */
  collect: () => void
  /** The process's resident bytes now. */
  rssBytes: () => number
  /**
   * The share of the time since the previous call its event loop was busy (0–1). Not its CPU time: a master
   * starved of CPU on a loaded machine is busy at a small share of a core.
   */
  busyShare: () => number
  /** This clock, ms. */
  now: () => number
  /** How long the process must have been idle before it collects, ms (default {@link IDLE_COLLECT_AFTER_MS}). */
  idleMs?: number
  /** Growth of the resident size since the last collection (or the start) that makes one worth it, bytes (default {@link IDLE_COLLECT_GROWTH_BYTES}). */
  growthBytes?: number
  /** The resident size growth is first measured from, bytes (default: the size when the collector is made; 0: the first idle spell collects). */
  baselineBytes?: number
  logger?: Logger
}

/** A daemon's settings of its collector: see {@link IdleCollectorOptions}, and `rounds` of {@link memoryReducingGc} a collection runs (default 1). */
export type IdleCollection = Pick<IdleCollectorOptions, 'growthBytes' | 'baselineBytes'> & { rounds?: number }

/** Idle for this long (ms): the load is over, not paused between two jobs of a batch. */
export const IDLE_COLLECT_AFTER_MS = 2000
/** Resident growth that makes a collection worth its pause: less than what a burst of returns leaves. */
export const IDLE_COLLECT_GROWTH_BYTES = 48 * 1024 * 1024
/** How often the collector looks (ms). */
export const IDLE_CHECK_EVERY_MS = 1000
/**
 * An event loop busy less than this share of the time is idle: a master with 1,000 minions connected and no jobs
 * (its timers, the minions' events, the readers of its bus) is well under it, one storing returns near 1.
 */
export const IDLE_BUSY_SHARE = 0.3

export class IdleCollector {
  readonly #o: IdleCollectorOptions
  readonly #idleMs: number
  readonly #growthBytes: number
  #baseline: number
  /** When the process was last seen busy. */
  #busyAt: number
  #timer: NodeJS.Timeout | undefined
  /** Collections run so far. */
  collections = 0

  constructor(options: IdleCollectorOptions) {
    this.#o = options
    this.#idleMs = options.idleMs ?? IDLE_COLLECT_AFTER_MS
    this.#growthBytes = options.growthBytes ?? IDLE_COLLECT_GROWTH_BYTES
    this.#baseline = options.baselineBytes ?? options.rssBytes()
    this.#busyAt = options.now()
  }

  /** Looks every {@link IDLE_CHECK_EVERY_MS} until {@link stop}; the timer does not keep the process alive. */
  start(): void {
    this.#timer ??= setInterval(() => this.check(), IDLE_CHECK_EVERY_MS).unref()
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer)
    this.#timer = undefined
  }

  /** One look: collects when the process has been idle `idleMs` and has grown `growthBytes` since the last collection. Returns whether it collected. */
  check(): boolean {
    const o = this.#o
    const now = o.now()
    if (o.busyShare() >= IDLE_BUSY_SHARE) this.#busyAt = now
    const before = o.rssBytes()
    // A size that fell by itself becomes the new baseline: only growth past it calls for a collection.
    if (before < this.#baseline) this.#baseline = before
    if (now - this.#busyAt < this.#idleMs || before - this.#baseline < this.#growthBytes) return false
    const started = o.now()
    o.collect()
    const after = o.rssBytes()
    this.#baseline = after
    this.collections++
    // The collection's own pause is not load.
    o.busyShare()
    const mib = (bytes: number): string => (bytes / 1048576).toFixed(0)
    o.logger?.info(`idle after a load: memory-reducing collection in ${Math.round(o.now() - started)} ms, resident ${mib(before)} → ${mib(after)} MiB`)
    return true
  }
}

/** Options of V8's `gc`, as `--expose-gc` gives it. */
type GcOptions = { type: 'major'; execution: 'sync' | 'async'; flavor?: 'last-resort' }

/**
 * V8's `gc`, without exposing it to the process's own code: the flag is set, and the function taken from a fresh
 * context, where V8 installs it. Taken once the daemon has started (a V8 flag changed earlier makes V8 refuse Node's
 * compiled-code cache for every module loaded after it).
 */
function hiddenGc(): (options: GcOptions) => void | Promise<void> {
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as (options: GcOptions) => void | Promise<void>
}

/**
 * V8's memory-reducing full collection, `rounds` times: the first in the caller's turn, each other one in a later turn
 * of the event loop, so that a job arriving meanwhile waits for one round at most. V8 drops the bytecode of a function
 * that has not run for a few full collections (it compiles it again if it runs), so a single collection leaves it: it
 * takes three in a row to free the bytecode of what ran once, and a fourth to hand its pages back. The promise resolves
 * once every round has run.
 */
export function memoryReducingGc(rounds = 1): () => Promise<void> {
  const gc = hiddenGc()
  const round = (): void => void gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
  return async () => {
    round()
    for (let done = 1; done < rounds; done++) {
      await new Promise<void>((resolve) => setImmediate(resolve))
      round()
    }
  }
}

/** V8's regular full collection, started from a task of its own rather than inside the caller's turn of the event loop. */
export function fullGc(): () => void {
  const gc = hiddenGc()
  return () => void gc({ type: 'major', execution: 'async' })
}

/**
 * A minion's collection: once after its start, and after what a job left. An idle minion is most of a minion's life,
 * and what it holds then is mostly its start's leftovers: the young generation grown while its modules loaded, the
 * bytecode of what ran only once (argument parsing, the config, the first authentication), freed pages V8 and glibc
 * keep. A regular collection leaves them; V8 would only hand them back under memory pressure, which an idle minion
 * never makes. So the first idle spell collects (its pause falls on an idle process), and then a job that left a few
 * MiB more (a large return, a file copy) does; the small growth each ping leaves does not. Each runs four rounds, the
 * fewest that free that bytecode and hand back its pages; what runs again afterwards (the next job's path) is compiled again, once.
 */
export const MINION_IDLE_COLLECTION: IdleCollection = { growthBytes: 4 * 1024 * 1024, baselineBytes: 0, rounds: 4 }

/** A daemon's collector over this process (the master's by default; `settings` for another daemon's). */
export function processIdleCollector(logger?: Logger, settings: IdleCollection = {}): IdleCollector {
  let last = performance.eventLoopUtilization()
  const { rounds, ...options } = settings
  return new IdleCollector({
    ...options,
    collect: memoryReducingGc(rounds),
    rssBytes: () => process.memoryUsage.rss(),
    busyShare: () => {
      const now = performance.eventLoopUtilization()
      const share = performance.eventLoopUtilization(now, last).utilization
      last = now
      return share
    },
    now: () => performance.now(),
    ...(logger === undefined ? {} : { logger }),
  })
}
