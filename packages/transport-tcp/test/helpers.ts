import { connect, type Socket } from 'node:net'
import { type Endpoint } from '@brine/transport'
import { FrameReader, decode, encode, frame, type WireValue } from '@brine/core'

import { deadline } from '@brine/testkit'

export { deadline, portOf, watch, type EventLog } from '@brine/testkit'

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
