import type { Endpoint, TransportEvent } from '@brine/transport'
import { afterEach } from 'vitest'

/** Fails with a message naming what was awaited when `promise` does not settle within `ms`. */
import { deadline } from '@brine/transport-compliance'

export { deadline }

/** Consumes an endpoint's single events() stream and lets a test wait for the events it needs. */
export class EventLog {
  readonly seen: TransportEvent[] = []
  private waiters: Array<{ from: number; match: (event: TransportEvent) => boolean; resolve: (event: TransportEvent) => void }> = []

  constructor(endpoint: Endpoint) {
    void (async () => {
      for await (const event of endpoint.events()) {
        this.seen.push(event)
        for (const waiter of [...this.waiters]) {
          if (this.seen.length - 1 >= waiter.from && waiter.match(event)) {
            this.waiters.splice(this.waiters.indexOf(waiter), 1)
            waiter.resolve(event)
          }
        }
      }
    })()
  }

  count(type: TransportEvent['type']): number {
    return this.seen.filter((event) => event.type === type).length
  }

  /** The first event at or after index `from` that matches. */
  waitFor(match: (event: TransportEvent) => boolean, what: string, from = 0, ms = 10_000): Promise<TransportEvent> {
    const found = this.seen.slice(from).find(match)
    if (found !== undefined) return Promise.resolve(found)
    return deadline(new Promise((resolve) => this.waiters.push({ from, match, resolve })), ms, what)
  }

  /** Waits until `n` events of `type` have been seen in total. */
  async waitForCount(type: TransportEvent['type'], n: number, what: string, ms = 10_000): Promise<void> {
    let index = 0
    for (let i = 0; i < n; i++) {
      await this.waitFor((event) => event.type === type, `${what} (${i + 1} of ${n})`, index, ms)
      index = this.seen.findIndex((event, position) => position >= index && event.type === type) + 1
    }
  }
}

/** Endpoints closed after each test, newest first. */
const cleanup: Array<{ close(): Promise<void> }> = []

afterEach(async () => {
  const endpoints = cleanup.splice(0).reverse()
  await deadline(Promise.all(endpoints.map((endpoint) => endpoint.close())), 10_000, 'endpoints to close after the test')
})

export function track<T extends { close(): Promise<void> }>(endpoint: T): T {
  cleanup.push(endpoint)
  return endpoint
}

/** The port of a `tcp://host:port` address. */
export function portOf(address: string): number {
  const port = Number(address.slice(address.lastIndexOf(':') + 1))
  if (!Number.isInteger(port) || port <= 0) throw new Error(`no port in ${address}`)
  return port
}

export const HOST = '127.0.0.1'

/** Polls `condition` every 10 ms until it holds; fails naming `what` after `ms`. */
export async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  await deadline(
    (async () => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10))
    })(),
    ms,
    what,
  )
}

/** Reads the next `n` values from an async iterator. */
export async function take<T>(iterator: AsyncIterator<T>, n: number, what: string, ms = 10_000): Promise<T[]> {
  const values: T[] = []
  await deadline(
    (async () => {
      while (values.length < n) {
        const result = await iterator.next()
        if (result.done === true) throw new Error(`stream ended after ${values.length} of ${n} values`)
        values.push(result.value)
      }
    })(),
    ms,
    what,
  )
  return values
}
