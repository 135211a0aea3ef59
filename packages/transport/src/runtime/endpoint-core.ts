import {
  BoundedQueue,
  decodeEnvelope,
  type Envelope,
  BrineError,
  ClosedError,
  FrameLimitError,
  FrameTooLargeError,
  type DecodeLimits,
  LogLimiter,
  type Logger,
  silentLogger,
} from '@brine/core'
import type { EndpointStats, TransportEvent } from '../contract/types.js'

/** Events buffered per endpoint before the oldest are dropped. */
export const EVENT_BUFFER = 1024

/**
 * What every endpoint of every transport shares: the event stream, the counters behind stats(),
 * the closed promise and rate-limited drop logging. Transports compose it rather than re-writing it.
 */
export class EndpointCore {
  readonly counters: Omit<EndpointStats, 'queued' | 'peers' | 'inFlight' | 'subscriptions'> = {
    dropped: 0,
    framesDropped: 0,
    reconnects: 0,
    refused: 0,
    peersRefused: 0,
    peersDropped: 0,
    slowConsumers: 0,
    coalesced: 0,
  }
  readonly closed: Promise<void>
  isClosed = false
  private readonly eventQueue = new BoundedQueue<TransportEvent>(EVENT_BUFFER, 'drop-oldest')
  private resolveClosed!: () => void
  /** Peer-caused warnings, each kind rate-limited on its own (10 a minute, then a count of the rest). */
  readonly #frameLog = new LogLimiter()
  readonly #peerLog = new LogLimiter()
  readonly #coalescedLog = new LogLimiter()

  constructor(
    readonly transport: string,
    readonly role: string,
    /** Updated by a server once bound (port 0 becomes the real port), so logs name the real address. */
    public address: string,
    readonly logger: Logger = silentLogger,
  ) {
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve
    })
  }

  /** How messages name this endpoint's kind: `tcp request client`. */
  get what(): string {
    return `${this.transport} ${this.role}`
  }

  closedError(): ClosedError {
    return new ClosedError(this.what, this.address)
  }

  emit(event: TransportEvent): void {
    this.eventQueue.push(event)
  }

  events(): AsyncIterable<TransportEvent> {
    return { [Symbol.asyncIterator]: () => this.eventQueue[Symbol.asyncIterator]() }
  }

  /** An incoming frame was refused: counted, emitted and logged (rate-limited: 10 lines a minute, then a count). */
  frameDropped(peer: string, reason: string, size: number): void {
    this.counters.framesDropped++
    this.emit({ type: 'frame-drop', peer, reason, size })
    this.#frameLog.warning(
      this.logger,
      `${this.what} ${this.address}: dropped frame from ${peer}: ${reason} (${this.counters.framesDropped} dropped so far)`,
      `dropped-frame warnings from ${this.what} ${this.address}`,
    )
  }

  /**
   * A server got a try of a request it still holds (the sender's try timed out: this server is slower than the sender
   * waits): counted in `coalesced` and logged at info (rate-limited), with the bytes that crossed the wire again.
   */
  requestCoalesced(peer: string, id: number, size: number): void {
    this.counters.coalesced++
    this.#coalescedLog.log(
      this.logger,
      'info',
      `${this.what} ${this.address}: request ${id} from ${peer} (${size} bytes) came again while its first try was in hand; not served twice (${this.counters.coalesced} so far)`,
      `requests that came again at ${this.what} ${this.address}`,
    )
  }

  /** A server refused a connection as it arrived: counted, emitted, logged (rate-limited). */
  peerRefused(peer: string, reason: string): void {
    this.counters.peersRefused++
    this.emit({ type: 'peer-refuse', peer, reason })
    this.#peerLog.warning(
      this.logger,
      `${this.what} ${this.address}: refused connection from ${peer}: ${reason} (${this.counters.peersRefused} refused so far)`,
      `connection warnings from ${this.what} ${this.address}`,
    )
  }

  /** A server is closing a connection for what the peer did: counted, emitted, logged (rate-limited). */
  peerDropped(peer: string, reason: string): void {
    this.counters.peersDropped++
    this.emit({ type: 'peer-drop', peer, reason })
    this.#peerLog.warning(
      this.logger,
      `${this.what} ${this.address}: dropped connection from ${peer}: ${reason} (${this.counters.peersDropped} dropped so far)`,
      `connection warnings from ${this.what} ${this.address}`,
    )
  }

  /**
   * A request/reply envelope from one received frame; undefined, with a `frame-drop` counted and
   * emitted, when the frame is over `maxFrameBytes`, over `limits` (entries, depth) or not an envelope.
   * `onLimit` hears a frame refused for its entries or depth (a server answers it).
   */
  envelopeOf(body: Buffer, peer: string, maxFrameBytes: number, limits?: DecodeLimits, onLimit?: (error: FrameLimitError) => void): Envelope | undefined {
    if (body.length > maxFrameBytes) {
      this.frameDropped(peer, new FrameTooLargeError(body.length, maxFrameBytes, peer).message, body.length)
      return undefined
    }
    try {
      return decodeEnvelope(body, peer, limits)
    } catch (error) {
      this.frameDropped(peer, BrineError.isInstance(error) ? error.message : String(error), body.length)
      if (error instanceof FrameLimitError) onLimit?.(error)
      return undefined
    }
  }

  /** A message was dropped at a high-water mark. */
  messageDropped(peer: string, reason: string): void {
    this.counters.dropped++
    // One event per drop would itself be unbounded work under a flood; the counter is exact.
    if (this.counters.dropped === 1 || this.counters.dropped % 1000 === 0) {
      this.emit({ type: 'message-drop', peer, reason })
      this.logger.warning(`${this.what} ${this.address}: ${reason} (${this.counters.dropped} dropped so far)`)
    }
  }

  /** A request was refused at a limit: counted in `refused`, and logged on the first and every 1000th. */
  requestRefused(reason: string): void {
    this.counters.refused++
    if (this.counters.refused === 1 || this.counters.refused % 1000 === 0) {
      this.logger.warning(`${this.what} ${this.address}: ${reason} (${this.counters.refused} refused so far)`)
    }
  }

  /** Logs what the rate limits held back; called as the endpoint closes. */
  flushLogs(): void {
    this.#frameLog.flush()
    this.#peerLog.flush()
  }

  /** Marks the endpoint closed, ends the event stream and resolves `closed`. Returns false if already closed. */
  markClosed(): boolean {
    if (this.isClosed) return false
    this.isClosed = true
    return true
  }

  finishClose(): void {
    this.flushLogs()
    this.eventQueue.end()
    this.resolveClosed()
  }
}
