import { DEFAULT_HWM, DEFAULT_MAX_FRAME_BYTES, EndpointBase, type EndpointOptions, type LiveStats } from '@brine/transport'
import type { Router, XPublisher } from 'zeromq'
import { mapNativeError } from './map-native-error.js'
import { SendQueue } from './send-queue.js'
import { ServerPeers, closeSocket, formatEndpoint, isIPv6 } from './socket-util.js'

type ServerSocket = XPublisher | Router

/**
 * What both ZeroMQ servers share: bind (port 0 → an ephemeral port, read back from
 * lastEndpoint), peer tracking, a send queue, one receive loop, and a close that releases the
 * port. The lifecycle itself (start once, idempotent close, events, stats) is the runtime's EndpointBase.
 */
export abstract class ZeroMQServer<S extends ServerSocket> extends EndpointBase {
  protected readonly host: string
  protected readonly port: number
  protected readonly maxFrameBytes: number
  protected readonly hwm: number
  protected readonly peers: ServerPeers
  protected socket: S | undefined
  protected queue: SendQueue | undefined
  private loop: Promise<void> | undefined

  protected constructor(role: string, options: EndpointOptions) {
    super('zeromq', role, formatEndpoint(options.host, options.port), options.logger)
    this.host = options.host
    this.port = options.port
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.peers = new ServerPeers(this.core)
  }

  /** The socket, configured (linger 0, hwm) but not bound. */
  protected abstract createSocket(): S

  /** Reads the socket until it closes; must never throw because of a peer's input. */
  protected abstract receiveLoop(socket: S): Promise<void>

  /** Requests being handled (the request server) and waiting beyond the send queue. */
  protected abstract serverStats(): Pick<LiveStats, 'inFlight'> & { waiting: number }

  protected mapError(error: unknown): Error {
    return mapNativeError(error, { what: this.core.what, address: this.address, closing: this.core.isClosed })
  }

  /** A hook for checks that must pass before binding (the request server's handler); throws synchronously. */
  protected beforeStart(): void {}

  protected open(): Promise<void> {
    this.beforeStart()
    return this.bind()
  }

  private async bind(): Promise<void> {
    const socket = this.createSocket()
    if (isIPv6(this.host)) socket.ipv6 = true
    this.socket = socket
    this.peers.attach(socket)
    const endpoint = formatEndpoint(this.host, this.port === 0 ? '*' : this.port)
    try {
      await socket.bind(endpoint)
    } catch (error) {
      await closeSocket(socket, true)
      throw mapNativeError(error, { what: this.core.what, address: this.address, hostPort: `${this.host}:${this.port}`, closing: this.core.isClosed })
    }
    this.core.address = socket.lastEndpoint ?? this.address
    this.queue = new SendQueue(socket, (error) => this.mapError(error), () => this.core.closedError())
    this.core.emit({ type: 'listening', address: this.address })
    this.core.logger.debug(`${this.core.what} listening on ${this.address}`)
    this.loop = this.receiveLoop(socket).catch((error: unknown) => {
      this.core.logger.error(`${this.core.what} ${this.address}: receive loop stopped`, error)
    })
  }

  protected async release(): Promise<void> {
    this.queue?.close()
    if (this.socket !== undefined) await closeSocket(this.socket, true)
    await this.loop
    this.peers.count = 0
  }

  protected liveStats(): LiveStats {
    const { inFlight, waiting } = this.serverStats()
    return { queued: (this.queue?.size ?? 0) + waiting, inFlight, peers: this.peers.count }
  }
}
