import type { Endpoint, TransportEvent } from '@brine/transport'
import { deadline } from './deadline.js'

export interface EventLog {
  readonly seen: TransportEvent[]
  /** Resolves with the first event (already seen or still to come) matching `match`. */
  next<T extends TransportEvent['type']>(
    type: T,
    what: string,
    match?: (event: Extract<TransportEvent, { type: T }>) => boolean,
    from?: number,
  ): Promise<Extract<TransportEvent, { type: T }>>
}

/** Consumes an endpoint's single event stream into a log that tests can wait on. */
export function watch(endpoint: Endpoint): EventLog {
  const seen: TransportEvent[] = []
  const waiters = new Set<() => void>()
  void (async () => {
    for await (const event of endpoint.events()) {
      seen.push(event)
      for (const wake of [...waiters]) wake()
    }
  })()
  return {
    seen,
    next(type, what, match = () => true, from = 0) {
      const find = (): Extract<TransportEvent, { type: typeof type }> | undefined =>
        seen.slice(from).find((event): event is Extract<TransportEvent, { type: typeof type }> => event.type === type && match(event as never))
      const found = find()
      if (found !== undefined) return Promise.resolve(found)
      let wake!: () => void
      const waiting = new Promise<Extract<TransportEvent, { type: typeof type }>>((resolve) => {
        wake = () => {
          const event = find()
          if (event !== undefined) {
            waiters.delete(wake)
            resolve(event)
          }
        }
        waiters.add(wake)
      })
      return deadline(waiting, 5000, what).finally(() => waiters.delete(wake))
    },
  }
}
