import type { Logger } from './logger.js'

export interface LogLimiterOptions {
  /** Lines let through per window (default 10). */
  burst?: number
  /** The window, ms (default 60,000). */
  windowMs?: number
  /** Clock, injectable for tests (default Date.now). */
  now?: () => number
}

export const DEFAULT_LOG_BURST = 10
export const DEFAULT_LOG_WINDOW_MS = 60_000

/**
 * Rate limit for warnings a peer can cause (a dropped frame, a refused connection, a refused clear
 * command): at most `burst` lines per `windowMs`; the rest are counted, and the next line let
 * through (or a summary line when the window ends) says how many were suppressed. So a flood of bad
 * input costs the log a bounded number of lines per minute and the operator still sees that it happened.
 * One limiter per kind of warning; the counters that tests assert stay exact elsewhere (stats(), events).
 */
export class LogLimiter {
  readonly burst: number
  readonly windowMs: number
  readonly #now: () => number
  #windowStart = Number.NEGATIVE_INFINITY
  #logged = 0
  #suppressed = 0
  #summary: NodeJS.Timeout | undefined
  #lastLogger: Logger | undefined
  #lastWhat = ''

  constructor(options: LogLimiterOptions = {}) {
    this.burst = options.burst ?? DEFAULT_LOG_BURST
    this.windowMs = options.windowMs ?? DEFAULT_LOG_WINDOW_MS
    this.#now = options.now ?? Date.now
    if (!Number.isInteger(this.burst) || this.burst < 1) throw new RangeError(`log burst must be a positive integer, got ${this.burst}`)
    if (!(this.windowMs > 0)) throw new RangeError(`log window must be a positive number of ms, got ${this.windowMs}`)
  }

  /** Lines suppressed in the current window so far. */
  get suppressed(): number {
    return this.#suppressed
  }

  /**
   * Logs `message` at warning level through `logger` unless this window's burst is spent. `what`
   * names the kind of line in the summary ("dropped frames").
   */
  warning(logger: Logger, message: string, what = 'similar warnings'): boolean {
    return this.log(logger, 'warning', message, what)
  }

  log(logger: Logger, level: 'warning' | 'info' | 'error', message: string, what = 'similar warnings'): boolean {
    const now = this.#now()
    if (now - this.#windowStart >= this.windowMs) {
      const carried = this.#suppressed
      this.#windowStart = now
      this.#logged = 0
      this.#suppressed = 0
      this.#cancelSummary()
      if (carried > 0) message = `${message} (${carried} ${what} suppressed before this one)`
    }
    if (this.#logged < this.burst) {
      this.#logged++
      logger[level](message)
      return true
    }
    this.#suppressed++
    this.#lastLogger = logger
    this.#lastWhat = what
    if (this.#summary === undefined) {
      // Say at the end of the window how many were held back, even if the flood has stopped by then.
      this.#summary = setTimeout(() => this.#flush(), Math.max(1, this.#windowStart + this.windowMs - now))
      this.#summary.unref()
    }
    return false
  }

  #flush(): void {
    this.#summary = undefined
    if (this.#suppressed === 0 || this.#lastLogger === undefined) return
    this.#lastLogger.warning(
      `${this.#suppressed} ${this.#lastWhat} suppressed in the last ${Math.round(this.windowMs / 1000)} s (at most ${this.burst} logged per window)`,
    )
    this.#suppressed = 0
    // The summary spends the window: the next line starts a new one.
    this.#windowStart = Number.NEGATIVE_INFINITY
  }

  #cancelSummary(): void {
    if (this.#summary !== undefined) clearTimeout(this.#summary)
    this.#summary = undefined
  }

  /** Logs any pending summary now and stops the timer (on close). */
  flush(): void {
    this.#cancelSummary()
    this.#flush()
  }
}
