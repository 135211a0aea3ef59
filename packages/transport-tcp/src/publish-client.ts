import {
  BoundedQueue,
  ClosedError,
  DEFAULT_HWM,
  DEFAULT_MAX_FRAME_BYTES,
  EndpointCore,
  InvalidOperationError,
  MalformedFrameError,
  decode,
  encode,
  frame,
  type EndpointStats,
  type PublishClient,
  type PublishClientOptions,
  type TransportEvent,
  type WireValue,
} from '@brine/transport'
import { ReconnectingLink } from './reconnecting-link.js'

/**
 * Minion side of the TCP publish link: connects to the publish port in the background, says hello
 * (`{hello: 1, id}`) on every (re)connect, and yields each publish frame's payload. Loads wait in
 * a BoundedQueue of `hwm`; a consumer that falls behind loses the newest, counted in stats().dropped.
 */
export class TcpPublishClient implements PublishClient {
  readonly address: string
  private readonly core: EndpointCore
  private readonly maxFrameBytes: number
  private readonly loads: BoundedQueue<WireValue>
  private readonly link: ReconnectingLink
  private id: string | null
  private started = false
  private closing: Promise<void> | undefined

  constructor(options: PublishClientOptions) {
    this.address = `tcp://${options.host}:${options.port}`
    this.core = new EndpointCore('tcp', 'publish client', this.address, options.logger)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    const hwm = options.hwm ?? DEFAULT_HWM
    this.loads = new BoundedQueue<WireValue>(hwm)
    this.id = options.id ?? null
    this.link = new ReconnectingLink(
      this.core,
      { host: options.host, port: options.port, maxFrameBytes: this.maxFrameBytes, hwm, reconnect: options.reconnect },
      {
        onConnect: () => this.sendHello(),
        onFrame: (body, connection) => this.receive(body, connection.peer),
        onOversize: (error, connection) => this.core.frameDropped(connection.peer, error.message, error.size),
      },
    )
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  start(): Promise<void> {
    if (this.core.isClosed) return Promise.reject(new ClosedError('tcp publish client', this.address))
    if (this.started) return Promise.reject(new InvalidOperationError(`tcp publish client ${this.address} is already started`))
    this.started = true
    this.link.start()
    return Promise.resolve()
  }

  subscribe(id: string): void {
    this.id = id
    // Already connected: announce the new id now; otherwise the next connect's hello carries it.
    if (this.link.isConnected) this.sendHello()
  }

  private sendHello(): void {
    this.link.current?.write(frame(encode({ hello: 1, id: this.id })))
  }

  private receive(body: Buffer, peer: string): void {
    let load: WireValue
    try {
      load = decode(body, peer)
    } catch (error) {
      const reason = error instanceof MalformedFrameError ? error.message : String(error)
      this.core.frameDropped(peer, reason, body.length)
      return
    }
    if (!this.loads.push(load) && !this.loads.isEnded) {
      this.core.messageDropped(peer, `publish client queue for ${this.address} is full (hwm ${this.loads.capacity}); load dropped`)
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<WireValue> {
    return this.loads[Symbol.asyncIterator]()
  }

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    return {
      ...this.core.counters,
      queued: this.loads.size,
      inFlight: 0,
      peers: this.link.isConnected ? 1 : 0,
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    this.core.markClosed()
    // The iterator ends at once: loads not yet read are discarded with the endpoint.
    this.loads.drain()
    this.loads.end()
    await this.link.close()
    this.core.finishClose()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
