import { describe, expect, it } from 'vitest'
import { AuthPacing } from '../src/auth-pacing.js'

/** A random source that yields `values` in turn. */
const sequence = (...values: number[]): (() => number) => {
  let index = 0
  return () => values[index++ % values.length]!
}

describe('AuthPacing', () => {
  it('doubles the wait after each timeout in a row, up to random_reauth_delay, drawing its top half at random', () => {
    const pacing = new AuthPacing({ reauthDelayMs: 1000, authTries: 10, random: sequence(0, 0.999_999) })
    const waits = Array.from({ length: 6 }, () => pacing.afterOverload(100))
    expect(waits.map((wait) => wait.restart)).toEqual([false, false, false, false, false, false])
    // 100, 200, 400, 800, then capped at 1,000: the lower half of each with random 0, all of it with random ~1.
    expect(waits.map((wait) => wait.delay)).toEqual([50, 200, 200, 800, 500, 1000])
    expect(pacing.failures).toBe(6)
  })

  it('after auth_tries timeouts in a row starts over after a random wait up to random_reauth_delay (at least the acceptance wait); the waits then keep growing, not starting low again', () => {
    const pacing = new AuthPacing({ reauthDelayMs: 10_000, authTries: 3, random: () => 0.25 })
    const waits = Array.from({ length: 7 }, () => pacing.afterOverload(200))
    expect(waits).toEqual([
      { delay: 125, restart: false },
      { delay: 250, restart: false },
      { delay: 2500, restart: true },
      { delay: 1000, restart: false },
      { delay: 2000, restart: false },
      { delay: 2500, restart: true },
      { delay: 6250, restart: false },
    ])
    const tiny = new AuthPacing({ reauthDelayMs: 10_000, authTries: 1, random: () => 0 })
    expect(tiny.afterOverload(200)).toEqual({ delay: 200, restart: true })
  })

  it('an answer from the master (accepted, pending or refused) resets the count', () => {
    const pacing = new AuthPacing({ reauthDelayMs: 5000, authTries: 7, random: () => 1 })
    pacing.afterOverload(100)
    pacing.afterOverload(100)
    pacing.answered()
    expect(pacing.failures).toBe(0)
    expect(pacing.afterOverload(100)).toEqual({ delay: 100, restart: false })
  })

  it('spreads a re-authentication for a changed master key uniformly over [0, random_reauth_delay]; 0 means at once', () => {
    expect(new AuthPacing({ reauthDelayMs: 10_000, authTries: 7, random: () => 0 }).beforeReauth()).toBe(0)
    expect(new AuthPacing({ reauthDelayMs: 10_000, authTries: 7, random: () => 0.5 }).beforeReauth()).toBe(5000)
    expect(new AuthPacing({ reauthDelayMs: 0, authTries: 7, random: () => 0.9 }).beforeReauth()).toBe(0)
    const spread = new AuthPacing({ reauthDelayMs: 1000, authTries: 7 })
    const waits = Array.from({ length: 200 }, () => spread.beforeReauth())
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(0)
    expect(Math.max(...waits)).toBeLessThanOrEqual(1000)
    // A fleet's waits differ: 200 draws land on many distinct values.
    expect(new Set(waits).size).toBeGreaterThan(50)
  })

  it('with a random_reauth_delay below the acceptance wait, the wait stays the acceptance wait (jittered)', () => {
    const pacing = new AuthPacing({ reauthDelayMs: 0, authTries: 7, random: () => 0.5 })
    expect([pacing.afterOverload(400), pacing.afterOverload(400)].map((wait) => wait.delay)).toEqual([300, 300])
  })
})
