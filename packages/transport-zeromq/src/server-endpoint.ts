import {
  ClosedError,
  DEFAULT_HWM,
  DEFAULT_MAX_FRAME_BYTES,
  EndpointCore,
  InvalidOperationError,
  type EndpointOptions,
  type EndpointStats,
  type TransportEvent,
} from '@brine/transport'
import type { Router, XPublisher } from 'zeromq'
import { mapNativeError } from './map-native-error.js'
import { SendQueue } from './send-queue.js'
import { ServerPeers, closeSocket, formatEndpoint, isIPv6 } from './socket-util.js'

type ServerSocket = XPublisher | Router

/**
 * What both ZeroMQ servers share: bind (port 0 → an ephemeral port, read back from
 * lastEndpoint), peer tracking, a send queue, one receive loop, and a close that releases the port.
 */
export abstract class ZeroMQServer<S extends ServerSocket> implements AsyncDisposable {
  protected readonly core: EndpointCore
  protected readonly host: string
  protected readonly port: number
  protected readonly maxFrameBytes: number
  protected readonly hwm: number
  protected readonly peers: ServerPeers
  protected socket: S | undefined
  protected queue: SendQueue | undefined
  private boundAddress: string
  private starting: Promise<void> | undefined
  private closing: Promise<void> | undefined
  private loop: Promise<void> | undefined

  protected constructor(
    protected readonly what: string,
    role: string,
    options: EndpointOptions,
  ) {
    this.host = options.host
    this.port = options.port
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.boundAddress = formatEndpoint(this.host, this.port)
    this.core = new EndpointCore('zeromq', role, this.boundAddress, options.logger?.child(`zeromq:${role}`))
    this.peers = new ServerPeers(this.core)
  }

  /** `tcp://host:port`; after start() with port 0, the port actually bound. */
  get address(): string {
    return this.boundAddress
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  /** The socket, configured (linger 0, hwm, ipv6 for bracketed hosts) but not bound. */
  protected abstract createSocket(): S

  /** Reads the socket until it closes; must never throw because of a peer's input. */
  protected abstract receiveLoop(socket: S): Promise<void>

  protected abstract extraStats(): Pick<EndpointStats, 'inFlight'>

  protected closedError(): ClosedError {
    return new ClosedError(this.what, this.boundAddress)
  }

  protected mapError(error: unknown): Error {
    return mapNativeError(error, { what: this.what, address: this.boundAddress, closing: this.core.isClosed })
  }

  start(): Promise<void> {
    if (this.core.isClosed) return Promise.reject(this.closedError())
    if (this.starting !== undefined) return Promise.reject(new InvalidOperationError(`${this.what} ${this.address} is already started`))
    try {
      this.beforeStart()
    } catch (error) {
      return Promise.reject(error)
    }
    this.starting = this.bind()
    return this.starting
  }

  protected get started(): boolean {
    return this.starting !== undefined
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
      throw mapNativeError(error, { what: this.what, address: this.boundAddress, hostPort: `${this.host}:${this.port}`, closing: this.core.isClosed })
    }
    this.boundAddress = socket.lastEndpoint ?? this.boundAddress
    this.queue = new SendQueue(socket, (error) => this.mapError(error), () => this.closedError())
    this.core.emit({ type: 'listening', address: this.boundAddress })
    this.core.logger.debug(`${this.what} listening on ${this.boundAddress}`)
    this.loop = this.receiveLoop(socket).catch((error: unknown) => {
      this.core.logger.error(`${this.what} ${this.boundAddress}: receive loop stopped`, error)
    })
  }

  /** A hook for checks that must pass before binding (the request server's handler). */
  protected beforeStart(): void {}

  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    this.core.markClosed()
    await this.starting?.catch(() => {})
    this.queue?.close()
    if (this.socket !== undefined) await closeSocket(this.socket, true)
    await this.loop
    this.peers.count = 0
    this.core.finishClose()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    return {
      queued: this.queue?.size ?? 0,
      ...this.core.counters,
      peers: this.peers.count,
      ...this.extraStats(),
    }
  }
}
