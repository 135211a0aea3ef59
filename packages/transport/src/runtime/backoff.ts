import type { BackoffOptions } from '../contract/types.js'

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
