/**
 * The minion daemon's lifecycle events: what a test, the CLI or a supervisor can wait for instead
 * of sleeping or scraping logs. Each call to {@link LifecycleEvents.events} replays the recent
 * history (bounded) and then follows live events until the minion stops.
 */

export type MinionEvent =
  /** The master has our key in `minions_pre`; the minion waits `waitMs` and asks again. */
  | { type: 'auth-pending'; message: string; waitMs: number }
  /** The master refused us (`rejected`, `denied`, …); the minion keeps asking, slowly. */
  | { type: 'auth-rejected'; reason: string; message: string; waitMs: number }
  /** No usable answer: timeout, a master key that does not match the pin, a bad reply. */
  | { type: 'auth-failed'; error: string; message: string; waitMs: number }
  | { type: 'authenticated'; gen: number; firstContact: boolean; masterFinger: string }
  /** A publish failed to verify, decrypt or validate and was dropped. */
  | { type: 'publish-dropped'; reason: string }
  /** A valid publish that is not for this minion (or a repeated jid). */
  | { type: 'publish-ignored'; jid: string; fun: string; reason: string }
  | { type: 'job-received'; jid: string; fun: string }
  /** The job was killed (saltutil.kill_job) or aborted by stop(): like Salt, it does not return. */
  | { type: 'job-killed'; jid: string; fun: string }
  /** The master acknowledged a return; `fromSpool` when it had been spooled first. */
  | { type: 'returned'; jid: string; fromSpool: boolean }
  /** A return the master did not acknowledge was written to the spool. */
  | { type: 'spooled'; jid: string; file: string }
  | { type: 'stopped' }

export type MinionEventType = MinionEvent['type']

/** How many past events a new {@link LifecycleEvents.events} iterator replays. */
const HISTORY = 1000

export class LifecycleEvents {
  readonly #history: MinionEvent[] = []
  readonly #listeners = new Set<() => void>()
  /** Index of #history[0] in the whole sequence, so iterators survive trimming. */
  #base = 0
  #closed = false

  emit(event: MinionEvent): void {
    if (this.#closed) return
    this.#history.push(event)
    if (this.#history.length > HISTORY) {
      this.#history.shift()
      this.#base++
    }
    for (const listener of this.#listeners) listener()
  }

  /** Ends every iterator after what was already emitted. */
  close(): void {
    this.#closed = true
    for (const listener of this.#listeners) listener()
  }

  /** Recent history, then live events; ends once the minion has stopped. Any number of consumers. */
  events(): AsyncIterable<MinionEvent> {
    return {
      [Symbol.asyncIterator]: () => {
        let next = this.#base
        let wake: (() => void) | undefined
        const listener = (): void => {
          wake?.()
          wake = undefined
        }
        this.#listeners.add(listener)
        const done = (): IteratorResult<MinionEvent> => {
          this.#listeners.delete(listener)
          return { done: true, value: undefined }
        }
        return {
          next: async (): Promise<IteratorResult<MinionEvent>> => {
            for (;;) {
              if (next < this.#base) next = this.#base // fell behind the bounded history
              const event = this.#history[next - this.#base]
              if (event !== undefined) {
                next++
                return { done: false, value: event }
              }
              if (this.#closed) return done()
              await new Promise<void>((resolve) => (wake = resolve))
            }
          },
          return: async (): Promise<IteratorResult<MinionEvent>> => done(),
        }
      },
    }
  }
}

/** Waits `ms`, or less when `signal` aborts; resolves false when aborted. Never rejects. */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/**
 * Logs the first few occurrences of a kind of problem, then one summary line per interval, so a
 * peer sending garbage cannot flood the log.
 */
export class RateLimitedLog {
  readonly #intervalMs: number
  readonly #burst: number
  readonly #state = new Map<string, { count: number; windowStart: number; suppressed: number }>()

  constructor(intervalMs = 10_000, burst = 5) {
    this.#intervalMs = intervalMs
    this.#burst = burst
  }

  /** Calls `log` unless this key already logged `burst` times in the current interval. */
  log(key: string, log: (suppressedBefore: number) => void, now: number = Date.now()): void {
    let state = this.#state.get(key)
    if (state === undefined || now - state.windowStart >= this.#intervalMs) {
      const suppressed = state?.suppressed ?? 0
      state = { count: 0, windowStart: now, suppressed: 0 }
      this.#state.set(key, state)
      if (this.#state.size > 100) this.#state.delete(this.#state.keys().next().value as string)
      state.count++
      log(suppressed)
      return
    }
    if (state.count < this.#burst) {
      state.count++
      log(0)
    } else {
      state.suppressed++
    }
  }
}
