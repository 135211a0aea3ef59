import { threadId, Worker, type ResourceLimits } from 'node:worker_threads'
import type { KeyPair } from '@brine/crypt'
import { LogLimiter, silentLogger, type Logger, type WireValue } from '@brine/core'
import { RebuiltWorkerError, WorkerPoolBusyError, WorkerPoolError } from './errors.js'
import { RequestCrypto, type FromWorker, type RequestWorkerData, type ToWorker, type WorkerTask } from './request-worker.js'

/** How a task may be treated when the workers are behind. */
export interface RunOptions {
  /**
   * A peer's request that is worth nothing late (a minion's `_auth`: its sender gives up after `auth_timeout`):
   * refused with WorkerPoolBusyError, unrun, once it has waited longer than the pool's `maxWaitMs` for a worker.
   */
  shed?: boolean
  /**
   * The master's own work a caller is waiting on (sealing a job's publish): handed to a worker before any peer's
   * task still waiting, so a storm of minions' requests does not hold up the jobs an operator publishes.
   */
  urgent?: boolean
}

/** Where the CPU work of requests runs: inline, or spread over worker threads. */
export interface RequestPool {
  /** Runs `task` on the worker chosen by `key` (a minion id or jid), so per-minion keys stay warm. */
  run(key: string, task: WorkerTask, options?: RunOptions): Promise<WireValue>
  close(): Promise<void>
  readonly size: number
}

