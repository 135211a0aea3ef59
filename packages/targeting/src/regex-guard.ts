import type { Worker } from 'node:worker_threads'
import { LruMap } from '@brine/core'
import { RegexMatchError, RegexTimeoutError } from './errors.js'

/**
 * Bounded regular expression matching. A backtracking engine can take exponential time on a
 * hostile pattern (`(a+)+$` against `aaaa…!`), and no JavaScript code can interrupt a RegExp
 * running on its own thread; so matching runs in one worker thread per process, and a batch
 * that is not done by its deadline gets the worker terminated (V8 stops the regex at once)
 * and a fresh worker started for what comes next. The event loop never waits on a regex.
 *
 * The common case stays cheap: results are remembered per (expression, text), requests made in
 * the same turn of the event loop travel together (a swarm of minions in one process matching the
 * same publish costs one round trip), and the worker starts only when a regex is first matched.
 */

/** A compiled-to-be regular expression: JavaScript source and flags, and what to call it in errors. */
export interface GuardedRegex {
  readonly source: string
  readonly flags: string
  /** The expression as the user wrote it (default: the source). */
  readonly pattern?: string
}

export interface RegexGuardOptions {
  /** Milliseconds one batch may run in the worker before it is stopped (default {@link DEFAULT_REGEX_TIMEOUT_MS}). */
  timeoutMs?: number
  /** Results remembered, per (expression, text) (default 16384). */
  cacheSize?: number
  /** Milliseconds an expression that hit the time limit is refused without being run again (default 10000). */
  holdMs?: number
}

export interface RegexGuardStats {
  /** Batches sent to the worker. */
  batches: number
  /** Texts matched in the worker. */
  matched: number
  /** Texts answered from remembered results. */
  cached: number
  /** Batches stopped at the deadline. */
  timeouts: number
  /** Requests refused because their expression hit the deadline moments ago. */
  refused: number
  /** Worker threads started, and those that have exited since. */
  workersStarted: number
  workersExited: number
}

interface Waiter {
  resolve: (results: Map<string, boolean>) => void
  reject: (error: unknown) => void
}

interface Batch {
  id: number
  key: string
  regex: GuardedRegex
  texts: Set<string>
  waiters: Waiter[]
}

type FromWorker = { id: number; results: Uint8Array } | { id: number; error: string }

/** The worker: compile (remembering a few), then test each text from index 0 (`y` makes that Python's re.match). */
const WORKER_SOURCE = `
'use strict'
const { parentPort } = require('node:worker_threads')
const compiled = new Map()
parentPort.on('message', (batch) => {
  try {
    const key = batch.flags + '/' + batch.source
    let regex = compiled.get(key)
    if (regex === undefined) {
      regex = new RegExp(batch.source, batch.flags)
      if (compiled.size >= 64) compiled.clear()
      compiled.set(key, regex)
    }
    const results = new Uint8Array(batch.texts.length)
    for (let i = 0; i < batch.texts.length; i++) {
      regex.lastIndex = 0
      results[i] = regex.test(batch.texts[i]) ? 1 : 0
    }
    parentPort.postMessage({ id: batch.id, results }, [results.buffer])
  } catch (error) {
    parentPort.postMessage({ id: batch.id, error: String((error && error.message) || error) })
  }
})
`

/** How long one batch of matching may take by default, in milliseconds. */
export const DEFAULT_REGEX_TIMEOUT_MS = 500

const keys = new WeakMap<GuardedRegex, string>()

/** `flags/source`: what results are remembered under (the same expression may come as different objects). */
function keyOf(regex: GuardedRegex): string {
  let key = keys.get(regex)
  if (key === undefined) keys.set(regex, (key = `${regex.flags}/${regex.source}`))
  return key
}

/** Texts longer than this are matched but their results not remembered. */
const CACHED_TEXT_CHARS = 1024

export class RegexGuard {
  readonly timeoutMs: number
  readonly holdMs: number
  readonly #results: LruMap<string, boolean>
  /** Expressions that hit the deadline, with when they may run again. */
  readonly #held = new LruMap<string, number>(256)
  /** Batches being gathered this turn of the event loop, by expression. */
  readonly #gathering = new Map<string, Batch>()
  readonly #queue: Batch[] = []
  /** Exits of workers being stopped, which {@link settled} waits for. */
  readonly #exits = new Set<Promise<void>>()
  readonly #exitOf = new WeakMap<Worker, Promise<void>>()
  readonly #stats: RegexGuardStats = { batches: 0, matched: 0, cached: 0, timeouts: 0, refused: 0, workersStarted: 0, workersExited: 0 }
  #worker: Worker | undefined
  #online = false
  #current: Batch | undefined
  #timer: NodeJS.Timeout | undefined
  #flushing = false
  #nextId = 1
  #closed = false

