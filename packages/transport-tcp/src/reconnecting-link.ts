import { connect } from 'node:net'
import { FramedConnection as Connection, type EndpointCore } from '@brine/transport'
import { backoffDelay, type BackoffOptions } from '@brine/core'

export interface LinkOptions {
  host: string
  port: number
  /** A unix socket to connect to instead of host:port. */
  path?: string
  maxFrameBytes: number
  hwm: number
  reconnect?: BackoffOptions
}

export interface LinkHandlers {
  /** A connection was established (first time or again); write any hello or queued work here. */
  onConnect(connection: Connection): void
  onFrame(body: Buffer, connection: Connection): void
}

/** An endpoint's address: `tcp://host:port`, or `ipc://path` for a unix socket. */
export function tcpAddress(options: { host: string; port: number; path?: string }): string {
  return options.path === undefined ? `tcp://${options.host}:${options.port}` : `ipc://${options.path}`
}

/**
 * A client's one connection to a server, kept up in the background: a lost or refused connection
 * is retried after `backoffDelay(attempt, reconnect)`, with a `reconnect-attempt` event before
 * each try, `peer-connect` / `peer-disconnect` around each established link, and
 * `stats().reconnects` counting the successful reconnections after the first connect. A frame
 * over maxFrameBytes is skipped and counted as a frame drop; the connection stays.
 */
export class ReconnectingLink {
  /** The established connection, if any. */
  current: Connection | undefined
  private pending: Connection | undefined
  private attempt = 0
  private everConnected = false
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  readonly peer: string

  constructor(
    private readonly core: EndpointCore,
    private readonly options: LinkOptions,
    private readonly handlers: LinkHandlers,
  ) {
    this.peer = options.path ?? `${options.host.includes(':') ? `[${options.host}]` : options.host}:${options.port}`
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
    let established = false
    const connection = new Connection(
      socket,
      { maxFrameBytes: this.options.maxFrameBytes, hwm: this.options.hwm, peer: this.peer },
      {
        onFrame: (body, conn) => this.handlers.onFrame(body, conn),
        onOversize: (error, conn) => this.core.frameDropped(conn.peer, error.message, error.size),
        onClose: (conn, reason) => {
          if (this.pending === conn) this.pending = undefined
          if (established) {
            this.current = undefined
            this.core.emit({ type: 'peer-disconnect', peer: this.peer, ...(reason === undefined ? {} : { reason }) })
          }
          this.scheduleReconnect()
        },
      },
    )
    this.pending = connection
    socket.once('connect', () => {
      if (this.stopped) return
      established = true
      this.pending = undefined
      this.current = connection
      this.attempt = 0
      if (this.everConnected) this.core.counters.reconnects++
      this.everConnected = true
      this.core.emit({ type: 'peer-connect', peer: this.peer })
      this.handlers.onConnect(connection)
    })
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
    const open = [this.current, this.pending].filter((conn): conn is Connection => conn !== undefined)
    await Promise.all(open.map((conn) => conn.close()))
  }
}
