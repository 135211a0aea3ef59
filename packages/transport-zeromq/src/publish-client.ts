import {
  BoundedQueue,
  ClosedError,
  DEFAULT_BACKOFF,
  DEFAULT_HWM,
  DEFAULT_MAX_FRAME_BYTES,
  EndpointCore,
  FrameTooLargeError,
  InvalidOperationError,
  decode,
  type EndpointStats,
  type PublishClient,
  type PublishClientOptions,
  type TransportEvent,
  type WireValue,
} from '@brine/transport'
import { Subscriber } from 'zeromq'
import { BROADCAST_TOPIC, ClientLink, closeSocket, formatEndpoint, isIPv6, messageSize, receiveEach, retryInterrupted, topicForId, zmqReconnectOptions } from './socket-util.js'

/**
 * Minion side of the publish link: a Subscriber connected to `publish_port`, subscribed to
 * `broadcast` and to the SHA-1 of its id. Decoded loads wait in a bounded queue (the newest are
 * dropped when the consumer falls behind) for the single `for await` consumer.
 */
export class ZeroMQPublishClient implements PublishClient {
  readonly address: string
  private readonly core: EndpointCore
  private readonly maxFrameBytes: number
  private readonly hwm: number
  private readonly options: PublishClientOptions
  private readonly queue: BoundedQueue<WireValue>
  private readonly ids = new Set<string>()
  private readonly link: ClientLink
  private socket: Subscriber | undefined
  private loop: Promise<void> | undefined
  private closing: Promise<void> | undefined

  constructor(options: PublishClientOptions) {
    this.options = options
    this.address = formatEndpoint(options.host, options.port)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.core = new EndpointCore('zeromq', 'publish-client', this.address, options.logger?.child('zeromq:publish-client'))
    this.queue = new BoundedQueue(this.hwm, 'drop-newest')
    this.link = new ClientLink(this.core, this.address)
    if (options.id !== undefined) this.ids.add(options.id)
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  /** Resolves at once; connecting and reconnecting go on in the background. */
  async start(): Promise<void> {
    if (this.core.isClosed) throw new ClosedError('publish client', this.address)
    if (this.socket !== undefined) throw new InvalidOperationError(`publish client ${this.address} is already started`)
    const backoff = { ...DEFAULT_BACKOFF, ...this.options.reconnect }
    const socket = new Subscriber({
      linger: 0,
      receiveHighWaterMark: this.hwm,
      ...zmqReconnectOptions(backoff),
    })
    if (isIPv6(this.options.host)) socket.ipv6 = true
    this.socket = socket
    this.link.attach(socket)
    retryInterrupted(() => socket.subscribe(BROADCAST_TOPIC, ...[...this.ids].map(topicForId)))
    retryInterrupted(() => socket.connect(this.address))
    this.loop = this.receiveLoop(socket)
  }

  subscribe(id: string): void {
    if (this.ids.has(id)) return
    this.ids.add(id)
    const socket = this.socket
    if (socket !== undefined && !socket.closed) retryInterrupted(() => socket.subscribe(topicForId(id)))
  }

  /**
   * Keeps a receive pending at all times: libzmq re-sends the subscriptions after a reconnect, but
   * a Subscriber with no receive outstanding was seen to miss loads from a restarted publisher.
   */
  private receiveLoop(socket: Subscriber): Promise<void> {
    return receiveEach(socket, this.core, `publish client ${this.address}`, (frames) => this.accept(frames))
  }

  private accept(frames: Buffer[]): void {
    const [, body] = frames
    if (body === undefined || frames.length !== 2) {
      this.core.frameDropped(this.address, `expected [topic, payload], got ${frames.length} frames`, messageSize(frames))
      return
    }
    if (body.length > this.maxFrameBytes) {
      this.core.frameDropped(this.address, new FrameTooLargeError(body.length, this.maxFrameBytes, this.address).message, body.length)
      return
    }
    let value: WireValue
    try {
      value = decode(body, this.address)
    } catch (error) {
      this.core.frameDropped(this.address, (error as Error).message, body.length)
      return
    }
    if (!this.queue.push(value) && !this.queue.isEnded) {
      this.core.messageDropped(this.address, `publish client queue full (hwm ${this.hwm}); newest load dropped`)
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<WireValue> {
    return this.queue[Symbol.asyncIterator]()
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    this.core.markClosed()
    // Closing ends the stream now: loads still queued are discarded, the iterator reports done.
    this.queue.end()
    this.queue.drain()
    this.link.connected = false
    if (this.socket !== undefined) await closeSocket(this.socket, false)
    await this.loop
    this.core.finishClose()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    return { queued: this.queue.size, ...this.core.counters, inFlight: 0, peers: this.link.connected ? 1 : 0 }
  }
}
