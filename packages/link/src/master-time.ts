/**
 * The master's clock as a minion knows it (docs/protocol.md, "Freshness"). Each `_auth` reply carries
 * the master's time, signed and bound to that request's token; the minion anchors it to its own
 * clocks and reads "the master's now" as the anchor plus the time elapsed since. Elapsed time is the
 * larger of the monotonic and the wall clock's: a wall clock set back on the minion cannot make an
 * expired publish look fresh, and neither can a paused VM whose monotonic clock stood still.
 */

/** This host's clocks, ms: wall (since the epoch) and monotonic. Tests inject one that they move. */
export interface Clock {
  wall(): number
  monotonic(): number
}

export const systemClock: Clock = {
  wall: () => Date.now(),
  monotonic: () => performance.now(),
}

export class MasterTime {
  #anchor: number
  readonly #wall: number
  readonly #monotonic: number
  readonly #clock: Clock

  /** The master said it was `masterTime` (ms since the epoch) just now. */
  constructor(masterTime: number, clock: Clock = systemClock) {
    this.#anchor = masterTime
    this.#clock = clock
    this.#wall = clock.wall()
    this.#monotonic = clock.monotonic()
  }

  /** ms since the anchor was taken. */
  age(): number {
    return Math.max(this.#clock.monotonic() - this.#monotonic, this.#clock.wall() - this.#wall, 0)
  }

  /** The master's clock now, as far as this minion can tell (ms since the epoch). */
  now(): number {
    return this.#anchor + this.age()
  }

  /**
   * The master's clock has been seen at `masterTime` or later (its sealed word, e.g. when it started): moves the
   * estimate forward to it if it was behind. Only ever forward, and only to a time the master's clock has
   * reached, so the estimate still never runs ahead of the master's: a publish's expiry is judged no later.
   */
  atLeast(masterTime: number): void {
    const behind = masterTime - this.now()
    if (Number.isFinite(behind) && behind > 0) this.#anchor += behind
  }
}
