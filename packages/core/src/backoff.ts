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
  /**
   * Attempts made at the initial delay before it starts to grow (default 3). A restarted master is
   * back within a few seconds: steady attempts find it within one interval of its return, while a
   * peer that stays away still backs off to `max`.
   */
  steady?: number
}

export const DEFAULT_BACKOFF: Required<BackoffOptions> = { initial: 100, max: 5000, factor: 2, jitter: 0.5, steady: 3 }

/**
 * Delay before reconnect attempt `attempt` (1-based): `initial` for the first `steady` attempts,
 * then capped exponential growth, with the top `jitter` fraction of it random. `random` is
 * injectable so tests can pin it.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}, random: () => number = Math.random): number {
  const { initial, max, factor, jitter, steady } = { ...DEFAULT_BACKOFF, ...options }
  const exponent = Math.max(0, attempt - Math.max(1, steady))
  const base = Math.min(max, initial * factor ** exponent)
  const spread = base * Math.min(1, Math.max(0, jitter))
  return Math.round(base - spread + spread * random())
}
