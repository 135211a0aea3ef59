import type { WireValue } from '@brine/core'
import type { WorkerTask } from './request-worker.js'
import type { InlinePool, RequestPool, RunOptions, ThreadPool, ThreadPoolStats } from './worker-pool.js'

/**
 * Tasks begun within {@link WORKER_START_WINDOW_MS} that make a master start its request worker threads. A worker
 * thread is a Node isolate that loads its modules before its first task, many times the CPU of one task (an
 * `_auth`'s signature checks, a box's shared key): a master with a handful of minions would pay that for
 * nothing, while a herd's hundreds of tasks are what the threads are for. Below the bound the main thread
 * runs the tasks itself, as with `worker_threads: 0`.
 */
export const WORKER_START_TASKS = 32
/** The window {@link WORKER_START_TASKS} is counted over, ms. */
export const WORKER_START_WINDOW_MS = 1000

export interface DemandPoolOptions {
  /** Runs the tasks while the demand is low. */
  inline: InlinePool
  /** Runs them once it is high, starting its threads as tasks reach them. */
  threads: ThreadPool
  /** Tasks begun within `windowMs` that start the threads (default {@link WORKER_START_TASKS}). */
  startTasks?: number
  /** The window, ms (default {@link WORKER_START_WINDOW_MS}). */
  windowMs?: number
  /** This thread's clock (default performance.now; tests inject one). */
  now?: () => number
}

/** What a {@link DemandPool} has run where: the worker threads' account, and the tasks run on this thread by kind. */
export interface DemandPoolStats extends ThreadPoolStats {
  inline: Partial<Record<WorkerTask['op'], number>>
}

/**
 * `worker_threads: N` as the master runs it: N worker threads at most, started only when the work warrants them.
 * Tasks run on this thread until `startTasks` of them have begun within `windowMs`; from then on they go to the
 * thread pool, which starts each slot's thread at the first task routed to it. Once every thread has retired
 * for idleness the count starts again, so a quiet master goes back to running its few tasks itself.
 */
export class DemandPool implements RequestPool {
  readonly size: number
  readonly #inline: InlinePool
  readonly #threads: ThreadPool
  readonly #windowMs: number
  readonly #now: () => number
  /** When the last `startTasks` tasks counted here began, a ring: the earliest is overwritten next. */
  readonly #begun: number[]
  #nextBegun = 0
  readonly #inlineRan: Partial<Record<WorkerTask['op'], number>> = {}

  constructor(options: DemandPoolOptions) {
    const startTasks = options.startTasks ?? WORKER_START_TASKS
    if (!Number.isInteger(startTasks) || startTasks < 1) throw new RangeError(`worker start bound must be a positive integer of tasks, got ${startTasks}`)
    const windowMs = options.windowMs ?? WORKER_START_WINDOW_MS
    if (!(windowMs > 0)) throw new RangeError(`worker start window must be a positive number of ms, got ${windowMs}`)
    this.size = options.threads.size
    this.#inline = options.inline
    this.#threads = options.threads
    this.#windowMs = windowMs
    this.#now = options.now ?? (() => performance.now())
    this.#begun = new Array<number>(startTasks).fill(Number.NEGATIVE_INFINITY)
  }

  run(key: string, task: WorkerTask, options?: RunOptions): Promise<WireValue> {
    if (this.#threads.workers().running > 0 || this.#busy()) return this.#threads.run(key, task, options)
    this.#inlineRan[task.op] = (this.#inlineRan[task.op] ?? 0) + 1
    return this.#inline.run(key, task)
  }

  /** Counts a task begun now; true once `startTasks` have begun within the window, this one included. */
  #busy(): boolean {
    const now = this.#now()
    this.#begun[this.#nextBegun] = now
    this.#nextBegun = (this.#nextBegun + 1) % this.#begun.length
    // The slot written next holds the earliest of the last `startTasks` tasks.
    return now - this.#begun[this.#nextBegun]! < this.#windowMs
  }

  /** The worker threads' account (tasks they ran, by kind) and the tasks run on this thread, by kind. */
  stats(): DemandPoolStats {
    return { ...this.#threads.stats(), inline: { ...this.#inlineRan } }
  }

  /** Starts every thread now, ahead of a herd known to be coming (a restarted master's session-key holders); tasks go to them from here. */
  prestart(): void {
    this.#threads.prestart()
  }

  /** The thread pool's threads: running now, started and retired so far. */
  workers(): ReturnType<ThreadPool['workers']> {
    return this.#threads.workers()
  }

  async close(): Promise<void> {
    await Promise.all([this.#inline.close(), this.#threads.close()])
  }
}
