import { type LiveStats, type PublishClient, type PublishClientOptions } from '@brine/transport'
import { BoundedQueue, FrameTooLargeError, decode, decodeLimitsOf, type DecodeLimits, type WireValue } from '@brine/core'
import { Subscriber } from 'zeromq'
import { ZeroMQClient } from './client-endpoint.js'
import { BROADCAST_TOPIC, clientMaxMessageSize, messageSize, retryInterrupted, topicForId } from './socket-util.js'

/**
 * Minion side of the publish link: a Subscriber connected to `publish_port`, subscribed to
 * `broadcast` and to the SHA-1 of its id. Decoded loads wait in a bounded queue (the newest are
 * dropped when the consumer falls behind) for the single `for await` consumer. The receive loop
 * keeps a receive pending at all times: libzmq re-sends the subscriptions after a reconnect, but a
 * Subscriber with no receive outstanding was seen to miss loads from a restarted publisher.
 */
export class ZeroMQPublishClient extends ZeroMQClient<Subscriber> implements PublishClient {
  private readonly queue: BoundedQueue<WireValue>
  private readonly ids = new Set<string>()
  private readonly limits: DecodeLimits

  constructor(options: PublishClientOptions) {
    super('publish client', options)
    this.queue = new BoundedQueue(this.hwm, 'drop-newest')
    this.limits = decodeLimitsOf(options, 'client')
    if (options.id !== undefined) this.ids.add(options.id)
  }

  protected createSocket(): Subscriber {
    return new Subscriber({ linger: 0, receiveHighWaterMark: this.hwm, maxMessageSize: clientMaxMessageSize(this.maxFrameBytes) })
  }

  protected prepare(socket: Subscriber): void {
    retryInterrupted(() => socket.subscribe(BROADCAST_TOPIC, ...[...this.ids].map(topicForId)))
  }

  subscribe(id: string): void {
    if (this.ids.has(id)) return
    this.ids.add(id)
    const socket = this.socket
    if (socket !== undefined && !socket.closed) retryInterrupted(() => socket.subscribe(topicForId(id)))
  }

  protected accept(frames: Buffer[]): void {
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
      value = decode(body, this.address, this.limits)
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

  protected abandon(): void {
    // Closing ends the stream now: loads still queued are discarded, the iterator reports done.
    this.queue.end()
    this.queue.drain()
  }

  protected liveStats(): LiveStats {
    return { queued: this.queue.size, inFlight: 0, peers: this.link.connected ? 1 : 0 }
  }
}
