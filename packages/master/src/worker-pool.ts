import { threadId, Worker } from 'node:worker_threads'
import type { KeyPair } from '@brine/crypt'
import { silentLogger, type Logger, type WireValue } from '@brine/core'
import { RebuiltWorkerError, WorkerPoolError } from './errors.js'
import { RequestCrypto, type FromWorker, type RequestWorkerData, type SubmitKey, type ToWorker, type WorkerTask } from './request-worker.js'

/** Where the CPU work of requests runs: inline, or spread over worker threads. */
export interface RequestPool {
  /** Runs `task` on the worker chosen by `key` (a minion id or jid), so per-minion keys stay warm. */
  run(key: string, task: WorkerTask): Promise<WireValue>
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
  readonly #submit: SubmitKey

  constructor(masterKeys: KeyPair, submit: SubmitKey) {
    this.#crypto = new RequestCrypto(masterKeys)
    this.#submit = submit
  }

  run(_key: string, task: WorkerTask): Promise<WireValue> {
    return this.#crypto.run(task, this.#submit)
  }

  async close(): Promise<void> {}
}

interface Slot {
  worker: Worker
  pending: Map<number, { op: WorkerTask['op']; resolve: (value: WireValue) => void; reject: (error: Error) => void }>
}

/** What a thread pool's workers have done: tasks per kind that a worker thread (not this one) reports it ran, and how many threads ran them. */
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
  submit: SubmitKey
  logger?: Logger
}

/**
 * `worker_threads: N`: N node:worker_threads running {@link RequestCrypto}. A worker that dies
 * fails only its own pending tasks and is replaced; the key store stays on this thread and is
 * reached from a worker through a `submit` message.
 */
export class ThreadPool implements RequestPool {
  readonly size: number
  readonly #options: ThreadPoolOptions
  readonly #logger: Logger
  readonly #slots: Slot[] = []
  #nextTask = 0
  #closing = false
  readonly #offThread: Partial<Record<WorkerTask['op'], number>> = {}
  /** The thread ids that reported tasks done: proof the work left this thread, whichever worker slot ran it. */
  readonly #threads = new Set<number>()

  constructor(options: ThreadPoolOptions) {
    if (!Number.isInteger(options.size) || options.size < 1) throw new RangeError(`worker pool size must be a positive integer, got ${options.size}`)
    this.size = options.size
    this.#options = options
    this.#logger = options.logger ?? silentLogger
    for (let index = 0; index < options.size; index++) this.#slots.push(this.#spawn(index))
  }

  #spawn(index: number): Slot {
    const data: RequestWorkerData = { brineRequestWorker: true, masterKeys: this.#options.masterKeys }
    const worker = new Worker(this.#options.script, { workerData: data })
    const slot: Slot = { worker, pending: new Map() }
    worker.on('message', (message: FromWorker) => this.#onMessage(slot, message))
    const failAll = (reason: string): void => {
      for (const { reject } of slot.pending.values()) reject(new WorkerPoolError(`request worker ${index} ${reason}`, { worker: index }))
      slot.pending.clear()
    }
    worker.on('error', (error) => {
      this.#logger.error(`request worker ${index} failed: ${error.message}`)
      failAll(`failed: ${error.message}`)
    })
    worker.on('exit', (code) => {
      failAll(`exited with code ${code}`)
      if (this.#closing) return
      this.#logger.error(`request worker ${index} exited with code ${code}; starting a new one`)
      this.#slots[index] = this.#spawn(index)
    })
    return slot
  }

  #onMessage(slot: Slot, message: FromWorker): void {
    if (message.type === 'done') {
      const task = slot.pending.get(message.taskId)
      slot.pending.delete(message.taskId)
      if (task !== undefined && message.threadId !== threadId) {
        this.#offThread[task.op] = (this.#offThread[task.op] ?? 0) + 1
        this.#threads.add(message.threadId)
      }
      if (message.error !== undefined) task?.reject(new RebuiltWorkerError(message.error))
      else task?.resolve(message.value)
      return
    }
    const reply = (payload: Omit<Extract<ToWorker, { type: 'submitted' }>, 'type' | 'callId'>): void => {
      if (!this.#closing) slot.worker.postMessage({ type: 'submitted', callId: message.callId, ...payload } satisfies ToWorker)
    }
    this.#options.submit(message.id, message.keys, message.options).then(
      (result) => reply({ result }),
      (error: unknown) => reply({ error: { name: (error as Error).name ?? 'Error', message: (error as Error).message ?? String(error) } }),
    )
  }

  #post(slot: Slot, task: WorkerTask): Promise<WireValue> {
    if (this.#closing) return Promise.reject(new WorkerPoolError('request worker pool is closed'))
    return new Promise((resolve, reject) => {
      const taskId = this.#nextTask++
      slot.pending.set(taskId, { op: task.op, resolve, reject })
      slot.worker.postMessage({ type: 'task', taskId, task } satisfies ToWorker)
    })
  }

  run(key: string, task: WorkerTask): Promise<WireValue> {
    return this.#post(this.#slots[hashKey(key) % this.size]!, task)
  }

  /** The tasks the worker threads ran, by kind, and how many distinct threads ran them. */
  stats(): ThreadPoolStats {
    return { size: this.size, offThread: { ...this.#offThread }, threads: this.#threads.size }
  }

  async close(): Promise<void> {
    if (this.#closing) return
    this.#closing = true
    await Promise.all(this.#slots.map((slot) => slot.worker.terminate()))
  }
}
