import { nuid, type Msg } from '@nats-io/transport-node'
import {
  DEFAULT_FRAME_TIMEOUT_MS,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_MAX_PENDING_BYTES,
  DEFAULT_PEER_IDLE_TIMEOUT_MS,
  EndpointBase,
  RequestServing,
  servingOptionsOf,
  type BrokerOptions,
  type LiveStats,
  type RequestHandler,
  type RequestServer,
  type RequestServerOptions,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES } from '@brine/core'
import { Reassembler, publishChunked } from './chunks.js'
import { NatsLink } from './link.js'
import { bytesOf, natsAddress, serviceOf, servicePort, subjectsOf, type Service } from './service.js'
import type { Subjects } from './subjects.js'

/**
 * Master side of the NATS request link: a queue subscription on `<prefix>.<port>.req` in the group
 * `<prefix>.<port>.masters`, so each request reaches one of the masters serving it. Every message is
 * reassembled (within max_frame_bytes, max_pending_bytes and peer_idle_timeout) and handed to the
 * shared RequestServing loop; the reply goes to the request's reply subject, which must be one of
 * this service's client inboxes (a peer cannot make the master publish anywhere else).
 */
export class NatsRequestServer extends EndpointBase implements RequestServer {
  readonly #service: Service
  readonly #port: number
  readonly #serving: RequestServing<string>
  readonly #reassembler: Reassembler
  readonly #link: NatsLink
  readonly #serverId = nuid.next()
  #subjects: Subjects | undefined
  /** The reply subject every answer carries: it names this server, so a client keeps chunks of two masters' replies apart. */
  #from = { reply: '' }
  #messageId = 0

  constructor(options: RequestServerOptions, defaults: BrokerOptions = {}) {
    const service = serviceOf(options, defaults)
    super('nats', 'request server', service.address, options.logger)
    this.#service = service
    this.#port = options.port
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.#serving = new RequestServing<string>(
      this.core,
      {
        ...servingOptionsOf(options),
        // No intake gate: a broker's deliveries cannot be held at their source, so past the bound requests wait here as
        // their frames while those fit, and beyond that are refused and the minions retry.
      },
      (peer, reply) => this.#reply(peer, reply),
    )
    this.#reassembler = new Reassembler(
      this.core,
      {
        maxFrameBytes,
        maxPendingBytes: Math.max(options.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES, maxFrameBytes),
        idleTimeout: options.idleTimeout ?? DEFAULT_PEER_IDLE_TIMEOUT_MS,
        handshakeTimeout: options.handshakeTimeout ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
        frameTimeout: options.frameTimeout ?? DEFAULT_FRAME_TIMEOUT_MS,
      },
      // A broker hides the client's network address; its inbox (one per request client) is what per-address limits key on.
      (body, peer) => this.#serving.receive(body, peer, peer, peer),
    )
    this.#link = new NatsLink(this.core, service.broker, `brine request server ${service.address}`, undefined, { onConnect: () => {} })
  }

  handle(handler: RequestHandler): void {
    this.#serving.handle(handler, this.started)
  }

  protected open(): Promise<void> {
    // Synchronous, so a server without a handler stays unstarted and may be started once it has one.
    this.#serving.checkReady()
    return this.#bind()
  }

  async #bind(): Promise<void> {
    const port = await servicePort(this.#port)
    this.core.address = natsAddress(this.#service.broker, port)
    const subjects = subjectsOf(this.#service.broker, port)
    this.#subjects = subjects
    this.#from = { reply: `${subjects.base}.server.${this.#serverId}` }
    const connection = await this.#link.connectOnce()
    connection.subscribe(subjects.request, { queue: subjects.queue, callback: (_error, message) => this.#message(message) })
    await connection.flush()
    this.core.emit({ type: 'listening', address: this.address })
  }

  #message(message: Msg): void {
    const body = bytesOf(message.data)
    if (!this.#subjects!.isReplySubject(message.reply)) {
      const peer = message.reply ?? 'a peer without a reply subject'
      this.core.frameDropped(peer, `malformed request from ${peer}: its reply subject is not one of ${this.#subjects!.replyPrefix}*`, body.length)
      return
    }
    this.#reassembler.receive(body, message.reply)
  }

  #reply(peer: string, reply: Buffer): void {
    const connection = this.#link.current
    if (connection === undefined || connection.isClosed()) return
    this.#messageId = (this.#messageId + 1) >>> 0
    const from = this.#from
    publishChunked((data) => connection.publish(peer, data, from), reply, this.#link.maxPayload, this.#messageId)
  }

  protected liveStats(): LiveStats {
    return { queued: this.#serving.waiting, inFlight: this.#serving.running, peers: this.#link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    this.#serving.close()
    this.#reassembler.close()
    await this.#link.close()
  }
}
