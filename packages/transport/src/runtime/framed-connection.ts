import type { Socket } from 'node:net'
import type { AdmittedPeer, PendingHolder } from './admission.js'
import { BoundedQueue, type FrameTooLargeError, FrameReader, type StreamReader, TransportError } from '@brine/core'

export interface FramedConnectionHandlers {
  /** One whole frame body; it may be a view into a chunk, so copy it to keep it past the call. */
  onFrame(body: Buffer, connection: FramedConnection): void
  /** A frame declared larger than maxFrameBytes; its body is being skipped. */
  onOversize(error: FrameTooLargeError, connection: FramedConnection): void
  /** The socket has closed; `reason` is the socket error's message (or why we dropped it) when there was one. */
  onClose(connection: FramedConnection, reason: string | undefined): void
  /** {@link FramedConnection.drop} is closing the connection for what the peer did (before onClose). */
  onDrop?(connection: FramedConnection, reason: string): void
  /**
   * A {@link FramedConnection.write} was refused (the queue was full) and the connection takes writes again:
   * its queue has drained, or its coalesced batch went out without filling the socket. A writer that drops
   * frames past the mark (the event bus) tells its peer here what it dropped, without waiting for its next frame.
   */
  onWritable?(connection: FramedConnection): void
}

/** Where a server's connection reports the bytes of its incomplete frame (the process's admission). */
export interface PendingBudget {
  hold(holder: PendingHolder, bytes: number): void
  release(holder: PendingHolder): void
  /** The connection completed its first frame (its greeting). */
  greeted?(connection: FramedConnection): void
}

export interface FramedConnectionOptions {
  maxFrameBytes: number
  /** Outgoing frames held while the socket is not draining, before new ones are refused. */
  hwm: number
  /**
   * Outgoing bytes held while the socket is not draining, before new frames are refused (default: no
   * bound but `hwm`): those queued, each with {@link QUEUED_MESSAGE_COST}, and those the socket took and has not sent. An empty queue takes one frame of any size, so a frame larger than the bound
   * (a 64 MiB return on the event bus) still reaches a reader that keeps up.
   */
  maxQueuedBytes?: number
  /** `host:port` of the other end; derived from the socket when absent. */
  peer?: string
  /**
   * Gather the frames written together (in one synchronous stretch, until the microtasks already queued
   * have run) and hand them to the socket as one writev in a microtask just after. For a writer that
   * sends many small frames to one peer, such as the event bus (a job cache batch's return events, fired
   * in one loop), and for a peer that pays for each segment it receives (a libzmq socket wakes its I/O
   * thread and then its caller's thread for every one: the ZeroMQ servers coalesce a publish's fan-out and
   * the replies released together). Not later: the rest of the task (the publishing request's reply, say)
   * or, with a `setImmediate`, the rest of the loop's turn would hold the frames back, and a job at N=1
   * waited on its publish that long.
   */
  coalesce?: boolean
  /**
   * Splits the incoming bytes into frames instead of the 4-byte length prefix (ZeroMQ's ZMTP). The
   * reader reports each completed frame or message with {@link FramedConnection.frameDone}.
   */
  reader?: (connection: FramedConnection) => StreamReader
  /** A server's connection: the bytes of its incomplete frame count against this budget. */
  budget?: PendingBudget
}

/** A frame in progress must grow by this much, or complete, within the idle timeout. */
export const PROGRESS_BYTES = 64 * 1024

/** One outgoing message: a frame, or the parts of one written together. */
export type Outgoing = Buffer | readonly Buffer[]

/**
 * What a queued message costs beyond its bytes: its Buffer object (about 100 bytes of V8 heap each) and
 * its queue slot. A queue of many small frames (the event bus's, behind a stalled reader) held half again
 * its counted bytes before this was counted.
 */
export const QUEUED_MESSAGE_COST = 128

