import type { Endpoint, TransportEvent } from '@brine/transport'
import { deadline } from '@brine/testkit'

type Check = () => boolean

/**
 * Consumes an endpoint's events() (its single consumer) and keeps them, so a test can wait for an event
 * that may already have happened, or for one after a mark. Waiters re-check on every event and on every
 * `poke()` (a handler call, a received load), so nothing waits on a timer.
 */
export class Recorder {
  readonly events: TransportEvent[] = []
  /** Resolves once the endpoint's event stream has ended (after close()). */
  readonly ended: Promise<void>
  private readonly waiters = new Set<{ check: Check; resolve: () => void }>()

  constructor(endpoint: Endpoint) {
    this.ended = (async () => {
      for await (const event of endpoint.events()) {
        this.events.push(event)
        this.poke()
      }
    })()
  }

  /** The index the next event will get; pass it as `from` to wait only for later events. */
  mark(): number {
    return this.events.length
  }

  count(predicate: (event: TransportEvent) => boolean, from = 0): number {
    return this.events.slice(from).filter(predicate).length
  }

  /** Waits for an event matching `predicate` at or after index `from`. */
  waitFor(predicate: (event: TransportEvent) => boolean, what: string, options: { from?: number; ms?: number } = {}): Promise<TransportEvent> {
    const from = options.from ?? 0
    const find = (): TransportEvent | undefined => this.events.slice(from).find(predicate)
    return this.until(() => find() !== undefined, what, options.ms).then(() => find()!)
  }

  /** Waits until `check` holds, re-checked on each event or poke. */
  until(check: Check, what: string, ms = 10_000): Promise<void> {
    if (check()) return Promise.resolve()
    let waiter: { check: Check; resolve: () => void } | undefined
    const done = new Promise<void>((resolve) => {
      waiter = { check, resolve }
      this.waiters.add(waiter)
    })
    return deadline(done, ms, what).finally(() => this.waiters.delete(waiter!))
  }

  /** Re-evaluates every waiter; call when something outside the event stream changed. */
  poke(): void {
    for (const waiter of this.waiters) {
      if (waiter.check()) {
        this.waiters.delete(waiter)
        waiter.resolve()
      }
    }
  }
}
