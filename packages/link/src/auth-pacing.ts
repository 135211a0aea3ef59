/**
 * How long a minion waits before its next `_auth`, so a fleet does not stampede its master.
 *
 * - While the key is pending: Salt's `acceptance_wait_time`, growing by itself each attempt up to
 *   `acceptance_wait_time_max` (0: fixed). The wait itself lives in MinionAuth's loop.
 * - After an `_auth` the master did not answer in `auth_timeout`, or refused as busy: the wait doubles
 *   with each such failure in a row, from the acceptance wait up to `random_reauth_delay`, and the top half
 *   of it is drawn at random, so a fleet that timed out together does not come back together.
 *   After `auth_tries` of them in a row (Salt's count of acceptable `_auth` timeouts, past which a
 *   Salt minion restarts after a random `random_reauth_delay`), the minion starts over: it waits a random
 *   time up to `random_reauth_delay`, and its waits do not shrink again until the master answers.
 * - Before re-authenticating because the master's key changed (a publish under a session key this
 *   minion does not hold: the master restarted or rotated it), a random time up to
 *   `random_reauth_delay`, as Salt documents the key: a fleet that sees the same publish at once
 *   spreads its re-authentication over that window instead of all asking in the same instant.
 */
export interface AuthPacingOptions {
  /** random_reauth_delay, ms; 0: no spread. */
  reauthDelayMs: number
  /** auth_tries: timed-out (or busy) attempts in a row before starting over. */
  authTries: number
  /** Uniform in [0, 1); tests pin it. */
  random?: () => number
}

export class AuthPacing {
  readonly #reauthDelayMs: number
  readonly #authTries: number
  readonly #random: () => number
  /** Timed-out or busy attempts in a row. */
  #failures = 0

  constructor(options: AuthPacingOptions) {
    this.#reauthDelayMs = Math.max(0, options.reauthDelayMs)
    this.#authTries = Math.max(1, Math.floor(options.authTries))
    this.#random = options.random ?? Math.random
  }

  /** Timed-out or busy attempts in a row so far. */
  get failures(): number {
    return this.#failures
  }

  /** The master answered (accepted, pending or refused): the next overload starts from the acceptance wait again. */
  answered(): void {
    this.#failures = 0
  }

  /**
   * The wait after an attempt that timed out or was refused as busy, given the current acceptance wait
   * (`waitMs`). `restart` says the minion reached `auth_tries` and starts over after this wait.
   */
  afterOverload(waitMs: number): { delay: number; restart: boolean } {
    this.#failures++
    const cap = Math.max(waitMs, this.#reauthDelayMs)
    if (this.#failures % this.#authTries === 0) return { delay: Math.round(Math.max(waitMs, cap * this.#random())), restart: true }
    // Past a start-over the waits stay where they had grown to: a master still refusing is not asked faster again.
    const grown = Math.min(cap, waitMs * 2 ** Math.min(this.#failures - 1, 30))
    return { delay: Math.round(grown / 2 + (grown / 2) * this.#random()), restart: false }
  }

  /** The random wait before re-authenticating for a changed master key: uniform in [0, random_reauth_delay]. */
  beforeReauth(): number {
    return Math.round(this.#reauthDelayMs * this.#random())
  }
}
