import {
  DEFAULT_HWM,
  EndpointBase,
  Listener,
  RequestServing,
  servingOptionsOf,
  hostOf,
  type FramedConnection as Connection,
  type LiveStats,
  type RequestHandler,
  type RequestServer,
  type RequestServerOptions,
  tcpAddress,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES, frame } from '@brine/core'

/**
 * Master side of the request link: binds the ret port and hands every frame to the shared
 * RequestServing loop (envelope checks, bounded handler concurrency and backlog, error replies).
 * This class only moves frames: a reply is framed and written to the connection its request came
 * on; a peer that has gone gets nothing. The runtime's Listener admits connections (per-address and
 * total caps, the incomplete-frame budget, the idle timeout) before any of that.
 */
export class TcpRequestServer extends EndpointBase implements RequestServer {
  readonly #listener: Listener
  readonly #serving: RequestServing<Connection>

  constructor(options: RequestServerOptions) {
    super('tcp', 'request server', tcpAddress(options), options.logger)
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.#serving = new RequestServing<Connection>(
      this.core,
      {
        ...servingOptionsOf(options),
        intake: { pause: () => this.#listener.holdReading(), resume: () => this.#listener.resumeReading() },
        authenticated: (connection) => this.#listener.authenticated(connection),
      },
      (connection, reply) => this.#reply(connection, reply),
    )
    this.#listener = new Listener(
      this.core,
      { ...options, maxFrameBytes, hwm: options.hwm ?? DEFAULT_HWM, authenticates: true },
      { onFrame: (body, connection) => this.#serving.receive(body, connection, connection.peer, hostOf(connection.peer)) },
    )
  }

  handle(handler: RequestHandler): void {
    this.#serving.handle(handler, this.started)
  }

  protected open(): Promise<void> {
    this.#serving.checkReady()
    return this.#listener.start()
  }

  #reply(connection: Connection, reply: Buffer): void {
    if (!connection.isOpen) return
    if (!connection.write(frame(reply))) this.core.messageDropped(connection.peer, `reply queue for ${connection.peer} is full; reply dropped`)
  }

  protected liveStats(): LiveStats {
    return { queued: this.#listener.queued + this.#serving.waiting, inFlight: this.#serving.running, peers: this.#listener.connections.size }
  }

  protected async release(): Promise<void> {
    this.#serving.close()
    await this.#listener.close()
  }
}
