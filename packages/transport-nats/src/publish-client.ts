import { nuid, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node'
import {
  DEFAULT_HWM,
  DEFAULT_MAX_PENDING_BYTES,
  DEFAULT_PEER_IDLE_TIMEOUT_MS,
  EndpointBase,
  type BrokerOptions,
  type LiveStats,
  type PublishClient,
  type PublishClientOptions,
} from '@brine/transport'
import { BoundedQueue, BrineError, DEFAULT_MAX_FRAME_BYTES, decode, decodeLimitsOf, encode, type DecodeLimits, type WireValue } from '@brine/core'
import { Reassembler } from './chunks.js'
import { NatsLink } from './link.js'
import { bytesOf, serviceOf, subjectsOf } from './service.js'
import type { Subjects } from './subjects.js'

/**
 * Minion side of the NATS publish link: subscribes to the fleet's broadcast subject and to its own
 * minion subject, and to nothing else, so the broker never hands it another minion's publishes.
 * It says hello (`{hello: 1, id, client}`) on every (re)connect and when the master asks, and
 * goodbye on close. Loads wait in a BoundedQueue of `hwm`; past it the newest is dropped and the
 * client counts itself a slow consumer.
 */
export class NatsPublishClient extends EndpointBase implements PublishClient {
  readonly #subjects: Subjects
  readonly #limits: DecodeLimits
  readonly #loads: BoundedQueue<WireValue>
  readonly #link: NatsLink
  readonly #reassembler: Reassembler
  readonly #client = nuid.next()
  #id: string | null
  #own: Subscription | undefined
  /** Every subscription this client made: its own to drop on close, as the connection may outlive it (a shared one). */
  readonly #subscriptions = new Set<Subscription>()
  #behind = false

  constructor(options: PublishClientOptions, defaults: BrokerOptions = {}) {
    const service = serviceOf(options, defaults)
    super('nats', 'publish client', service.address, options.logger)
    this.#subjects = subjectsOf(service.broker, options.port)
    this.#limits = decodeLimitsOf(options, 'client')
    this.#loads = new BoundedQueue<WireValue>(options.hwm ?? DEFAULT_HWM)
    this.#id = options.id ?? null
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.#reassembler = new Reassembler(
      this.core,
      { maxFrameBytes, maxPendingBytes: Math.max(DEFAULT_MAX_PENDING_BYTES, maxFrameBytes), idleTimeout: DEFAULT_PEER_IDLE_TIMEOUT_MS },
      (body, peer) => this.#receive(body, peer),
    )
    this.#link = new NatsLink(
      this.core,
      service.broker,
      `brine publish client ${this.#id ?? ''}`.trim(),
      options.reconnect,
      {
        onConnect: (connection, first) => this.#connected(connection, first),
      },
      options.connectionScope,
    )
  }

  protected open(): Promise<void> {
    this.#link.start()
    return Promise.resolve()
  }

  subscribe(id: string): void {
    this.#id = id
    const connection = this.#link.current
    if (connection === undefined) return
    // Already connected: the old id's subject goes, the new one comes, and the master hears of it.
    this.#unsubscribe(this.#own)
    this.#own = this.#subscribe(connection, this.#subjects.minion(id))
    this.#hello(connection, 1)
  }

  #connected(connection: NatsConnection, first: boolean): void {
    if (first) {
      this.#subscriptions.clear()
      this.#subscribe(connection, this.#subjects.broadcast)
      if (this.#id !== null) this.#own = this.#subscribe(connection, this.#subjects.minion(this.#id))
      this.#subscriptions.add(connection.subscribe(`${this.#subjects.hello}.ask`, { callback: () => this.#hello(connection, 1) }))
    }
    // Subscriptions go to the server before the hello on this connection, so a master that hears the hello can already reach us.
    this.#hello(connection, 1)
  }

  #subscribe(connection: NatsConnection, subject: string): Subscription {
    const subscription = connection.subscribe(subject, { callback: (_error, message) => this.#message(message) })
    this.#subscriptions.add(subscription)
    return subscription
  }

  #unsubscribe(subscription: Subscription | undefined): void {
    if (subscription === undefined) return
    this.#subscriptions.delete(subscription)
    if (!subscription.isClosed()) subscription.unsubscribe()
  }

  #hello(connection: NatsConnection, hello: 0 | 1): void {
    if (!connection.isClosed()) connection.publish(this.#subjects.hello, encode({ hello, id: this.#id, client: this.#client }))
  }

  #message(message: Msg): void {
    this.#reassembler.receive(bytesOf(message.data), message.reply ?? message.subject)
  }

  #receive(body: Buffer, peer: string): void {
    let load: WireValue
    try {
      load = decode(body, peer, this.#limits)
    } catch (error) {
      this.core.frameDropped(peer, BrineError.isInstance(error) ? error.message : String(error), body.length)
      return
    }
    if (this.#loads.push(load)) {
      this.#behind = false
    } else if (!this.#loads.isEnded) {
      // One slow-consumer episode per stretch of drops; every dropped load is counted in `dropped`.
      if (!this.#behind) this.core.counters.slowConsumers++
      this.#behind = true
      this.core.messageDropped(peer, `slow consumer: publish client queue for ${this.address} is full (hwm ${this.#loads.capacity}); load dropped`)
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<WireValue> {
    return this.#loads[Symbol.asyncIterator]()
  }

  /** The connection is the broker's, which does not go away with the master: nothing to bring forward. */
  reconnectNow(): void {}

  protected liveStats(): LiveStats {
    return { queued: this.#loads.size, inFlight: 0, peers: this.#link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    this.#loads.drain()
    this.#loads.end()
    this.#reassembler.close()
    const connection = this.#link.current
    if (connection !== undefined && this.#link.isConnected) {
      this.#hello(connection, 0)
      await connection.flush().catch(() => {})
    }
    for (const subscription of [...this.#subscriptions]) this.#unsubscribe(subscription)
    await this.#link.close()
  }
}
