import { createServer, type Server, type Socket } from 'node:net'
import { AddressInUseError, FramedConnection as Connection, TransportError, type EndpointCore } from '@brine/transport'

export interface ListenerOptions {
  host: string
  port: number
  maxFrameBytes: number
  hwm: number
}

export interface ListenerHandlers {
  onFrame(body: Buffer, connection: Connection): void
  onDisconnect?(connection: Connection): void
}

/**
 * A server's bound socket and its accepted connections, shared by both server roles: binds
 * host:port (port 0 takes a free one, and the endpoint's address then names it), emits
 * `listening`, `peer-connect` and `peer-disconnect`, skips and counts frames over maxFrameBytes,
 * and on close destroys every connection and releases the port so it can be bound again at once.
 */
export class Listener {
  readonly connections = new Set<Connection>()
  private server: Server | undefined
  private binding: Promise<void> | undefined

  constructor(
    private readonly core: EndpointCore,
    private readonly options: ListenerOptions,
    private readonly handlers: ListenerHandlers,
  ) {}

  /** Frames waiting for their sockets to drain, over every connection. */
  get queued(): number {
    let queued = 0
    for (const connection of this.connections) queued += connection.queued
    return queued
  }

  async start(): Promise<void> {
    const server = createServer((socket) => this.accept(socket))
    this.server = server
    const where = `${this.options.host}:${this.options.port}`
    const binding = new Promise<void>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException): void => {
        reject(
          error.code === 'EADDRINUSE'
            ? new AddressInUseError(where, { cause: error })
            : new TransportError(`${this.core.what} could not bind ${where}: ${error.message}`, { address: where }, { cause: error }),
        )
      }
      server.once('error', onError)
      server.listen({ host: this.options.host, port: this.options.port }, () => {
        server.off('error', onError)
        resolve()
      })
    })
    this.binding = binding
    try {
      await binding
    } catch (error) {
      this.server = undefined
      throw error
    }
    // A bound server's later errors (EMFILE on accept, …) must not kill the daemon: log them.
    server.on('error', (error) => this.core.logger.error(`${this.core.what} ${this.core.address}: ${error.message}`))
    // close() ran while we were binding; it waits for the bind, then releases the port.
    if (this.core.isClosed) throw this.core.closedError()
    const bound = server.address()
    if (bound !== null && typeof bound === 'object') this.core.address = `tcp://${this.options.host}:${bound.port}`
    this.core.emit({ type: 'listening', address: this.core.address })
  }

  private accept(socket: Socket): void {
    if (this.core.isClosed) {
      socket.destroy()
      return
    }
    const connection = new Connection(
      socket,
      { maxFrameBytes: this.options.maxFrameBytes, hwm: this.options.hwm },
      {
        onFrame: (body, conn) => this.handlers.onFrame(body, conn),
        onOversize: (error, conn) => this.core.frameDropped(conn.peer, error.message, error.size),
        onClose: (conn, reason) => {
          this.connections.delete(conn)
          this.core.emit({ type: 'peer-disconnect', peer: conn.peer, ...(reason === undefined ? {} : { reason }) })
          this.handlers.onDisconnect?.(conn)
        },
      },
    )
    this.connections.add(connection)
    this.core.emit({ type: 'peer-connect', peer: connection.peer })
  }

  /** Stops accepting, destroys every connection, and resolves once the port is released. */
  async close(): Promise<void> {
    await this.binding?.catch(() => {})
    const server = this.server
    if (server === undefined) return
    const released = new Promise<void>((resolve) => server.close(() => resolve()))
    await Promise.all([...this.connections].map((connection) => connection.close()))
    await released
  }
}
