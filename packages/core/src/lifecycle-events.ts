/**
 * A daemon's lifecycle events (a master link's, a minion's, a syndic's): what a test, the CLI, a supervisor
 * or a policy can wait for instead of sleeping or scraping logs. Each call to {@link LifecycleEvents.events}
 * replays the recent history (bounded) and then follows live events until the emitter closes.
 */

/** How many past events a new {@link LifecycleEvents.events} iterator replays, by default. */
const HISTORY = 1000

export class LifecycleEvents<E> {
  readonly #history: E[] = []
  readonly #historyLimit: number
  readonly #listeners = new Set<() => void>()
  /** Index of #history[0] in the whole sequence, so iterators survive trimming. */
  #base = 0
  #closed = false

  /** `history`: how many past events a new iterator replays (and how far a slow one may lag). */
  constructor(history: number = HISTORY) {
    this.#historyLimit = Math.max(1, history)
  }

  emit(event: E): void {
    if (this.#closed) return
    this.#history.push(event)
    if (this.#history.length > this.#historyLimit) {
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

  /** Recent history, then live events; ends once closed. Any number of consumers. */
  events(): AsyncIterable<E> {
    return {
      [Symbol.asyncIterator]: () => {
        let next = this.#base
        let wake: (() => void) | undefined
        const listener = (): void => {
          wake?.()
          wake = undefined
        }
        this.#listeners.add(listener)
        const done = (): IteratorResult<E> => {
          this.#listeners.delete(listener)
          return { done: true, value: undefined }
        }
        return {
          next: async (): Promise<IteratorResult<E>> => {
            for (;;) {
              if (next < this.#base) next = this.#base // fell behind the bounded history
              if (next - this.#base < this.#history.length) {
                const event = this.#history[next - this.#base] as E
                next++
                return { done: false, value: event }
              }
              if (this.#closed) return done()
              await new Promise<void>((resolve) => (wake = resolve))
            }
          },
          return: async (): Promise<IteratorResult<E>> => done(),
        }
      },
    }
  }
}
