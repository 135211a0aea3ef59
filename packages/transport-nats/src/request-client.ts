import { nuid, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node'
import {
  DEFAULT_HWM,
  DEFAULT_MAX_PENDING_BYTES,
  DEFAULT_PEER_IDLE_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EndpointBase,
  RequestTable,
  type BrokerOptions,
  type LiveStats,
  type PendingRequest,
  type RequestClient,
  type RequestClientOptions,
  type SendOptions,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES, decodeLimitsOf, type WireValue } from '@brine/core'
import { Reassembler, publishChunked } from './chunks.js'
import { NatsLink } from './link.js'
import { bytesOf, serviceOf, subjectsOf } from './service.js'
import type { Subjects } from './subjects.js'

/**
 * Minion / client side of the NATS request link: each try publishes the request's envelope to
 * `<prefix>.<port>.req` with this client's own inbox as the reply subject; replies come back on
 * that one subscription and go to the shared RequestTable (ids, tries, timeouts, abort, close).
 * A request made while the broker is unreachable waits (within its timeout) and goes out on connect.
 */
export class NatsRequestClient extends EndpointBase implements RequestClient {
  readonly #subjects: Subjects
  readonly #inbox: string
  /** Every request's publish options: replies to this client's inbox. */
  readonly #replyTo: { reply: string }
  readonly #table: RequestTable
  readonly #link: NatsLink
  readonly #reassembler: Reassembler
  readonly #waiting = new Set<PendingRequest>()
  /** The inbox's subscription: this client's to drop on close, as the connection may outlive it (a shared one). */
  #replies: Subscription | undefined

  constructor(options: RequestClientOptions, defaults: BrokerOptions = {}) {
    const service = serviceOf(options, defaults)
    super('nats', 'request client', service.address, options.logger)
    this.#subjects = subjectsOf(service.broker, options.port)
    this.#inbox = `${this.#subjects.replyPrefix}${nuid.next()}`
    this.#replyTo = { reply: this.#inbox }
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    const hwm = options.hwm ?? DEFAULT_HWM
    this.#table = new RequestTable(
      this.core,
      {
        timeout: options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS,
        tries: options.tries ?? 1,
        limit: hwm,
        maxFrameBytes,
        limits: decodeLimitsOf(options, 'client'),
      },
      { transmit: (request) => this.#transmit(request), settled: (request) => this.#waiting.delete(request) },
    )
    this.#reassembler = new Reassembler(
      this.core,
      { maxFrameBytes, maxPendingBytes: Math.max(DEFAULT_MAX_PENDING_BYTES, maxFrameBytes), idleTimeout: DEFAULT_PEER_IDLE_TIMEOUT_MS },
      (body, peer) => this.#table.receive(body, peer),
    )
    this.#link = new NatsLink(
      this.core,
      service.broker,
      `brine request client ${service.address}`,
      options.reconnect,
      {
        onConnect: (connection, first) => this.#connected(connection, first),
      },
      options.connectionScope,
    )
  }

  protected open(): Promise<void> {
    this.#table.open()
    this.#link.start()
    return Promise.resolve()
  }

  send(request: WireValue, options?: SendOptions): Promise<WireValue> {
    return this.#table.send(request, options)
  }

  #connected(connection: NatsConnection, first: boolean): void {
    if (first) this.#replies = connection.subscribe(this.#inbox, { callback: (_error, message) => this.#message(message) })
    const waiting = [...this.#waiting]
    this.#waiting.clear()
    for (const request of waiting) this.#write(request, connection)
  }

  #message(message: Msg): void {
    // No server in the queue group: the broker's "no responders" status. The request waits out its try, as on a socket.
    if (message.data.length === 0 && message.headers !== undefined) return
    this.#reassembler.receive(bytesOf(message.data), message.reply ?? this.address)
  }

  #transmit(request: PendingRequest): void {
    const connection = this.#link.current
    if (connection === undefined || !this.#link.isConnected) this.#waiting.add(request)
    else this.#write(request, connection)
  }

  #write(request: PendingRequest, connection: NatsConnection): void {
    const messageId = (request.id * 8 + (request.attempt % 8)) >>> 0
    publishChunked((data) => connection.publish(this.#subjects.request, data, this.#replyTo), request.data, this.#link.maxPayload, messageId)
  }

  /** The connection is the broker's, which does not go away with the master: nothing to bring forward. */
  reconnectNow(): void {}

  protected liveStats(): LiveStats {
    return { queued: this.#waiting.size, inFlight: this.#table.inFlight, peers: this.#link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    this.#table.close()
    this.#reassembler.close()
    if (this.#replies !== undefined && !this.#replies.isClosed()) this.#replies.unsubscribe()
    await this.#link.close()
  }
}