/** The bytes a queued message holds: its parts' bytes and {@link QUEUED_MESSAGE_COST}. */
const sizeOf = (data: Outgoing): number => {
  if (Buffer.isBuffer(data)) return data.length + QUEUED_MESSAGE_COST
  let size = QUEUED_MESSAGE_COST
  for (const part of data as readonly Buffer[]) size += part.length
  return size
}

/** The native handle under a net.Socket, as far as reading goes (Node's own `_handle`; absent once closed). */
interface ReadingHandle {
  reading?: boolean
  readStart?: () => number
  readStop?: () => number
}

const handleOf = (socket: Socket): ReadingHandle | undefined => (socket as unknown as { _handle?: ReadingHandle | null })._handle ?? undefined

/**
 * Stops the socket's reads from the kernel now. `socket.pause()` alone stops only the stream's flow: the socket
 * goes on reading until its readable buffer holds its high-water mark (plus the read that crossed it), so a request
 * server holding many connections past its in-flight bound still took in that much more from each of them, which
 * the bound was meant to leave in the kernel and the peers. This is what `pause()` itself does for a socket made
 * with `onread`; {@link startHandleReads} undoes it.
 */
export function stopHandleReads(socket: Socket): void {
  const handle = handleOf(socket)
  if (socket.destroyed || handle?.reading !== true || typeof handle.readStop !== 'function') return
  handle.reading = false
  handle.readStop()
}

/**
 * Starts the socket's reads again after {@link stopHandleReads}. Needed besides `resume()`: the stream asks for
 * more (and its socket starts reading) only when no read of its own is pending, and one that was pending when the
 * reads stopped would wait forever.
 */
export function startHandleReads(socket: Socket): void {
  const handle = handleOf(socket)
  if (socket.destroyed || socket.connecting || handle === undefined || handle.reading === true || typeof handle.readStart !== 'function') return
  handle.reading = true
  const status = handle.readStart()
  if (status < 0) {
    const peer = peerOf(socket)
    socket.destroy(new TransportError(`connection from ${peer} could not read again (libuv status ${status})`, { peer }))
  }
}

