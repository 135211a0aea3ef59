import { connect } from 'node:net'
import { backoffDelay, type BackoffOptions, type StreamReader } from '@brine/core'
import type { EndpointCore } from './endpoint-core.js'
import { FramedConnection as Connection } from './framed-connection.js'

export interface LinkOptions {
  host: string
  port: number
  /** A unix socket to connect to instead of host:port. */
  path?: string
  maxFrameBytes: number
  hwm: number
  reconnect?: BackoffOptions
  /** How events and drops name the server (default `host:port`, or the path). */
  peer?: string
  /** Splits the incoming bytes instead of the 4-byte length prefix (ZeroMQ's ZMTP); frames then never reach onFrame. */
  reader?: (connection: Connection) => StreamReader
  /**
   * The link has a handshake: a connection counts as established only once the owner calls
   * {@link ReconnectingLink.established}, and one not established this many ms after its socket connected is
   * dropped and retried (a server that accepts and never greets, or a stranger at its address).
   */
  handshakeTimeout?: number
}

export interface LinkHandlers {
  /** The socket connected and the link has a handshake: write our half of it here. */
  onOpen?(connection: Connection): void
  /** A connection was established (first time or again); write any hello or queued work here. */
  onConnect(connection: Connection): void
  /** One length-prefixed frame (without a `reader`). */
  onFrame?(body: Buffer, connection: Connection): void
}

/** An endpoint's address: `tcp://host:port`, or `ipc://path` for a unix socket. */
export function tcpAddress(options: { host: string; port: number; path?: string }): string {
  return options.path === undefined ? `tcp://${options.host}:${options.port}` : `ipc://${options.path}`
}

/**
 * A client's one connection to a server, kept up in the background, for both socket transports: a lost or refused
 * connection (or, with a handshake, one not established in time) is retried after `backoffDelay(attempt,
 * reconnect)`, with a `reconnect-attempt` event before each try, `peer-connect` / `peer-disconnect` around each
 * established link, and `stats().reconnects` counting the successful reconnections after the first connect. A
 * frame over maxFrameBytes is skipped and counted as a frame drop; the connection stays.
 */
export class ReconnectingLink {
  /** The established connection, if any. */
  current: Connection | undefined
  private pending: Connection | undefined
  private attempt = 0
  private everConnected = false
  private timer: NodeJS.Timeout | undefined
  /** The pending connection's handshake deadline, with a handshake. */
  private handshakeTimer: NodeJS.Timeout | undefined
  private stopped = false
  readonly peer: string

  constructor(
    private readonly core: EndpointCore,
    private readonly options: LinkOptions,
    private readonly handlers: LinkHandlers,
  ) {
    this.peer = options.peer ?? options.path ?? `${options.host.includes(':') ? `[${options.host}]` : options.host}:${options.port}`
  }

  get isConnected(): boolean {
    return this.current !== undefined
  }

  start(): void {
    this.open()
  }

  private open(): void {
    this.timer = undefined
    if (this.stopped) return
    const { host, port, path } = this.options
    const socket = path === undefined ? connect({ host, port }) : connect({ path })
    const connection = new Connection(
      socket,
      {
        maxFrameBytes: this.options.maxFrameBytes,
        hwm: this.options.hwm,
        peer: this.peer,
        ...(this.options.reader === undefined ? {} : { reader: this.options.reader }),
      },
      {
        onFrame: (body, conn) => this.handlers.onFrame?.(body, conn),
        onOversize: (error, conn) => this.core.frameDropped(conn.peer, error.message, error.size),
        onClose: (conn, reason) => this.closed(conn, reason),
      },
    )
    this.pending = connection
    socket.once('connect', () => {
      if (this.stopped) return
      if (this.options.handshakeTimeout === undefined) {
        this.established(connection)
        return
      }
      this.handshakeTimer = setTimeout(() => {
        if (this.pending === connection) connection.drop(`no handshake from the server within ${this.options.handshakeTimeout} ms (handshake_timeout)`)
      }, this.options.handshakeTimeout)
      this.handlers.onOpen?.(connection)
    })
  }

  /** The connection is up (its socket connected, or the owner's handshake over it completed). */
  established(connection: Connection): void {
    if (this.stopped || this.pending !== connection || !connection.isOpen) return
    clearTimeout(this.handshakeTimer)
    this.pending = undefined
    this.current = connection
    this.attempt = 0
    if (this.everConnected) this.core.counters.reconnects++
    this.everConnected = true
    this.core.emit({ type: 'peer-connect', peer: this.peer })
    this.handlers.onConnect(connection)
  }

  private closed(connection: Connection, reason: string | undefined): void {
    if (this.pending === connection) {
      this.pending = undefined
      clearTimeout(this.handshakeTimer)
    }
    if (this.current === connection) {
      this.current = undefined
      this.core.emit({ type: 'peer-disconnect', peer: this.peer, ...(reason === undefined ? {} : { reason }) })
    }
    this.scheduleReconnect()
  }

  /**
   * The server is known to be back: if an attempt is waiting for its turn, make it now. The attempt count
   * stays, so a server that is not back after all keeps the backoff where it was.
   */
  reconnectNow(): void {
    if (this.stopped || this.timer === undefined) return
    clearTimeout(this.timer)
    this.open()
  }

  private scheduleReconnect(): void {
    if (this.stopped) return
    this.attempt++
    const delay = backoffDelay(this.attempt, this.options.reconnect)
    this.core.emit({ type: 'reconnect-attempt', address: this.core.address, attempt: this.attempt, delay })
    this.timer = setTimeout(() => this.open(), delay)
  }

  /** Stops reconnecting and closes the connection; resolves once its socket has closed. */
  async close(): Promise<void> {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    clearTimeout(this.handshakeTimer)
    const open = [this.current, this.pending].filter((conn): conn is Connection => conn !== undefined)
    await Promise.all(open.map((conn) => conn.close()))
  }
}
