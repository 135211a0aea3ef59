import {
  DEFAULT_HWM,
  EndpointBase,
  Listener,
  MAX_SUBSCRIBER_FRAME_BYTES,
  MAX_SUBSCRIPTIONS_PER_PEER,
  type FramedConnection,
  type LiveStats,
  type PublishOptions,
  type PublishServer,
  type PublishServerOptions,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES, InvalidOperationError, LruMap, encode, type WireValue } from '@brine/core'
import { BROADCAST_TOPIC, endpointOf, formatEndpoint, topicForId } from './socket-util.js'
import { frameHeader } from './zmtp.js'
import { ZmtpSession } from './zmtp-session.js'

const SUBSCRIBE = 1
const UNSUBSCRIBE = 0
/** The only topics a Brine subscriber takes: `broadcast`, and the hex SHA-1 of its id. */
const ID_TOPIC = /^[0-9a-f]{40}$/
/** Encoded topic frames kept for reuse (one per minion a targeted publish names). */
const TOPIC_FRAMES = 16_384

/**
 * Master side of the publish link: a ZMTP 3.0 XPUB bound to `publish_port`, spoken by Brine itself
 * over the runtime's Listener, for libzmq Subscribers. Publishes go out as `[topic, payload]`, the
 * payload encoded once and written to every connection subscribed to the topic (`broadcast`, or the
 * SHA-1 of each id named), so a targeted publish never crosses the wire to anybody else.
 *
 * Subscriptions are checked as they arrive, before they are kept: a subscriber may hold
 * `broadcast` and SHA-1 topics only, at most MAX_SUBSCRIPTIONS_PER_PEER of them, in messages of at
 * most MAX_SUBSCRIBER_FRAME_BYTES; anything else ends its connection (`peer-drop`). So the
 * subscription table holds at most that many topics per admitted connection. Each connection
 * queues at most `hwm` publishes while its socket is not draining; past that, publishes to it are
 * dropped and counted.
 */
export class ZeroMQPublishServer extends EndpointBase implements PublishServer {
  readonly #listener: Listener
  readonly #maxFrameBytes: number
  readonly #hwm: number
  readonly #sessions = new Map<FramedConnection, ZmtpSession>()
  /** Each session's topics. */
  readonly #topicsOf = new Map<ZmtpSession, Set<string>>()
  /** Each topic's sessions. */
  readonly #byTopic = new Map<string, Set<ZmtpSession>>()
  readonly #topicFrames = new LruMap<string, Buffer>(TOPIC_FRAMES)

  constructor(options: PublishServerOptions) {
    super('zeromq', 'publish server', endpointOf(options), options.logger)
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.#hwm = options.hwm ?? DEFAULT_HWM
    // A subscriber only ever sends subscriptions: anything larger than one can be ends its connection.
    const inbound = Math.min(this.#maxFrameBytes, MAX_SUBSCRIBER_FRAME_BYTES)
    this.#listener = new Listener(
      this.core,
      {
        ...options,
        maxFrameBytes: inbound,
        hwm: this.#hwm,
        formatAddress: formatEndpoint,
        // libzmq peers wake two threads per segment received: publishes made together to one go out together.
        coalesce: true,
        reader: (connection) => {
          const session = new ZmtpSession(
            connection,
            'XPUB',
            ['SUB', 'XSUB'],
            {
              onMessage: (parts, from) => this.#subscription(parts, from),
              onOversize: (_size, reason, from) => from.connection.drop(`${reason}: larger than any subscription`),
            },
            inbound,
          )
          this.#sessions.set(connection, session)
          return session.reader
        },
      },
      {
        onConnect: (connection) => this.#sessions.get(connection)?.greet(),
        onDisconnect: (connection) => this.#forget(connection),
      },
    )
  }

  protected open(): Promise<void> {
    return this.#listener.start()
  }