/** The host of a `host:port` (or `[v6]:port`) peer name, as {@link peerOf} writes it. */
export function hostOf(peer: string): string {
  const colon = peer.lastIndexOf(':')
  const host = colon < 0 ? peer : peer.slice(0, colon)
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

/** `host:port` of a socket's remote end, with IPv6 hosts in brackets. */
export function peerOf(socket: Socket): string {
  const host = socket.remoteAddress ?? 'unknown'
  return `${host.includes(':') ? `[${host}]` : host}:${socket.remotePort ?? 0}`
}

/**
 * One framed stream socket (TCP or a unix socket), shared by both transports' servers, the TCP
 * clients and the event bus: incoming bytes go through a reader (the length-prefixed FrameReader,
 * or ZMTP's), so an oversized frame is skipped, never buffered; outgoing frames honour
 * socket.write()'s backpressure. While the socket is not draining, frames wait in a BoundedQueue of
 * `hwm` (and `maxQueuedBytes`); past the mark they are refused, so a peer that stops reading cannot
 * grow our memory. A server's connection also tracks its progress (for the idle timeout) and
 * reports the bytes of its incomplete frame to the process's budget.
 */
export class FramedConnection implements PendingHolder, AdmittedPeer {
  readonly peer: string
  private readonly reader: StreamReader
  private readonly outgoing: BoundedQueue<Outgoing>
  private readonly hwm: number
  private readonly maxQueuedBytes: number
  private readonly coalesce: boolean
  private readonly budget: PendingBudget | undefined
  /** Frames written since the last batch went out, when coalescing. */
  private batch: Outgoing[] = []
  private batchBytes = 0
  private queuedBytesNow = 0
  private blocked = false
  /** A write was refused since the connection last took writes again (see onWritable). */
  private refused = false
  private error: string | undefined
  private isClosed = false
  /** Whole frames (or ZMTP messages and the handshake) received so far. */
  framesReceived = 0
  /** Bytes received so far. */
  bytesReceived = 0
  /** When the connection was opened (ms), moved on by the time its reading was held ({@link holdReading}). */
  openedAt = Date.now()
  /** When the frame in progress (ZMTP: the handshake, or a message) received its first byte (ms); undefined between frames. */
  frameStartedAt: number | undefined
  /** When the connection last made progress: opened, completed a frame, or took PROGRESS_BYTES more of one (ms). */
  lastProgress = Date.now()
  /** When bytes of the frame in progress began to be held (ms); meaningful while `pendingBytes` > 0. */
  pendingSince = 0
  private progressBytes = 0
  private held = 0
  /** Resolves once the socket has closed. */
  readonly closed: Promise<void>

  constructor(
    readonly socket: Socket,
    options: FramedConnectionOptions,
    private readonly handlers: FramedConnectionHandlers,
  ) {
    this.peer = options.peer ?? peerOf(socket)
    this.outgoing = new BoundedQueue<Outgoing>(options.hwm)
    this.hwm = options.hwm
    this.maxQueuedBytes = options.maxQueuedBytes ?? Number.POSITIVE_INFINITY
    this.coalesce = options.coalesce === true
    this.budget = options.budget
    this.reader =
      options.reader?.(this) ??
      new FrameReader(
        {
          onFrame: (body) => {
            this.frameDone()
            this.handlers.onFrame(body, this)
          },
          onOversize: (error) => this.handlers.onOversize(error, this),
        },
        options.maxFrameBytes,
        this.peer,
      )
    socket.setNoDelay(true)
    // Keepalive probes find a peer that vanished without a FIN (a minion behind a NAT that forgot it).
    socket.setKeepAlive(true, 60_000)
    socket.on('data', (chunk: Buffer) => this.receive(chunk))
    socket.on('drain', () => this.flush())
    // ECONNRESET, EPIPE and the like are ordinary ends of a link: remember why, never throw.
    socket.on('error', (error: Error) => {
      this.error ??= error.message
    })
    this.closed = new Promise((resolve) => {
      socket.once('close', () => {
        this.isClosed = true
        this.releaseHeld()
        this.outgoing.drain()
        this.queuedBytesNow = 0
        this.handlers.onClose(this, this.error)
        resolve()
      })
    })
  }

  private receive(chunk: Buffer): void {
    if (this.isClosed) return
    this.bytesReceived += chunk.length
    this.progressBytes += chunk.length
    if (this.progressBytes >= PROGRESS_BYTES) {
      this.progressBytes = 0
      this.lastProgress = Date.now()
    }
    this.reader.push(chunk)
    // A frame begun in this chunk (after any it completed) is timed from now.
    if (!this.reader.inFrame) this.frameStartedAt = undefined
    else this.frameStartedAt ??= Date.now()
    if (this.budget !== undefined && !this.isClosed) {
      const pending = this.reader.pendingBytes
      if (pending !== this.held) {
        // A frame's bytes begin to be held: the rate it arrives at is measured from here.
        if (this.held === 0) this.pendingSince = Date.now()
        this.held = pending
        if (pending === 0) this.budget.release(this)
        else this.budget.hold(this, pending)
      }
    }
  }

  /** The reader completed a frame (or a ZMTP message, or the handshake): the connection made progress. */
  frameDone(): void {
    if (this.framesReceived === 0) this.budget?.greeted?.(this)
    this.frameStartedAt = undefined
    this.framesReceived++
    this.progressBytes = 0
    this.lastProgress = Date.now()
  }

  get isOpen(): boolean {
    return !this.isClosed && !this.socket.destroyed
  }

  /**
   * Stops reading the socket (its server holds all the requests it will take): the peer's bytes wait in the
   * kernel's buffers and then in the peer. Resumed with `heldFor`, the ms it was held: its deadlines move on by
   * as much, since the peer could make no progress meanwhile.
   */
  holdReading(held: boolean, heldFor = 0): void {
    if (this.isClosed) return
    if (held) {
      this.socket.pause()
      stopHandleReads(this.socket)
      return
    }
    this.openedAt += heldFor
    this.lastProgress += heldFor
    if (this.frameStartedAt !== undefined) this.frameStartedAt += heldFor
    this.socket.resume()
    startHandleReads(this.socket)
  }

  /** True while a frame has begun and not ended. */
  get inFrame(): boolean {
    return this.reader.inFrame
  }

  /** Bytes of the incomplete frame held now. */
  get pendingBytes(): number {
    return this.reader.pendingBytes
  }

  /** Frames waiting for the socket to drain. */
  get queued(): number {
    return this.outgoing.size
  }

  /** Bytes waiting for the socket to drain (or for the batch being gathered), each message counted with {@link QUEUED_MESSAGE_COST}. */
  get queuedBytes(): number {
    return this.queuedBytesNow + this.batchBytes
  }

  /**
   * Sends one already-framed message (or its parts, written together). Returns false when it was
   * refused because the outgoing queue is at its high-water mark or byte bound (or the link is
   * gone); the caller counts the drop.
   */
  write(data: Outgoing): boolean {
    if (!this.isOpen) return false
    if (this.blocked) {
      const size = sizeOf(data)
      // What the socket took and has not sent yet (a whole coalesced batch, say) counts too.
      if (this.queuedBytes > 0 && this.queuedBytes + this.socket.writableLength + size > this.maxQueuedBytes) return this.refuse()
      if (!this.outgoing.push(data)) return this.refuse()
      this.queuedBytesNow += size
      return true
    }
    if (this.coalesce) {
      const size = sizeOf(data)
      if (this.batch.length >= this.hwm || (this.batchBytes > 0 && this.batchBytes + this.socket.writableLength + size > this.maxQueuedBytes))
        return this.refuse()
      this.batchBytes += size
      if (this.batch.push(data) === 1) queueMicrotask(this.writeBatch)
      return true
    }
    if (!this.send(data)) this.blocked = true
    return true
  }

  private refuse(): false {
    this.refused = true
    return false
  }

  /** Tells the owner, once per stretch of refusals, that writes are taken again. */
  private writable(): void {
    if (!this.refused || this.blocked || !this.isOpen) return
    this.refused = false
    this.handlers.onWritable?.(this)
  }

  /** Writes one message's parts under one cork (one writev); false when the socket wants a drain. */
  private send(data: Outgoing): boolean {
    if (Buffer.isBuffer(data)) return this.socket.write(data)
    const parts = data as readonly Buffer[]
    if (parts.length === 1) return this.socket.write(parts[0]!)
    this.socket.cork()
    let ok = true
    for (const part of parts) ok = this.socket.write(part) && ok
    this.socket.uncork()
    return ok && !this.socket.writableNeedDrain
  }

  private readonly writeBatch = (): void => {
    const batch = this.batch
    this.batch = []
    this.batchBytes = 0
    if (!this.isOpen) return
    this.socket.cork()
    for (const data of batch) this.send(data)
    this.socket.uncork()
    if (this.socket.writableNeedDrain) this.blocked = true
    this.writable()
  }

  private flush(): void {
    this.blocked = false
    while (this.outgoing.size > 0 && this.isOpen) {
      const next = this.outgoing.shift()!
      this.queuedBytesNow -= sizeOf(next)
      if (!this.send(next)) {
        this.blocked = true
        return
      }
    }
    this.writable()
  }

  private releaseHeld(): void {
    if (this.budget !== undefined && this.held !== 0) this.budget.release(this)
    this.held = 0
  }

  /**
   * Closes the connection now for what the peer did: its bytes stop counting at once (the budget
   * relies on it), nothing more is read, and `onClose` reports `reason`.
   */
  drop(reason: string): void {
    if (this.isClosed) return
    this.error = reason
    this.isClosed = true
    this.reader.stop()
    this.releaseHeld()
    this.handlers.onDrop?.(this, reason)
    this.socket.destroy()
  }

  /** Destroys the socket; resolves once it has closed. */
  close(): Promise<void> {
    this.socket.destroy()
    return this.closed
  }
}
