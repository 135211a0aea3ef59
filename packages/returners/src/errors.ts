import { BrineError, type ErrorContext } from '@brine/transport'

/** A job cache that cannot do what was asked: a file it cannot read or write, a query that failed. */
export class JobCacheError extends BrineError {
  override name = 'JobCacheError'
  readonly backend: string

  constructor(backend: string, message: string, context: ErrorContext = {}, options?: ErrorOptions) {
    super(`${backend} job cache: ${message}`, { backend, ...context }, options)
    this.backend = backend
  }
}

/** A value the PostgreSQL job cache cannot store as JSON (a BigInt, a function, a cycle). */
export class UnstorableValueError extends BrineError {
  override name = 'UnstorableValueError'
  readonly path: string

  constructor(path: string, problem: string) {
    super(`cannot store ${path} as JSON: ${problem}`, { path, problem })
    this.path = path
  }
}
