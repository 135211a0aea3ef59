import { DeadlineError } from './errors.js'

/**
 * Waits for `promise` at most `ms`. The bound is a failure limit, not a timing assertion: it turns a hang into
 * a failure that says what never happened.
 */
export function deadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(what, ms)), ms)
  })
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer))
}

/** A promise with its resolve function, for handlers the test releases by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

/**
 * Resolves once `condition` holds, asking it every 20 ms; fails with a {@link DeadlineError} naming `what` after `ms`,
 * and stops asking. A bound on a wait for something the test cannot be told of, never a timing.
 */
export async function until(condition: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  let stopped = false
  try {
    await deadline(
      (async () => {
        while (!stopped && !(await condition())) await new Promise((resolve) => setTimeout(resolve, 20))
      })(),
      ms,
      what,
    )
  } finally {
    stopped = true
  }
}