/** FNV-1a, 32 bits: cheap and stable, so one minion id always lands on the same worker. */
export function hashKey(key: string): number {
  let hash = 0x811c9dc5
  for (let index = 0; index < key.length; index++) {
    hash ^= key.charCodeAt(index)
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

/** `worker_threads: 0`: the same handler functions, on the main thread. */
export class InlinePool implements RequestPool {
  readonly size = 0
  readonly #crypto: RequestCrypto

  constructor(masterKeys: KeyPair) {
    this.#crypto = new RequestCrypto(masterKeys)
  }

  async run(_key: string, task: WorkerTask): Promise<WireValue> {
    return this.#crypto.run(task)
  }

  async close(): Promise<void> {}
}

interface Settle {
  resolve: (value: WireValue) => void
  reject: (error: Error) => void
}

interface Queued extends Settle {
  task: WorkerTask
  shed: boolean
  since: number
}

interface Slot {
  index: number
  /** The slot's thread while it runs: started by the first task routed here, retired once idle {@link ThreadPoolOptions.idleMs}. */
  worker: Worker | undefined
  /** When the worker last ran out of tasks (this thread's clock, ms). */
  idleSince: number
  pending: Map<number, { op: WorkerTask['op'] } & Settle>
  /** Tasks waiting for one of the worker's `maxInFlight` places, oldest first. */
  queue: Queued[]
  /** Urgent tasks waiting, handed out before any of `queue`. */
  urgent: Queued[]
  /** Index of the queue's head (the queue is compacted when it drains). */
  head: number
}

/** Tasks handed to one worker at once: enough to keep it busy while its answers cross to this thread and the next tasks come. */
export const DEFAULT_WORKER_IN_FLIGHT = 32
/** How long a sheddable task may wait for a worker: well inside Salt's default auth_timeout (5 s), so what is run is still awaited. */
export const DEFAULT_WORKER_MAX_WAIT_MS = 2000
/**
 * How long a worker may sit without a task before its thread is stopped. Each worker is an isolate of its own
 * (its heap, the modules it loaded, its young generation grown by the last storm), and a master's workers are
 * busy only in storms (minions authenticating, large publishes, logins): between them the thread would hold
 * that memory for nothing. The next task starts a fresh one, which costs that task the thread's start.
 */
export const DEFAULT_WORKER_IDLE_MS = 10_000
/**
 * Each worker isolate's young generation, MiB (V8's `maxYoungGenerationSizeMb`: three semi-spaces' worth). A
 * worker's tasks are short and keep little, so a small young generation costs it a few cheap scavenges in a storm,
 * where V8's own bound let each worker hold 4–7 MiB of it. A process-wide `--max-semi-space-size` overrides it
 * (brine-master clears its own once started: packages/cli/src/daemon-process.ts).
 */
export const WORKER_YOUNG_GENERATION_MB = 3

/** A thread pool's load: tasks handed to the workers, waiting for one, and refused unrun since it started. */
export interface ThreadPoolLoad {
  inFlight: number
  waiting: number
  shed: number
}

/** A thread pool's threads: running now, started and stopped for idleness since the pool was made. */
export interface ThreadPoolWorkers {
  running: number
  started: number
  retired: number
}

/** What a thread pool's workers have done: tasks per kind that a worker thread (not this one) reports it ran, and how many of its `size` worker slots ran them. */
export interface ThreadPoolStats {
  size: number
  offThread: Partial<Record<WorkerTask['op'], number>>
  threads: number
}

export interface ThreadPoolOptions {
  size: number
  /** The built `request-worker.js`. */
  script: URL
  masterKeys: KeyPair
  logger?: Logger
  /** Tasks handed to each worker at once (default {@link DEFAULT_WORKER_IN_FLIGHT}); the rest wait on this thread. */
  maxInFlight?: number
  /** How long a sheddable task ({@link RunOptions.shed}) may wait for a worker (default {@link DEFAULT_WORKER_MAX_WAIT_MS}). */
  maxWaitMs?: number
  /** This thread's clock for the waits (default performance.now; tests inject one). */
  now?: () => number
  /** A worker without a task this long (ms) is stopped until the next one (default {@link DEFAULT_WORKER_IDLE_MS}; Infinity keeps it). */
  idleMs?: number
}

/**
 * `worker_threads: N`: up to N node:worker_threads running {@link RequestCrypto}. A slot's thread starts
 * with the first task routed to it and stops once it has been idle `idleMs`, so an idle master holds no
 * worker isolate. A worker that dies fails only its own pending tasks and is replaced; the key store stays
 * on this thread, which asks it between tasks (an `_auth`'s checks, then its acceptance).
 *
 * Each worker holds at most `maxInFlight` tasks; the rest wait here in arrival order, so a storm of
 * requests costs this thread a small record each instead of filling the workers' message queues and
 * heaps with work begun and parked. A sheddable task that waited past `maxWaitMs` is refused unrun
 * (WorkerPoolBusyError, counted in {@link load}): under a storm the workers spend themselves on
 * requests still awaited, and the refused minions ask again after their backoff.
 */
export class ThreadPool implements RequestPool {
  readonly size: number
  readonly #options: ThreadPoolOptions
  readonly #logger: Logger
  readonly #slots: Slot[] = []
  #nextTask = 0
  #closing = false
  readonly #offThread: Partial<Record<WorkerTask['op'], number>> = {}
  /**
   * The slots whose worker thread reported tasks done from a thread other than this one: proof the work left this
   * thread. Slots, not thread ids: a slot's thread stopped for idleness and started again is still one of `size`.
   */
  readonly #threads = new Set<number>()
  readonly #maxInFlight: number
  readonly #maxWaitMs: number
  readonly #now: () => number
  readonly #shedLog = new LogLimiter()
  #shed = 0
  readonly #idleMs: number
  #idleTimer: NodeJS.Timeout | undefined
  #started = 0
  #retired = 0
  /** Retired threads still stopping: {@link close} waits for them too. */
  readonly #stopping = new Set<Promise<number>>()

  constructor(options: ThreadPoolOptions) {
    if (!Number.isInteger(options.size) || options.size < 1) throw new RangeError(`worker pool size must be a positive integer, got ${options.size}`)
    const maxInFlight = options.maxInFlight ?? DEFAULT_WORKER_IN_FLIGHT
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new RangeError(`worker in-flight bound must be a positive integer, got ${maxInFlight}`)
    this.size = options.size
    this.#options = options
    this.#logger = options.logger ?? silentLogger
    this.#maxInFlight = maxInFlight
    this.#maxWaitMs = Math.max(0, options.maxWaitMs ?? DEFAULT_WORKER_MAX_WAIT_MS)
    this.#now = options.now ?? (() => performance.now())
    const idleMs = options.idleMs ?? DEFAULT_WORKER_IDLE_MS
    if (!(idleMs > 0)) throw new RangeError(`worker idle bound must be a positive number of ms, got ${idleMs}`)
    this.#idleMs = idleMs
    for (let index = 0; index < options.size; index++) {
      this.#slots.push({ index, worker: undefined, idleSince: 0, pending: new Map(), urgent: [], queue: [], head: 0 })
    }
  }

  #spawn(slot: Slot): Worker {
    const index = slot.index
    const data: RequestWorkerData = { brineRequestWorker: true, masterKeys: this.#options.masterKeys }
    const worker = new Worker(this.#options.script, { workerData: data, resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB } })
    slot.worker = worker
    this.#started++
    worker.on('message', (message: FromWorker) => this.#onMessage(slot, message))
    // A retired worker's last events concern no task: the slot may already run its successor.
    const current = (): boolean => slot.worker === worker
    const failAll = (reason: string): void => {
      for (const { reject } of slot.pending.values()) reject(new WorkerPoolError(`request worker ${index} ${reason}`, { worker: index }))
      slot.pending.clear()
    }
    worker.on('error', (error) => {
      if (!current()) return
      this.#logger.error(`request worker ${index} failed: ${error.message}`)
      failAll(`failed: ${error.message}`)
    })
    worker.on('exit', (code) => {
      if (!current()) return
      slot.worker = undefined
      failAll(`exited with code ${code}`)
      if (this.#closing) {
        this.#failQueued(slot, new WorkerPoolError('request worker pool is closed'))
        return
      }
      this.#logger.error(`request worker ${index} exited with code ${code}; the next task starts a new one`)
      this.#next(slot)
    })
    this.#idleTimer ??= setInterval(() => this.#retireIdle(), Math.min(this.#idleMs, 1000)).unref()
    return worker
  }

  /** Stops the threads that have had no task for `idleMs`: their isolates' memory goes back with them. */
  #retireIdle(): void {
    const now = this.#now()
    for (const slot of this.#slots) {
      const worker = slot.worker
      if (worker === undefined || !this.#idle(slot) || now - slot.idleSince < this.#idleMs) continue
      slot.worker = undefined
      this.#retired++
      const stopping = worker.terminate().catch(() => 0)
      this.#stopping.add(stopping)
      void stopping.then(() => this.#stopping.delete(stopping))
    }
  }

  #idle(slot: Slot): boolean {
    return slot.pending.size === 0 && slot.urgent.length === 0 && slot.head === slot.queue.length
  }

  #onMessage(slot: Slot, message: FromWorker): void {
    const task = slot.pending.get(message.taskId)
    slot.pending.delete(message.taskId)
    if (task !== undefined && message.threadId !== threadId) {
      this.#offThread[task.op] = (this.#offThread[task.op] ?? 0) + 1
      this.#threads.add(slot.index)
    }
    if (message.error !== undefined) task?.reject(new RebuiltWorkerError(message.error))
    else task?.resolve(message.value)
    this.#next(slot)
  }

  /**
   * Starts every slot's thread now, without waiting for a task. A master restarted over a kept session key calls it as
   * it starts: its minions come back within a second, each with a request whose crypto needs a worker, and a thread
   * started by the first of them boots (loads its modules) while the rest queue behind it. Threads given nothing
   * to do are retired after `idleMs`, as any idle thread is.
   */
  prestart(): void {
    if (this.#closing) return
    for (const slot of this.#slots) {
      if (slot.worker !== undefined) continue
      this.#spawn(slot)
      slot.idleSince = this.#now()
    }
  }

  #post(slot: Slot, task: WorkerTask, settle: Settle): void {
    const taskId = this.#nextTask++
    const worker = slot.worker ?? this.#spawn(slot)
    slot.pending.set(taskId, { op: task.op, ...settle })
    worker.postMessage({ type: 'task', taskId, task } satisfies ToWorker)
  }

  run(key: string, task: WorkerTask, options: RunOptions = {}): Promise<WireValue> {
    if (this.#closing) return Promise.reject(new WorkerPoolError('request worker pool is closed'))
    const slot = this.#slots[hashKey(key) % this.size]!
    return new Promise((resolve, reject) => {
      const urgent = options.urgent === true
      const ahead = urgent ? slot.urgent.length : slot.urgent.length + slot.queue.length - slot.head
      if (slot.pending.size < this.#maxInFlight && ahead === 0) this.#post(slot, task, { resolve, reject })
      else (urgent ? slot.urgent : slot.queue).push({ task, shed: options.shed === true, since: this.#now(), resolve, reject })
    })
  }

  /** Hands the worker its next waiting tasks, refusing the sheddable ones that waited too long. */
  #next(slot: Slot): void {
    while (slot.pending.size < this.#maxInFlight && slot.urgent.length > 0) {
      const queued = slot.urgent.shift()!
      this.#post(slot, queued.task, queued)
    }
    while (slot.pending.size < this.#maxInFlight && slot.head < slot.queue.length) {
      const queued = slot.queue[slot.head]!
      slot.queue[slot.head++] = undefined as unknown as Queued
      const waited = this.#now() - queued.since
      if (queued.shed && waited > this.#maxWaitMs) this.#refuse(queued, waited)
      else this.#post(slot, queued.task, queued)
    }
    if (slot.head === slot.queue.length || slot.head > 1024) {
      slot.queue.splice(0, slot.head)
      slot.head = 0
    }
    if (this.#idle(slot)) slot.idleSince = this.#now()
  }

  #refuse(queued: Queued, waited: number): void {
    this.#shed++
    const error = new WorkerPoolBusyError(Math.round(waited), this.#maxWaitMs)
    this.#shedLog.warning(this.#logger, `${error.message} (${this.#shed} refused so far)`, 'requests refused by busy workers')
    queued.reject(error)
  }

  #failQueued(slot: Slot, error: Error): void {
    for (const queued of slot.urgent.splice(0)) queued.reject(error)
    for (let index = slot.head; index < slot.queue.length; index++) slot.queue[index]!.reject(error)
    slot.queue.length = 0
    slot.head = 0
  }

  /** Tasks handed to the workers, waiting for one, and refused unrun so far. */
  load(): ThreadPoolLoad {
    let inFlight = 0
    let waiting = 0
    for (const slot of this.#slots) {
      inFlight += slot.pending.size
      waiting += slot.urgent.length + slot.queue.length - slot.head
    }
    return { inFlight, waiting, shed: this.#shed }
  }

  /** The threads running now, and those started and retired for idleness so far. */
  workers(): ThreadPoolWorkers {
    return { running: this.#slots.filter((slot) => slot.worker !== undefined).length, started: this.#started, retired: this.#retired }
  }

  /** The engine's bounds of each running worker thread (its young generation's among them). */
  workerLimits(): ResourceLimits[] {
    return this.#slots.flatMap((slot) => (slot.worker === undefined ? [] : [slot.worker.resourceLimits ?? {}]))
  }

  /** The tasks the worker threads ran, by kind, and how many of the worker slots ran them. */
  stats(): ThreadPoolStats {
    return { size: this.size, offThread: { ...this.#offThread }, threads: this.#threads.size }
  }

  async close(): Promise<void> {
    if (this.#closing) return
    this.#closing = true
    if (this.#idleTimer !== undefined) clearInterval(this.#idleTimer)
    for (const slot of this.#slots) this.#failQueued(slot, new WorkerPoolError('request worker pool is closed'))
    await Promise.all([...this.#slots.map((slot) => slot.worker?.terminate()), ...this.#stopping])
  }
}