  constructor(options: RegexGuardOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REGEX_TIMEOUT_MS
    this.holdMs = options.holdMs ?? 10_000
    this.#results = new LruMap(options.cacheSize ?? 16_384)
  }

  /** The remembered answer for one text, without matching: undefined when it has not been matched (or was too long to keep). */
  peek(regex: GuardedRegex, text: string): boolean | undefined {
    if (text.length > CACHED_TEXT_CHARS) return undefined
    const known = this.#results.get(`${keyOf(regex)}\u0000${text}`)
    if (known !== undefined) this.#stats.cached++
    return known
  }

  /**
   * Whether each text matches, tested from its first character as a sticky (`y`) expression
   * tests. Throws {@link RegexTimeoutError} when the batch these texts travel in hits the deadline
   * (or the expression did moments ago), {@link RegexMatchError} when the engine fails (stack, memory).
   */
  async matchMany(regex: GuardedRegex, texts: readonly string[], options: { signal?: AbortSignal } = {}): Promise<boolean[]> {
    options.signal?.throwIfAborted()
    if (this.#closed) throw new RegexMatchError(regex.pattern ?? regex.source, 'the regex guard is closed')
    const key = keyOf(regex)
    const heldUntil = this.#held.get(key)
    if (heldUntil !== undefined && heldUntil > Date.now()) {
      this.#stats.refused++
      throw new RegexTimeoutError(regex.pattern ?? regex.source, {
        limit: this.timeoutMs,
        values: texts.length,
        repeated: true,
        holdMs: heldUntil - Date.now(),
      })
    }
    const answers = new Array<boolean>(texts.length)
    const missing: string[] = []
    const missingAt: number[] = []
    for (let index = 0; index < texts.length; index++) {
      const text = texts[index] as string
      const known = text.length <= CACHED_TEXT_CHARS ? this.#results.get(`${key}\u0000${text}`) : undefined
      if (known === undefined) {
        missing.push(text)
        missingAt.push(index)
      } else {
        answers[index] = known
      }
    }
    this.#stats.cached += texts.length - missing.length
    if (missing.length === 0) return answers
    const results = await this.#request(key, regex, missing, options.signal)
    for (let k = 0; k < missing.length; k++) answers[missingAt[k] as number] = results.get(missing[k] as string) === true
    return answers
  }

  /** Counters: what tests assert instead of timings. */
  stats(): RegexGuardStats {
    return { ...this.#stats }
  }

  /** Resolves once every worker stopped at a deadline (or by {@link close}) has really exited. */
  async settled(): Promise<void> {
    while (this.#exits.size > 0) await Promise.allSettled([...this.#exits])
  }

  /** Stops the worker; pending and later requests fail with RegexMatchError. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true
    const failed = [...(this.#current === undefined ? [] : [this.#current]), ...this.#queue.splice(0), ...this.#gathering.values()]
    this.#gathering.clear()
    this.#current = undefined
    clearTimeout(this.#timer)
    for (const batch of failed) this.#fail(batch, new RegexMatchError(batch.regex.pattern ?? batch.regex.source, 'the regex guard was closed'))
    this.#stopWorker()
    await this.settled()
  }

  #request(key: string, regex: GuardedRegex, texts: string[], signal: AbortSignal | undefined): Promise<Map<string, boolean>> {
    let batch = this.#gathering.get(key)
    if (batch === undefined) {
      batch = { id: this.#nextId++, key, regex, texts: new Set(), waiters: [] }
      this.#gathering.set(key, batch)
    }
    for (const text of texts) batch.texts.add(text)
    const target = batch
    const answer = new Promise<Map<string, boolean>>((resolve, reject) => {
      target.waiters.push({ resolve, reject })
    })
    if (!this.#flushing) {
      this.#flushing = true
      setImmediate(() => this.#flush())
    }
    if (signal === undefined) return answer
    // Giving up on the answer does not stop the batch (others may wait on it); its deadline bounds it.
    return new Promise((resolve, reject) => {
      const abort = (): void => reject(signal.reason)
      signal.addEventListener('abort', abort, { once: true })
      answer.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort))
    })
  }

  #flush(): void {
    this.#flushing = false
    for (const batch of this.#gathering.values()) this.#queue.push(batch)
    this.#gathering.clear()
    this.#pump()
  }

  #pump(): void {
    if (this.#current !== undefined || this.#closed) return
    const batch = this.#queue.shift()
    if (batch === undefined) {
      this.#worker?.unref()
      return
    }
    // Another batch may have shown this expression hostile while this one waited.
    const heldUntil = this.#held.get(batch.key)
    if (heldUntil !== undefined && heldUntil > Date.now()) {
      this.#stats.refused++
      this.#fail(
        batch,
        new RegexTimeoutError(batch.regex.pattern ?? batch.regex.source, {
          limit: this.timeoutMs,
          values: batch.texts.size,
          repeated: true,
          holdMs: heldUntil - Date.now(),
        }),
      )
      this.#pump()
      return
    }
    this.#current = batch
    const worker = this.#ensureWorker()
    worker.ref()
    this.#stats.batches++
    worker.postMessage({ id: batch.id, source: batch.regex.source, flags: batch.regex.flags, texts: [...batch.texts] })
    // The deadline counts from when the worker can run: a worker still starting up is not yet late.
    if (this.#online) this.#startDeadline(batch)
  }

  #startDeadline(batch: Batch): void {
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => this.#onDeadline(batch), this.timeoutMs)
  }

  #ensureWorker(): Worker {
    if (this.#worker !== undefined) return this.#worker
    // Node's worker_threads module is loaded here, at the first regex, not with this module: loading it costs every
    // process a few MiB of resident memory (its code and the binary's pages it touches), and most minions never match one.
    const { Worker } = process.getBuiltinModule('node:worker_threads')
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      name: 'brine-regex',
      // A regex needs little heap; a runaway one must not take the process's memory with it.
      resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
    })
    this.#worker = worker
    this.#online = false
    this.#stats.workersStarted++
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
    this.#exitOf.set(worker, exited)
    void exited.then(() => {
      this.#stats.workersExited++
      if (this.#worker === worker) this.#lostWorker('the regex worker exited')
    })
    worker.on('online', () => {
      if (this.#worker !== worker) return
      this.#online = true
      if (this.#current !== undefined) this.#startDeadline(this.#current)
    })
    worker.on('message', (message: FromWorker) => {
      if (this.#worker === worker) this.#onMessage(message)
    })
    worker.on('error', (error) => {
      if (this.#worker === worker) this.#lostWorker(`the regex worker failed: ${error.message}`)
    })
    return worker
  }

  #onMessage(message: FromWorker): void {
    const batch = this.#current
    if (batch === undefined || message.id !== batch.id) return
    clearTimeout(this.#timer)
    this.#current = undefined
    if ('error' in message) {
      this.#fail(batch, new RegexMatchError(batch.regex.pattern ?? batch.regex.source, message.error))
    } else {
      const texts = [...batch.texts]
      const results = new Map<string, boolean>()
      for (let index = 0; index < texts.length; index++) {
        const text = texts[index] as string
        const matched = message.results[index] === 1
        results.set(text, matched)
        if (text.length <= CACHED_TEXT_CHARS) this.#results.set(`${batch.key}\u0000${text}`, matched)
      }
      this.#stats.matched += texts.length
      for (const waiter of batch.waiters) waiter.resolve(results)
    }
    this.#pump()
  }

  #onDeadline(batch: Batch): void {
    if (this.#current !== batch) return
    this.#current = undefined
    this.#stats.timeouts++
    this.#held.set(batch.key, Date.now() + this.holdMs)
    this.#stopWorker()
    this.#fail(batch, new RegexTimeoutError(batch.regex.pattern ?? batch.regex.source, { limit: this.timeoutMs, values: batch.texts.size }))
    this.#pump()
  }

  /** The worker died under a batch (out of memory, killed): fail that batch, start afresh for the rest. */
  #lostWorker(problem: string): void {
    this.#worker = undefined
    this.#online = false
    clearTimeout(this.#timer)
    const batch = this.#current
    this.#current = undefined
    if (batch !== undefined) this.#fail(batch, new RegexMatchError(batch.regex.pattern ?? batch.regex.source, problem))
    this.#pump()
  }

  #stopWorker(): void {
    const worker = this.#worker
    if (worker === undefined) return
    this.#worker = undefined
    this.#online = false
    const exited = this.#exitOf.get(worker)
    if (exited !== undefined) {
      this.#exits.add(exited)
      void exited.then(() => this.#exits.delete(exited))
    }
    // terminate() interrupts a running RegExp; 'exit' follows.
    void worker.terminate()
  }

  #fail(batch: Batch, error: Error): void {
    for (const waiter of batch.waiters) waiter.reject(error)
  }
}

let shared: RegexGuard | undefined

/** The process's guard, created on first use with the default limits. */
export function sharedRegexGuard(): RegexGuard {
  shared ??= new RegexGuard()
  return shared
}
