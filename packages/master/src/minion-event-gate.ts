import type { EventLoad } from '@brine/protocol'
import { encode } from '@brine/core'
import { MinionEventRefusedError } from '@brine/protocol'
import { secondsFromMs } from '@brine/config'

export interface MinionEventGateOptions {
  /** Largest encoded event (tag and data), bytes (`minion_event_max_bytes`). */
  maxBytes: number
  /** Events per second each minion earns (`minion_event_rate`). */
  ratePerSecond: number
  /** Most events a minion may send at once after being quiet (`minion_event_burst`). */
  burst: number
  /** Minions whose buckets are kept (the least recently heard are forgotten; a forgotten one starts full). */
  maxMinions?: number
  now?: () => number
}

interface Bucket {
  tokens: number
  at: number
}

/**
 * The bounds on events minions send to the master's bus (`event.send`, `event.fire_master`, start events): each
 * event at most `maxBytes` encoded, and per minion a token bucket of `burst` events refilled at `ratePerSecond`.
 * A batch passes whole or not at all, so a refused batch fires nothing; the refusal goes back to the minion.
 */
export class MinionEventGate {
  readonly #o: MinionEventGateOptions
  readonly #buckets = new Map<string, Bucket>()

  constructor(options: MinionEventGateOptions) {
    this.#o = options
  }

  /** Admits minion `id`'s `events`, or throws MinionEventRefusedError saying which bound they passed. */
  admit(id: string, events: readonly EventLoad[]): void {
    for (const event of events) {
      const size = encode(event).byteLength
      if (size > this.#o.maxBytes)
        throw new MinionEventRefusedError(
          id,
          'too large',
          `event ${JSON.stringify(event.tag.slice(0, 120))} is ${size} bytes encoded, more than minion_event_max_bytes (${this.#o.maxBytes})`,
        )
    }
    const now = (this.#o.now ?? Date.now)()
    const bucket = this.#buckets.get(id) ?? { tokens: this.#o.burst, at: now }
    bucket.tokens = Math.min(this.#o.burst, bucket.tokens + secondsFromMs(now - bucket.at) * this.#o.ratePerSecond)
    bucket.at = now
    this.#buckets.delete(id)
    this.#buckets.set(id, bucket)
    if (this.#buckets.size > (this.#o.maxMinions ?? 100_000)) this.#buckets.delete(this.#buckets.keys().next().value as string)
    if (bucket.tokens < events.length) {
      throw new MinionEventRefusedError(id, 'rate', `${events.length} event(s) exceed minion_event_rate (${this.#o.ratePerSecond}/s, burst ${this.#o.burst})`)
    }
    bucket.tokens -= events.length
  }
}