  /** A subscriber's (un)subscribe message: byte 1 or 0, then the topic. */
  #subscription(parts: Buffer[], session: ZmtpSession): void {
    const connection = session.connection
    const [frame] = parts
    if (parts.length !== 1 || frame === undefined || frame.length === 0 || (frame[0] !== SUBSCRIBE && frame[0] !== UNSUBSCRIBE)) {
      connection.drop('a subscriber sent a message that is not a subscription')
      return
    }
    const topic = frame.subarray(1).toString('latin1')
    let topics = this.#topicsOf.get(session)
    if (frame[0] === UNSUBSCRIBE) {
      if (topics?.delete(topic) === true) this.#unindex(topic, session)
      this.core.logger.debug(`${this.core.what} ${this.address}: ${connection.peer} unsubscribed ${topic}`)
      return
    }
    if (topic !== BROADCAST_TOPIC && !ID_TOPIC.test(topic)) {
      connection.drop(
        `subscribed to ${JSON.stringify(topic.slice(0, 64))}${topic.length > 64 ? '…' : ''}: a subscriber may take only 'broadcast' and the SHA-1 of a minion id`,
      )
      return
    }
    if (topics?.has(topic) === true) return
    if (topics === undefined) this.#topicsOf.set(session, (topics = new Set()))
    if (topics.size >= MAX_SUBSCRIPTIONS_PER_PEER) {
      connection.drop(`more than ${MAX_SUBSCRIPTIONS_PER_PEER} subscriptions from one subscriber`)
      return
    }
    topics.add(topic)
    let sessions = this.#byTopic.get(topic)
    if (sessions === undefined) this.#byTopic.set(topic, (sessions = new Set()))
    sessions.add(session)
    this.core.emit({ type: 'peer-subscribe', peer: connection.peer, topic })
  }

  #unindex(topic: string, session: ZmtpSession): void {
    const sessions = this.#byTopic.get(topic)
    sessions?.delete(session)
    if (sessions?.size === 0) this.#byTopic.delete(topic)
  }

  #forget(connection: FramedConnection): void {
    const session = this.#sessions.get(connection)
    this.#sessions.delete(connection)
    if (session === undefined) return
    for (const topic of this.#topicsOf.get(session) ?? []) this.#unindex(topic, session)
    this.#topicsOf.delete(session)
  }

  /** Topics held over all subscribers now (at most MAX_SUBSCRIPTIONS_PER_PEER per connection). */
  get subscriptions(): number {
    let count = 0
    for (const topics of this.#topicsOf.values()) count += topics.size
    return count
  }

  #topicFrame(topic: string): Buffer {
    let frame = this.#topicFrames.get(topic)
    if (frame === undefined) {
      const bytes = Buffer.from(topic, 'latin1')
      frame = Buffer.concat([frameHeader(bytes.length, true), bytes])
      this.#topicFrames.set(topic, frame)
    }
    return frame
  }

  /**
   * Encodes the payload once and writes `[topic, payload]` to every subscriber of `broadcast`
   * (no `topics`) or of the SHA-1 of each id named. Resolves once queued for every recipient.
   */
  async publish(payload: WireValue, options: PublishOptions = {}): Promise<void> {
    if (this.core.isClosed) throw this.core.closedError()
    if (!this.started) throw new InvalidOperationError(`${this.core.what} ${this.address}: call start() before publish()`)
    const body = encode(payload, this.#maxFrameBytes, this.address)
    const header = frameHeader(body.length, false)
    const topics = options.topics === undefined ? [BROADCAST_TOPIC] : [...new Set(options.topics)].map(topicForId)
    for (const topic of topics) {
      const sessions = this.#byTopic.get(topic)
      if (sessions === undefined) continue
      const message = [this.#topicFrame(topic), header, body]
      for (const session of sessions) {
        const connection = session.connection
        if (!connection.write(message) && connection.isOpen) {
          this.core.messageDropped(connection.peer, `publish queue for ${connection.peer} is full (hwm ${this.#hwm}); publish dropped`)
        }
      }
    }
  }

  protected liveStats(): LiveStats {
    return { queued: this.#listener.queued, inFlight: 0, peers: this.#listener.connections.size, subscriptions: this.subscriptions }
  }

  protected async release(): Promise<void> {
    await this.#listener.close()
    this.#sessions.clear()
    this.#topicsOf.clear()
    this.#byTopic.clear()
  }
}
