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
