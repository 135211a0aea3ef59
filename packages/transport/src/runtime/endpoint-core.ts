import { BoundedQueue } from './bounded-queue.js'
import { decodeEnvelope, type Envelope } from './codec.js'
import { ClosedError, FrameTooLargeError, MalformedFrameError } from '../contract/errors.js'
import type { Logger } from '../contract/logger.js'
import { silentLogger } from './logger.js'
import type { EndpointStats, TransportEvent } from '../contract/types.js'

/** Events buffered per endpoint before the oldest are dropped. */
export const EVENT_BUFFER = 1024

/** Frame drops logged per endpoint per burst before they are summarised, so a garbage flood cannot flood the log. */
const DROP_LOG_BURST = 10

/**
 * What every endpoint of every transport shares: the event stream, the counters behind stats(),
 * the closed promise and rate-limited drop logging. Transports compose it rather than re-writing it.
 */
export class EndpointCore {
  readonly counters: Omit<EndpointStats, 'queued' | 'peers' | 'inFlight'> = { dropped: 0, framesDropped: 0, reconnects: 0, refused: 0 }
  readonly closed: Promise<void>
  isClosed = false
  private readonly eventQueue = new BoundedQueue<TransportEvent>(EVENT_BUFFER, 'drop-oldest')
  private resolveClosed!: () => void
  private dropsLogged = 0

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

  /** An incoming frame was refused: counted, emitted and logged (with bursts summarised). */
  frameDropped(peer: string, reason: string, size: number): void {
    this.counters.framesDropped++
    this.emit({ type: 'frame-drop', peer, reason, size })
    this.dropsLogged++
    if (this.dropsLogged <= DROP_LOG_BURST) {
      this.logger.warning(`${this.what} ${this.address}: dropped frame from ${peer}: ${reason}`)
    } else if (this.dropsLogged % 1000 === 0) {
      this.logger.warning(`${this.what} ${this.address}: ${this.counters.framesDropped} frames dropped so far`)
    }
  }

  /**
   * A request/reply envelope from one received frame; undefined, with a `frame-drop` counted and
   * emitted, when the frame is over `maxFrameBytes` or not an envelope.
   */
  envelopeOf(body: Buffer, peer: string, maxFrameBytes: number): Envelope | undefined {
    if (body.length > maxFrameBytes) {
      this.frameDropped(peer, new FrameTooLargeError(body.length, maxFrameBytes, peer).message, body.length)
      return undefined
    }
    try {
      return decodeEnvelope(body, peer)
    } catch (error) {
      this.frameDropped(peer, error instanceof MalformedFrameError ? error.message : String(error), body.length)
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

  /** Marks the endpoint closed, ends the event stream and resolves `closed`. Returns false if already closed. */
  markClosed(): boolean {
    if (this.isClosed) return false
    this.isClosed = true
    return true
  }

  finishClose(): void {
    this.eventQueue.end()
    this.resolveClosed()
  }
}
