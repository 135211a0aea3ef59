/** Waiting on state a test fixture changes: synchronised on each change, bounded by a named deadline. */
import { deadline } from './modules-fixture.js'

export class Changes {
  readonly #waiters = new Set<() => void>()

  /** Something changed: every pending {@link until} checks again. */
  notify(): void {
    for (const waiter of this.#waiters) waiter()
  }

  /** Resolves once `check()` returns something other than undefined; fails naming `what` after `ms`. */
  async until<T>(check: () => T | undefined, what: string, ms = 8000): Promise<T> {
    let wake: () => void = () => {}
    const waiter = (): void => wake()
    this.#waiters.add(waiter)
    try {
      return await deadline(
        (async () => {
          for (;;) {
            const value = check()
            if (value !== undefined) return value
            await new Promise<void>((resolve) => (wake = resolve))
          }
        })(),
        ms,
        what,
      )
    } finally {
      this.#waiters.delete(waiter)
    }
  }
}
