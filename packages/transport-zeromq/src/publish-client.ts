import {
  DEFAULT_HWM,
  EndpointBase,
  type FramedConnection,
  type ReconnectingLink,
  type LiveStats,
  type PublishClient,
  type PublishClientOptions,
} from '@brine/transport'
import { BoundedQueue, DEFAULT_MAX_FRAME_BYTES, decode, decodeLimitsOf, type DecodeLimits, type WireValue } from '@brine/core'
import { BROADCAST_TOPIC, endpointOf, messageSize, topicForId } from './socket-util.js'
import { messageParts } from './zmtp.js'
import { zmtpClientLink } from './zmtp-client.js'

const SUBSCRIBE = 1
/** Room for a publish's topic frame (`broadcast`, or a 40-byte SHA-1) beside a payload of max_frame_bytes. */
const TOPIC_ALLOWANCE = 64

/** `\x01topic` messages, one per topic, ready for one write. */
function subscriptions(topics: readonly string[]): Buffer[] {
  return topics.flatMap((topic) => messageParts([Buffer.concat([Buffer.from([SUBSCRIBE]), Buffer.from(topic, 'latin1')])]))
}

/**
 * Minion side of the publish link: a ZMTP 3.0 SUB of Brine's own, on node:net, connected to `publish_port`,
 * subscribed to `broadcast` and to the SHA-1 of its id. The subscriptions are sent again on every (re)connect,
 * as libzmq's Subscriber does. Decoded loads wait in a bounded queue (the newest are dropped when the consumer
 * falls behind) for the single `for await` consumer.
 */
export class ZeroMQPublishClient extends EndpointBase implements PublishClient {
  private readonly queue: BoundedQueue<WireValue>
  private readonly ids = new Set<string>()
  private readonly limits: DecodeLimits
  private readonly maxFrameBytes: number
  private readonly hwm: number
  private readonly link: ReconnectingLink

  constructor(options: PublishClientOptions) {
    super('zeromq', 'publish client', endpointOf(options), options.logger)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.queue = new BoundedQueue(this.hwm, 'drop-newest')
    this.limits = decodeLimitsOf(options, 'client')
    if (options.id !== undefined) this.ids.add(options.id)
    this.link = zmtpClientLink(
      this.core,
      options,
      { socketType: 'SUB', peerTypes: ['PUB', 'XPUB'], maxMessageBytes: this.maxFrameBytes + TOPIC_ALLOWANCE },
      {
        onConnect: (connection) => this.subscribeAll(connection),
        onMessage: (parts) => this.accept(parts),
      },
    )
  }

  protected open(): Promise<void> {
    this.link.start()
    return Promise.resolve()
  }

  private subscribeAll(connection: FramedConnection): void {
    connection.write(subscriptions([BROADCAST_TOPIC, ...[...this.ids].map(topicForId)]))
  }

  subscribe(id: string): void {
    if (this.ids.has(id)) return
    this.ids.add(id)
    // Not connected: the next connect subscribes to it with the rest.
    this.link.current?.write(subscriptions([topicForId(id)]))
  }

  reconnectNow(): void {
    if (this.core.isClosed) return
    this.link.reconnectNow()
  }

  /** One publish, `[topic, payload]`; a payload over max_frame_bytes never gets here (the reader skips it). */
  private accept(frames: Buffer[]): void {
    const [, body] = frames
    if (body === undefined || frames.length !== 2) {
      this.core.frameDropped(this.address, `expected [topic, payload], got ${frames.length} frames`, messageSize(frames))
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

  protected liveStats(): LiveStats {
    return { queued: this.queue.size, inFlight: 0, peers: this.link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    // Closing ends the stream now: loads still queued are discarded, the iterator reports done.
    this.queue.end()
    this.queue.drain()
    await this.link.close()
  }
}
