/** Reconnect backoff in milliseconds: Salt's recon_default, recon_max and recon_randomize. */
export interface BackoffOptions {
  /** First delay (default 100 ms). */
  initial?: number
  /** Cap on any delay (default 5000 ms). */
  max?: number
  /** Growth per attempt (default 2). */
  factor?: number
  /** Fraction of each delay drawn at random, 0..1 (default 0.5), so a fleet does not reconnect in step. */
  jitter?: number
}

export const DEFAULT_BACKOFF: Required<BackoffOptions> = { initial: 100, max: 5000, factor: 2, jitter: 0.5 }

/**
 * Delay before reconnect attempt `attempt` (1-based): capped exponential growth, with the top
 * `jitter` fraction of it random. `random` is injectable so tests can pin it.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}, random: () => number = Math.random): number {
  const { initial, max, factor, jitter } = { ...DEFAULT_BACKOFF, ...options }
  const exponent = Math.max(0, attempt - 1)
  const base = Math.min(max, initial * factor ** exponent)
  const spread = base * Math.min(1, Math.max(0, jitter))
  return Math.round(base - spread + spread * random())
}
