import {
  InvalidOperationError,
  encode,
  type PublishOptions,
  type PublishServer,
  type PublishServerOptions,
  type WireValue,
} from '@brine/transport'
import { XPublisher } from 'zeromq'
import { ZeroMQServer } from './server-endpoint.js'
import { BROADCAST_TOPIC, receiveEach, topicForId } from './socket-util.js'

const SUBSCRIBE = 1
const UNSUBSCRIBE = 0

/**
 * Master side of the publish link: an XPublisher bound to `publish_port`. Publishes go out as
 * `[topic, payload]`; libzmq filters by topic at the publisher, so a targeted publish reaches only
 * the subscriber whose id hashes to that topic. Subscriptions come back as messages and become
 * `peer-subscribe` events.
 */
export class ZeroMQPublishServer extends ZeroMQServer<XPublisher> implements PublishServer {
  constructor(options: PublishServerOptions) {
    super('publish server', options)
  }

  protected createSocket(): XPublisher {
    // allSubs: every subscribe is reported, duplicates included (many subscribers on one topic,
    // re-subscriptions after a reconnect), so each shows up as a peer-subscribe event.
    return new XPublisher({ linger: 0, sendHighWaterMark: this.hwm, verbosity: 'allSubs' })
  }

  protected receiveLoop(socket: XPublisher): Promise<void> {
    return receiveEach(socket, this.core, `${this.core.what} ${this.address}`, (frames) => this.acceptSubscription(frames))
  }

  /** A subscriber's (un)subscribe message: byte 1 or 0, then the topic. */
  private acceptSubscription(frames: Buffer[]): void {
    const frame = frames[0]
    if (frames.length !== 1 || frame === undefined || frame.length === 0) return
    const topic = frame.subarray(1).toString('utf8')
    if (frame[0] === SUBSCRIBE) {
      this.core.emit({ type: 'peer-subscribe', peer: this.address, topic })
    } else if (frame[0] === UNSUBSCRIBE) {
      this.core.logger.debug(`${this.core.what} ${this.address}: unsubscribe ${topic}`)
    }
  }

  protected serverStats(): { inFlight: number; waiting: number } {
    return { inFlight: 0, waiting: 0 }
  }

  /**
   * Encodes the payload once and hands one `[topic, body]` message per recipient to libzmq:
   * `broadcast` without `topics`, else the SHA-1 of each id. Resolves once libzmq has them all.
   */
  async publish(payload: WireValue, options: PublishOptions = {}): Promise<void> {
    if (this.core.isClosed) throw this.core.closedError()
    const queue = this.queue
    if (queue === undefined) throw new InvalidOperationError(`${this.core.what} ${this.address}: call start() before publish()`)
    const body = encode(payload, this.maxFrameBytes, this.address)
    const topics = options.topics === undefined ? [BROADCAST_TOPIC] : [...new Set(options.topics)].map(topicForId)
    await Promise.all(topics.map((topic) => queue.send([topic, body])))
  }
}
