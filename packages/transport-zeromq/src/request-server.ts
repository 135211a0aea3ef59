import {
  DEFAULT_HWM,
  EndpointBase,
  Listener,
  RequestServing,
  servingOptionsOf,
  hostOf,
  type FramedConnection,
  type LiveStats,
  type RequestHandler,
  type RequestServer,
  type RequestServerOptions,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES } from '@brine/core'
import { endpointOf, formatEndpoint } from './socket-util.js'
import { frameHeader } from './zmtp.js'
import { ZmtpSession } from './zmtp-session.js'

/**
 * Master side of the request link: a ZMTP 3.0 ROUTER bound to `ret_port`, spoken by Brine itself
 * over the runtime's Listener (so the connection caps, the incomplete-frame budget and the idle
 * timeout apply before any work), for libzmq Dealers to connect to. Each message is one envelope
 * frame; it goes to the shared RequestServing loop (envelope checks, entry and depth bounds before
 * decoding, bounded handler concurrency and backlog, error replies) and each reply is written back
 * to the connection it came on, the peer named by its routing id. Whatever a peer sends, the loop
 * carries on.
 */
export class ZeroMQRequestServer extends EndpointBase implements RequestServer {
  readonly #listener: Listener
  readonly #serving: RequestServing<ZmtpSession>
  readonly #sessions = new Map<FramedConnection, ZmtpSession>()

  constructor(options: RequestServerOptions) {
    super('zeromq', 'request server', endpointOf(options), options.logger)
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.#serving = new RequestServing<ZmtpSession>(
      this.core,
      {
        ...servingOptionsOf(options),
        intake: { pause: () => this.#listener.holdReading(), resume: () => this.#listener.resumeReading() },
        authenticated: (session) => this.#listener.authenticated(session.connection),
      },
      (session, reply) => this.#reply(session, reply),
    )
    this.#listener = new Listener(
      this.core,
      {
        ...options,
        maxFrameBytes,
        hwm: options.hwm ?? DEFAULT_HWM,
        formatAddress: formatEndpoint,
        authenticates: true,
        // libzmq peers wake two threads per segment received: replies released together go out together.
        coalesce: true,
        reader: (connection) => {
          const session = new ZmtpSession(
            connection,
            'ROUTER',
            ['DEALER'],
            {
              onMessage: (parts, from) => this.#accept(parts, from),
              onOversize: (size, reason, from) => this.core.frameDropped(from.routingId, reason, size),
            },
            maxFrameBytes,
          )
          this.#sessions.set(connection, session)
          return session.reader
        },
      },
      {
        onConnect: (connection) => this.#sessions.get(connection)?.greet(),
        onDisconnect: (connection) => this.#sessions.delete(connection),
      },
    )
  }

  handle(handler: RequestHandler): void {
    this.#serving.handle(handler, this.started)
  }

  protected open(): Promise<void> {
    this.#serving.checkReady()
    return this.#listener.start()
  }

  /** One incoming message: exactly one envelope frame, else a frame drop. */
  #accept(parts: Buffer[], session: ZmtpSession): void {
    const [body] = parts
    if (body === undefined || parts.length !== 1) {
      let size = 0
      for (const part of parts) size += part.length
      this.core.frameDropped(session.routingId, `expected one frame per request, got ${parts.length}`, size)
      return
    }
    this.#serving.receive(body, session, session.routingId, hostOf(session.connection.peer))
  }

  #reply(session: ZmtpSession, reply: Buffer): void {
    const connection = session.connection
    if (!connection.isOpen) return
    if (!connection.write([frameHeader(reply.length, false), reply])) {
      this.core.messageDropped(session.routingId, `reply queue for ${session.routingId} (${connection.peer}) is full; reply dropped`)
    }
  }

  protected liveStats(): LiveStats {
    return { queued: this.#listener.queued + this.#serving.waiting, inFlight: this.#serving.running, peers: this.#listener.connections.size }
  }

  protected async release(): Promise<void> {
    this.#serving.close()
    await this.#listener.close()
    this.#sessions.clear()
  }
}
