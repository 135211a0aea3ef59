import { nuid, type Msg, type NatsConnection } from '@nats-io/transport-node'
import {
  EndpointBase,
  MAX_SUBSCRIBER_FRAME_BYTES,
  type BrokerOptions,
  type LiveStats,
  type PublishOptions,
  type PublishServer,
  type PublishServerOptions,
} from '@brine/transport'
import { BrineError, DEFAULT_MAX_FRAME_BYTES, decode, decodeLimitsOf, encode, type DecodeLimits, type WireValue } from '@brine/core'
import { publishChunked } from './chunks.js'
import { NatsLink } from './link.js'
import { bytesOf, natsAddress, serviceOf, servicePort, subjectsOf, type Service } from './service.js'
import type { Subjects } from './subjects.js'

/** Subscribers the server remembers from their hellos (peers and their ids, for stats and events only). */
const SUBSCRIBERS_REMEMBERED = 65_536

/**
 * Master side of the NATS publish link: a broadcast goes once to `<prefix>.<port>.pub.all`, a
 * targeted publish once to each named minion's own subject, so the broker delivers it to that
 * minion alone. Messages over the server's `max_payload` go as chunks. The server hears
 * subscribers' hellos (`peer-subscribe`, stats) but needs none to deliver: the broker routes.
 * While the broker is unreachable, publishes are dropped and counted, as a socket at its hwm. A publish
 * resolves once its messages are handed over, having waited for the broker to catch up whenever more than
 * OUTBOUND_FLUSH_BYTES (link.ts) went out since it last had: the master's memory never holds what the broker
 * has not read.
 */
export class NatsPublishServer extends EndpointBase implements PublishServer {
  readonly #service: Service
  readonly #maxFrameBytes: number
  readonly #limits: DecodeLimits
  readonly #link: NatsLink
  /** Subscriber (its client nuid) to the id it announced, or null for broadcasts only. */
  readonly #subscribers = new Map<string, string | null>()
  /** Subscribers in #subscribers with an id. */
  #ids = 0
  readonly #port: number
  #subjects: Subjects | undefined
  #messageId = Math.floor(Math.random() * 2 ** 32)
  readonly #publisherId = nuid.next()
  /** The reply subject every publish carries (it names this publisher, so a minion keeps two masters' chunks apart): made once. */
  #from = ''

  constructor(options: PublishServerOptions, defaults: BrokerOptions = {}) {
    const service = serviceOf(options, defaults)
    super('nats', 'publish server', service.address, options.logger)
    this.#service = service
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.#limits = decodeLimitsOf(options, 'server')
    this.#link = new NatsLink(this.core, service.broker, `brine publish server ${service.address}`, undefined, {
      onConnect: (connection) => this.#announce(connection),
    })
    this.#port = options.port
  }

  protected async open(): Promise<void> {
    const port = await servicePort(this.#port)
    this.core.address = natsAddress(this.#service.broker, port)
    const subjects = subjectsOf(this.#service.broker, port)
    this.#subjects = subjects
    this.#from = `${subjects.base}.publisher.${this.#publisherId}`
    const connection = await this.#link.connectOnce()
    connection.subscribe(subjects.hello, { callback: (_error, message) => this.#hello(message) })
    await connection.flush()
    this.#announce(connection)
    this.core.emit({ type: 'listening', address: this.address })
  }

  /** Asks subscribers already there to say hello (a restarted master learns its fleet). */
  #announce(connection: NatsConnection): void {
    if (this.#subjects !== undefined) connection.publish(`${this.#subjects.hello}.ask`)
  }

  #hello(message: Msg): void {
    const peer = message.reply ?? message.subject
    const body = bytesOf(message.data)
    if (body.length > MAX_SUBSCRIBER_FRAME_BYTES) {
      this.core.frameDropped(peer, `a subscriber hello of ${body.length} bytes is over ${MAX_SUBSCRIBER_FRAME_BYTES}`, body.length)
      return
    }
    let value: WireValue
    try {
      value = decode(body, peer, this.#limits)
    } catch (error) {
      this.core.frameDropped(peer, BrineError.isInstance(error) ? error.message : String(error), body.length)
      return
    }
    const hello = value as { hello?: unknown; id?: unknown; client?: unknown } | null
    const id = hello?.id ?? null
    if (
      typeof hello !== 'object' ||
      hello === null ||
      (hello.hello !== 1 && hello.hello !== 0) ||
      typeof hello.client !== 'string' ||
      (id !== null && typeof id !== 'string')
    ) {
      this.core.frameDropped(peer, `malformed frame from ${peer}: not a subscriber hello`, body.length)
      return
    }
    const known = this.#forget(hello.client)
    if (hello.hello === 0) {
      if (known) this.core.emit({ type: 'peer-disconnect', peer: hello.client })
      return
    }
    this.#remember(hello.client, id)
    if (!known) this.core.emit({ type: 'peer-connect', peer: hello.client })
    this.core.emit({ type: 'peer-subscribe', peer: hello.client, topic: 'broadcast' })
    if (id !== null) this.core.emit({ type: 'peer-subscribe', peer: hello.client, topic: id })
  }

  #remember(client: string, id: string | null): void {
    // A subscriber that went without a goodbye (a crash) is forgotten oldest first, past the bound.
    if (this.#subscribers.size >= SUBSCRIBERS_REMEMBERED) this.#forget(this.#subscribers.keys().next().value as string)
    this.#subscribers.set(client, id)
    if (id !== null) this.#ids++
  }

  #forget(client: string): boolean {
    const id = this.#subscribers.get(client)
    if (id === undefined) return false
    this.#subscribers.delete(client)
    if (id !== null) this.#ids--
    return true
  }

  async publish(payload: WireValue, options: PublishOptions = {}): Promise<void> {
    if (this.core.isClosed) throw this.core.closedError()
    const body = encode(payload, this.#maxFrameBytes)
    const connection = this.#link.current
    const subjects = this.#subjects
    const targets = options.topics === undefined ? undefined : new Set(options.topics)
    if (connection === undefined || subjects === undefined || !this.#link.isConnected) {
      this.core.messageDropped(this.address, `the NATS connection of ${this.address} is down; publish dropped`)
      return
    }
    const from = { reply: this.#from }
    const send = (subject: string): void => {
      this.#messageId = (this.#messageId + 1) >>> 0
      publishChunked((data) => connection.publish(subject, data, from), body, this.#link.maxPayload, this.#messageId)
    }
    if (targets === undefined) {
      send(subjects.broadcast)
      await this.#link.sent(body.length)
      return
    }
    for (const id of targets) {
      send(subjects.minion(id))
      // A job to thousands of minions is thousands of messages: the broker reads them as fast as it can, no faster.
      await this.#link.sent(body.length)
    }
  }

  protected liveStats(): LiveStats {
    return { queued: 0, inFlight: 0, peers: this.#subscribers.size, subscriptions: this.#subscribers.size + this.#ids }
  }

  protected async release(): Promise<void> {
    await this.#link.close()
  }
}
