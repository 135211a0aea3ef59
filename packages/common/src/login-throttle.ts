import { BrineError, LruMap, registerErrors } from '@brine/core'
import type { LoginLimits } from '@brine/config'

/**
 * A login refused because its user name or its client address failed too often in the current
 * window (`eauth_rate_limit_user`, `eauth_rate_limit_address`). `retryAfterMs` says when the window
 * of the key that refused it ends; the REST API answers 429 with `Retry-After` in whole seconds.
 */
export class LoginRateLimitedError extends BrineError {
  override name = 'LoginRateLimitedError'
  readonly retryAfterMs: number
  readonly key: string
  readonly limit: number

  constructor(what: string, key: string, limit: number, retryAfterMs: number) {
    super(`too many failed logins for ${what} (${key}: ${limit} per window); try again in ${Math.ceil(retryAfterMs / 1000)} s`, {
      key,
      limit,
      retryAfter: Math.ceil(retryAfterMs / 1000),
    })
    this.key = key
    this.limit = limit
    this.retryAfterMs = retryAfterMs
  }
}

/** How many user names and addresses are tracked at once: a flood of fresh names evicts the oldest, never grows memory. */
const TRACKED_KEYS = 16_384

interface Window {
  failures: number
  endsAt: number
}

/** One counter of failures per key, each in its own fixed window. */
class FailureCounter {
  readonly #windows = new LruMap<string, Window>(TRACKED_KEYS)
  constructor(
    readonly limit: number,
    readonly windowMs: number,
  ) {}

  /** ms until `key` may try again, or 0 when it may now. */
  waitFor(key: string, now: number): number {
    if (this.limit === 0) return 0
    const window = this.#windows.get(key)
    if (window === undefined || now >= window.endsAt) return 0
    return window.failures >= this.limit ? window.endsAt - now : 0
  }

  add(key: string, now: number, count: number): void {
    if (this.limit === 0) return
    const window = this.#windows.get(key)
    if (window === undefined || now >= window.endsAt) {
      if (count > 0) this.#windows.set(key, { failures: count, endsAt: now + this.windowMs })
      return
    }
    window.failures = Math.max(0, window.failures + count)
  }
}

/** What {@link LoginThrottle.begin} hands a login in progress: say how it ended. */
export interface LoginAttempt {
  /** The password was right: the attempt no longer counts. */
  succeeded(): void
}

/**
 * Rate limit of logins per user name and per client address. An attempt counts as a failure from the
 * moment it starts (so fifty sent at once are fifty, not zero) and is taken back when it succeeds; once
 * a key has `limit` failures in its window, further attempts are refused with LoginRateLimitedError
 * before any password is hashed. Salt has no such limit; the keys are Brine's.
 */
export class LoginThrottle {
  readonly #users: FailureCounter
  readonly #addresses: FailureCounter
  readonly #now: () => number

  constructor(limits: LoginLimits, now: () => number = Date.now) {
    this.#users = new FailureCounter(limits.perUser, limits.windowMs)
    this.#addresses = new FailureCounter(limits.perAddress, limits.windowMs)
    this.#now = now
  }

  /** Starts an attempt for `user` from `address`; throws LoginRateLimitedError when either is over its limit. */
  begin(user: string, address: string | undefined): LoginAttempt {
    const now = this.#now()
    const byUser = this.#users.waitFor(user, now)
    if (byUser > 0) throw new LoginRateLimitedError(`user ${JSON.stringify(user.slice(0, 80))}`, 'eauth_rate_limit_user', this.#users.limit, byUser)
    const byAddress = address === undefined ? 0 : this.#addresses.waitFor(address, now)
    if (byAddress > 0) throw new LoginRateLimitedError(`address ${address}`, 'eauth_rate_limit_address', this.#addresses.limit, byAddress)
    this.#users.add(user, now, 1)
    if (address !== undefined) this.#addresses.add(address, now, 1)
    let settled = false
    return {
      succeeded: () => {
        if (settled) return
        settled = true
        const at = this.#now()
        this.#users.add(user, at, -1)
        if (address !== undefined) this.#addresses.add(address, at, -1)
      },
    }
  }
}

/**
 * A login refused because `eauth_hash_backlog` logins already wait for a password-hashing thread: a
 * storm of logins is turned away at the door instead of queueing without bound. The REST API answers
 * 429 with `Retry-After: 1`.
 */
export class LoginBusyError extends BrineError {
  override name = 'LoginBusyError'
  readonly retryAfterMs = 1000
  constructor(running: number, waiting: number) {
    super(`login refused: ${running} password checks running and ${waiting} waiting (eauth_hash_backlog ${waiting}); try again in 1 s`, {
      key: 'eauth_hash_backlog',
      running,
      waiting,
      retryAfter: 1,
    })
  }
}

registerErrors({ LoginRateLimitedError, LoginBusyError })
