import { BrineError, registerErrors, type ErrorContext } from '@brine/core'

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

/**
 * A job or return dated too far in the future (beyond `clock_skew` of the master's clock) for a jid the
 * cache does not hold yet: refused before any file is opened, so a flood of future jids cannot open one
 * file per day. Carries the jid, its time and the limit.
 */
export class FutureJidError extends JobCacheError {
  override name = 'FutureJidError'
  readonly jid: string
  constructor(backend: string, jid: string, at: Date, now: Date, limitMs: number) {
    super(
      backend,
      `jid ${jid.slice(0, 40)} is dated ${at.toISOString()}, more than ${limitMs} ms (clock_skew) ahead of this master's clock (${now.toISOString()}); refused`,
      { jid: jid.slice(0, 40), at: at.toISOString(), now: now.toISOString(), limit: limitMs },
    )
    this.jid = jid
  }
}

/** A job names a returner (`brine --return`, Salt's `ret`) that Brine does not have; the publish is refused. */
export class UnknownReturnerError extends BrineError {
  override name = 'UnknownReturnerError'
  readonly returner: string
  readonly available: readonly string[]

  constructor(returner: string, available: readonly string[]) {
    super(`unknown returner '${returner.slice(0, 80)}' (available: ${available.join(', ')})`, {
      returner: returner.slice(0, 80),
      available: available.join(', '),
    })
    this.returner = returner
    this.available = available
  }
}

registerErrors({ JobCacheError, UnstorableValueError, FutureJidError, UnknownReturnerError })
