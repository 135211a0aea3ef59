import { connect, type Socket } from 'node:net'
import { FrameReader, decode, encode, frame, type Endpoint, type TransportEvent, type WireValue } from '@brine/transport'

import { deadline } from '@brine/testkit'

export { deadline, portOf } from '@brine/testkit'

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

/** Endpoints a test opened, closed after it whatever happened. */
export class Cleanup {
  private readonly endpoints: Endpoint[] = []
  add<T extends Endpoint>(endpoint: T): T {
    this.endpoints.push(endpoint)
    return endpoint
  }
  async run(): Promise<void> {
    const endpoints = this.endpoints.splice(0)
    await deadline(Promise.all(endpoints.map((endpoint) => endpoint.close())), 5000, 'endpoints to close')
  }
}

/** Waits until `condition()` holds, checking every few ms; bounded by a deadline naming `what`. */
export async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const started = Date.now()
  while (!condition()) {
    if (Date.now() - started > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A hand-driven TCP peer: writes whatever a test wants and collects the frames it is sent. */
export class RawPeer {
  readonly socket: Socket
  readonly received: WireValue[] = []
  readonly connected: Promise<void>
  readonly closed: Promise<void>

  constructor(port: number, options: { read?: boolean } = {}) {
    this.socket = connect({ host: '127.0.0.1', port })
    this.socket.on('error', () => {})
    const reader = new FrameReader({ onFrame: (body) => this.received.push(decode(body)), onOversize: () => {} })
    if (options.read === false) this.socket.pause()
    else this.socket.on('data', (chunk: Buffer) => reader.push(chunk))
    this.connected = deadline(new Promise<void>((resolve) => this.socket.once('connect', () => resolve())), 5000, 'raw peer to connect')
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()))
  }

  send(value: WireValue): void {
    this.socket.write(frame(encode(value)))
  }

  async close(): Promise<void> {
    this.socket.destroy()
    await deadline(this.closed, 5000, 'raw peer socket to close')
  }
}
