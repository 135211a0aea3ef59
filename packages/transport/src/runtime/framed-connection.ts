import type { Socket } from 'node:net'
import { BoundedQueue } from './bounded-queue.js'
import type { FrameTooLargeError } from '../contract/errors.js'
import { FrameReader } from './frame-reader.js'

export interface FramedConnectionHandlers {
  /** One whole frame body; it may be a view into a chunk, so copy it to keep it past the call. */
  onFrame(body: Buffer, connection: FramedConnection): void
  /** A frame declared larger than maxFrameBytes; its body is being skipped. */
  onOversize(error: FrameTooLargeError, connection: FramedConnection): void
  /** The socket has closed; `reason` is the socket error's message when there was one. */
  onClose(connection: FramedConnection, reason: string | undefined): void
}

export interface FramedConnectionOptions {
  maxFrameBytes: number
  /** Outgoing frames held while the socket is not draining, before new ones are refused. */
  hwm: number
  /** `host:port` of the other end; derived from the socket when absent. */
  peer?: string
  /**
   * Gather the frames written in one turn of the event loop and hand them to the socket together
   * (one writev) just after it. For a writer that sends many small frames to one peer, such as the
   * event bus; a request/reply link gains nothing from it.
   */
  coalesce?: boolean
}

/** `host:port` of a socket's remote end, with IPv6 hosts in brackets. */
export function peerOf(socket: Socket): string {
  const host = socket.remoteAddress ?? 'unknown'
  return `${host.includes(':') ? `[${host}]` : host}:${socket.remotePort ?? 0}`
}

/**
 * One framed stream socket (TCP or a unix socket), shared by the TCP transport and the event bus: incoming bytes go through a FrameReader (so an
 * oversized frame is skipped, never buffered), and outgoing frames honour socket.write()'s
 * backpressure. While the socket is not draining, frames wait in a BoundedQueue of `hwm`; past
 * the mark they are refused, so a peer that stops reading cannot grow our memory.
 */
export class FramedConnection {
  readonly peer: string
  private readonly reader: FrameReader
  private readonly outgoing: BoundedQueue<Buffer>
  private readonly hwm: number
  private readonly coalesce: boolean
  /** Frames written this turn, when coalescing. */
  private batch: Buffer[] = []
  private blocked = false
  private error: string | undefined
  private isClosed = false
  /** Resolves once the socket has closed. */
  readonly closed: Promise<void>

  constructor(
    readonly socket: Socket,
    options: FramedConnectionOptions,
    private readonly handlers: FramedConnectionHandlers,
  ) {
    this.peer = options.peer ?? peerOf(socket)
    this.outgoing = new BoundedQueue<Buffer>(options.hwm)
    this.hwm = options.hwm
    this.coalesce = options.coalesce === true
    this.reader = new FrameReader(
      {
        onFrame: (body) => this.handlers.onFrame(body, this),
        onOversize: (error) => this.handlers.onOversize(error, this),
      },
      options.maxFrameBytes,
      this.peer,
    )
    socket.setNoDelay(true)
    // Keepalive probes find a peer that vanished without a FIN (a minion behind a NAT that forgot it).
    socket.setKeepAlive(true, 60_000)
    socket.on('data', (chunk: Buffer) => {
      if (!this.isClosed) this.reader.push(chunk)
    })
    socket.on('drain', () => this.flush())
    // ECONNRESET, EPIPE and the like are ordinary ends of a link: remember why, never throw.
    socket.on('error', (error: Error) => {
      this.error ??= error.message
    })
    this.closed = new Promise((resolve) => {
      socket.once('close', () => {
        this.isClosed = true
        this.outgoing.drain()
        this.handlers.onClose(this, this.error)
        resolve()
      })
    })
  }

  get isOpen(): boolean {
    return !this.isClosed && !this.socket.destroyed
  }

  /** Frames waiting for the socket to drain. */
  get queued(): number {
    return this.outgoing.size
  }

  /**
   * Sends one already-framed message. Returns false when it was refused because the outgoing
   * queue is at its high-water mark (or the link is gone); the caller counts the drop.
   */
  write(data: Buffer): boolean {
    if (!this.isOpen) return false
    if (this.blocked) return this.outgoing.push(data)
    if (this.coalesce) {
      if (this.batch.length >= this.hwm) return false
      if (this.batch.push(data) === 1) setImmediate(this.writeBatch)
      return true
    }
    if (!this.socket.write(data)) this.blocked = true
    return true
  }

  private readonly writeBatch = (): void => {
    const batch = this.batch
    this.batch = []
    if (!this.isOpen) return
    this.socket.cork()
    for (const data of batch) this.socket.write(data)
    this.socket.uncork()
    if (this.socket.writableNeedDrain) this.blocked = true
  }

  private flush(): void {
    this.blocked = false
    while (this.outgoing.size > 0 && this.isOpen) {
      const next = this.outgoing.shift()!
      if (!this.socket.write(next)) {
        this.blocked = true
        return
      }
    }
  }

  /** Destroys the socket; resolves once it has closed. */
  close(): Promise<void> {
    this.socket.destroy()
    return this.closed
  }
}
