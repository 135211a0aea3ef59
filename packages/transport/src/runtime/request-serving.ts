import {
  InvalidOperationError,
  ServerBusyError,
  serializeError,
  type FrameLimitError,
  type SerializedError,
  type WireValue,
  EnvelopeKind,
  encodeEnvelope,
  ownBytes,
  decodeEnvelope,
  requestIdOf,
  decodeLimitsOf,
  DEFAULT_MAX_FRAME_BYTES,
  type DecodeLimits,
} from '@brine/core'
import {
  DEFAULT_MAX_IN_FLIGHT_BYTES,
  DEFAULT_REQUEST_BACKLOG,
  DEFAULT_REQUEST_CONCURRENCY,
  REQUEST_OVERHEAD_BYTES,
  WAITING_FRAME_OVERHEAD_BYTES,
  type RequestContext,
  type RequestHandler,
  type RequestServerOptions,
} from '../contract/types.js'
import type { EndpointCore } from './endpoint-core.js'
import { RequestBacklog, RequestsInHand, type WaitingRequest } from './request-backlog.js'
import { AnsweredReplies } from './answered-replies.js'

export interface RequestServingOptions<P = unknown> {
  maxFrameBytes: number
  /** Entries and depth a request may have, checked on its bytes before decoding (default: a server's, `decodeLimitsOf({}, 'server')`). */
  limits?: DecodeLimits
  /** Handler calls running at once (default {@link DEFAULT_REQUEST_CONCURRENCY}). */
  concurrency?: number
  /** Requests waiting for a handler slot, at most (default {@link DEFAULT_REQUEST_BACKLOG}); 0 for none. */
  backlog?: number
  /** Bytes of requests in flight, at most (default {@link DEFAULT_MAX_IN_FLIGHT_BYTES}; see RequestServerOptions). */
  maxInFlightBytes?: number
  /**
   * How the transport stops reading its peers while the server holds more than `maxInFlightBytes` (a socket
   * transport pauses its connections). Without one, a request that would pass the bound is refused with ServerBusyError.
   */
  intake?: IntakeGate
  /** What `context.authenticated()` does for the peer a request came from (the Listener's, for its connection). */
  authenticated?: (peer: P) => void
  /** Picks the requests that wait in the urgent lane, served before every other waiting request (RequestServerOptions.urgent). */
  urgent?: (request: WireValue) => boolean
  /** Bytes of recent replies kept to answer a try that comes again after its request was answered (default: half of `maxInFlightBytes`). */
  answeredBytes?: number
}

/** What a transport's request server passes on to its {@link RequestServing} from its options, the same on every transport. */
export function servingOptionsOf(
  options: RequestServerOptions,
): Pick<RequestServingOptions, 'maxFrameBytes' | 'limits' | 'concurrency' | 'backlog' | 'urgent' | 'maxInFlightBytes'> {
  return {
    maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
    limits: decodeLimitsOf(options, 'server'),
    concurrency: options.concurrency,
    backlog: options.backlog,
    urgent: options.urgent,
    maxInFlightBytes: options.maxInFlightBytes,
  }
}

/**
 * Sends one encoded reply envelope to the peer its request came from (TCP: the connection, framed;
 * ZeroMQ: the routing id). Must not throw: a peer that has gone simply gets nothing.
 */
export type ReplySender<P> = (peer: P, reply: Buffer, peerName: string) => void

/** A transport's switch on reading requests from its peers. */
export interface IntakeGate {
  pause(): void
  resume(): void
}

/**
 * The server side of request/reply, written once for every transport: each request envelope
 * `[0, id, body]` is checked, its handler called, and `[1, id, reply]` or `[2, id, {name, message,
 * context}]` sent back through the transport's {@link ReplySender}. At most `concurrency` handler
 * calls run at once; up to `backlog` more requests wait, those `urgent` picks first, each lane in arrival
 * order; a try of a request whose earlier try (same peer, same id) still waits or runs is not served again
 * (the earlier try's reply, same id, answers it, and the sender hears `[3, id, nil]`: still in hand), nor one that
 * comes just after it was answered (the same reply again, from {@link AnsweredReplies}; both counted in
 * `stats().coalesced`); beyond that a request is
 * answered at once with a ServerBusyError naming both limits and counted in `stats().refused`, so
 * no flood can grow the server's memory without bound. Nothing a peer sends can stop it: a bad
 * frame — over max_frame_bytes, over the entry or depth bound (refused on its bytes, before any
 * decoding), not msgpack, not a request envelope — is dropped with a `frame-drop` event and counted.
 * A request refused for its entries or depth is still answered, with the FrameLimitError naming the
 * bound, when its id can be read from its first bytes: every refusal is an answer, and the caller
 * does not wait out its timeout for one (the answer costs no more than the refusal did).
 *
 * What is read and not yet answered is bounded in bytes too (`maxInFlightBytes`): past it the transport's
 * {@link IntakeGate} stops reading its peers until half of it is left (`intake-pause`, `intake-resume`), so a
 * burst waits in the peers' sockets rather than here; a transport without a gate runs calls within half of it and
 * keeps what it cannot run as frames (their bytes and a record each) while the whole fits, and refuses the rest.
 */
export class RequestServing<P> {
  readonly concurrency: number
  readonly backlog: number
  readonly maxInFlightBytes: number
  readonly #intake: IntakeGate | undefined
  #inFlightBytes = 0
  #paused = false
  /** Whether the transport was told to stop reading (it stays so while held frames are taken in on resuming). */
  #gateClosed = false
  /**
   * Frames that arrived after the intake paused (the rest of a read the transport had already made), kept as
   * their bytes and taken in, in order, once it resumes: at most one read's worth per connection.
   */
  #held: Array<{ body: Buffer; peer: P; peerName: string; address: string | undefined }> = []
  readonly #core: EndpointCore
  readonly #send: ReplySender<P>
  readonly #maxFrameBytes: number
  readonly #limits: DecodeLimits
  readonly #waiting: RequestBacklog<P> | undefined
  readonly #urgent: ((request: WireValue) => boolean) | undefined
  /** Every request waiting or running, by peer and id. */
  readonly #inHand = new RequestsInHand<P>()
  /** The last replies sent, for a try that comes again once its request was answered. */
  readonly #answered: AnsweredReplies<P>
  #handler: RequestHandler | undefined
  readonly #authenticated: ((peer: P) => void) | undefined
  #running = 0
  /** The refusal reply's body, made on the first refusal (the address is final by then). */
  #busy: SerializedError | undefined
  /** The refusal reply's body at the byte bound, made on the first such refusal. */
  #overBytes: SerializedError | undefined

  constructor(core: EndpointCore, options: RequestServingOptions<P>, send: ReplySender<P>) {
    const concurrency = options.concurrency ?? DEFAULT_REQUEST_CONCURRENCY
    const backlog = options.backlog ?? DEFAULT_REQUEST_BACKLOG
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`)
    if (!Number.isInteger(backlog) || backlog < 0) throw new RangeError(`backlog must be a non-negative integer, got ${backlog}`)
    const maxInFlightBytes = options.maxInFlightBytes ?? DEFAULT_MAX_IN_FLIGHT_BYTES
    if (!Number.isSafeInteger(maxInFlightBytes) || maxInFlightBytes < 1)
      throw new RangeError(`maxInFlightBytes must be a positive integer, got ${maxInFlightBytes}`)
    this.maxInFlightBytes = maxInFlightBytes
    this.#intake = options.intake
    this.#core = core
    this.#send = send
    this.#authenticated = options.authenticated
    this.#urgent = options.urgent
    this.#maxFrameBytes = options.maxFrameBytes
    this.#limits = options.limits ?? decodeLimitsOf({}, 'server')
    this.concurrency = concurrency
    this.backlog = backlog
    this.#waiting = backlog === 0 ? undefined : new RequestBacklog<P>(backlog)
    this.#answered = new AnsweredReplies<P>(options.answeredBytes ?? Math.floor(maxInFlightBytes / 2))
  }

  /** Handler calls running now. */
  get running(): number {
    return this.#running
  }

  /** Requests waiting for a handler slot now. */
  get waiting(): number {
    return this.#waiting?.size ?? 0
  }

  /** Bytes of requests read and not yet answered, as counted against `maxInFlightBytes`. */
  get inFlightBytes(): number {
    return this.#inFlightBytes
  }

  /** Sets the handler: once, and before the endpoint starts (`started`). */
  handle(handler: RequestHandler, started: boolean): void {
    const core = this.#core
    if (this.#handler !== undefined) throw new InvalidOperationError(`${core.what} ${core.address} already has a handler`)
    if (started) throw new InvalidOperationError(`${core.what} ${core.address}: handle() must be called before start()`)
    this.#handler = handler
  }

  /** Throws InvalidOperationError when no handler is set; the endpoint calls it before binding. */
  checkReady(): void {
    const core = this.#core
    if (this.#handler === undefined) throw new InvalidOperationError(`${core.what} ${core.address}: call handle() before start()`)
  }

  /**
   * One frame from `peer` (named `peerName` in events and the handler's context; `address`, its host, when known).
   * The frame may be a view into the chunk it was read with; it is kept (and decoded) as a copy of its own bytes, so
   * what a request holds while it waits or runs is what `maxInFlightBytes` counts of it.
   */
  receive(frame: Buffer, peer: P, peerName: string, address?: string): void {
    const body = ownBytes(frame)
    if (this.#paused) {
      this.#held.push({ body, peer, peerName, address })
      return
    }
    // A try of a request in hand or just answered is known by its id, read from the frame's first bytes: nothing decoded.
    const quickId = requestIdOf(body)
    if (quickId !== undefined && this.#repeated(quickId, body, peer, peerName)) return
    const core = this.#core
    const envelope = core.envelopeOf(body, peerName, this.#maxFrameBytes, this.#limits, (error) => this.#answerLimit(body, error, peer, peerName))
    if (envelope === undefined) return
    if (envelope.kind !== EnvelopeKind.Request) {
      core.frameDropped(peerName, `malformed frame from ${peerName}: expected a request envelope, got kind ${envelope.kind}`, body.length)
      return
    }
    const id = envelope.id
    if (quickId === undefined && this.#repeated(id, body, peer, peerName)) return
    const cost = body.length + REQUEST_OVERHEAD_BYTES
    const request = { id, cost, held: cost, peer, peerName, address }
    // Without a gate, running calls may fill half the bound (their decoded forms and promises: what REQUEST_OVERHEAD_BYTES
    // stands for); past that a request waits as its frame, which costs a fraction of that, in the other half. One
    // request alone is served whatever its size (max_frame_bytes bounds it), and an urgent one (the operator's
    // publish) whatever the flood it arrives in: it is counted, never refused.
    if (this.#intake === undefined && this.#inFlightBytes > 0 && this.#inFlightBytes + cost > this.maxInFlightBytes / 2 && !this.#isUrgent(envelope.body)) {
      this.#waitAsFrame(request, body)
      return
    }
    // Frames waiting past the bound (no gate) come first: a slot free then is not theirs to skip, but an urgent request's.
    if (this.#running < this.concurrency && (this.waiting === 0 || this.#isUrgent(envelope.body)))
      void this.#serve(request, { request: envelope.body, frame: body })
    else if (this.#waiting?.push({ ...request, frame: body }, this.#isUrgent(envelope.body)) === true) {
      this.#inHand.add(peer, id)
      this.#hold(cost)
    } else this.#refuse(id, peer, peerName)
  }

  /**
   * A try of a request this server already has (same peer, same id): true when it was dealt with here.
   * - Still waiting or running (its sender timed out meanwhile and sent the same bytes again): serving both would run it
   *   twice and grow the queue with every try. It is not served again: the one reply answers each try, whichever the
   *   sender still waits on, and the sender is told now that the request is in hand (a Pending notice), so that a
   *   patient one (SendOptions.patience) does not count this try and give up while its answer is on the way.
   * - Answered a moment ago (the try waited in a socket while the first was served): the same reply bytes again.
   */
  #repeated(id: number, body: Buffer, peer: P, peerName: string): boolean {
    if (this.#inHand.holds(peer, id)) {
      this.#core.requestCoalesced(peerName, id, body.length)
      this.#send(peer, encodeEnvelope({ kind: EnvelopeKind.Pending, id, body: null }), peerName)
      return true
    }
    const reply = this.#answered.replyTo(peer, id, body)
    if (reply === undefined) return false
    this.#core.counters.coalesced++
    this.#send(peer, reply, peerName)
    return true
  }

  /**
   * A request a server without an intake gate cannot run within half of `maxInFlightBytes` (a broker's: its deliveries
   * cannot be left unread). Refused, it would be sent again after its sender's retry wait, costing this server its intake
   * twice and the sender a spool write; it waits as its frame instead, counted at the frame's bytes and its record
   * ({@link WAITING_FRAME_OVERHEAD_BYTES}) while those fit the bound, and is counted at its full cost once it runs
   * (each call answered frees more than that). Refused only when not even its frame fits, or the backlog is full.
   */
  #waitAsFrame(request: Omit<WaitingRequest<P>, 'frame'>, frame: Buffer): void {
    const held = frame.length + WAITING_FRAME_OVERHEAD_BYTES
    const { id, peer, peerName } = request
    if (this.#inFlightBytes + held > this.maxInFlightBytes) this.#refuse(id, peer, peerName, this.maxInFlightBytes)
    else if (this.#waiting?.push({ ...request, held, frame }, false) === true) {
      this.#inHand.add(peer, id)
      this.#hold(held)
    } else this.#refuse(id, peer, peerName)
  }

  /** The `urgent` option's choice; a choice that throws (it must not) leaves the request in the common lane. */
  #isUrgent(request: WireValue): boolean {
    try {
      return this.#urgent?.(request) === true
    } catch {
      return false
    }
  }

  /** Counts `cost` in (positive) or out (negative), and pauses or resumes the intake at the bound and at half of it. */
  #hold(cost: number): void {
    this.#inFlightBytes += cost
    const intake = this.#intake
    if (intake === undefined) return
    const bytes = this.#inFlightBytes
    const limit = this.maxInFlightBytes
    if (!this.#paused && bytes > limit) {
      this.#paused = true
      if (!this.#gateClosed) intake.pause()
      this.#gateClosed = true
      this.#core.emit({ type: 'intake-pause', bytes, limit })
    } else if (this.#paused && bytes <= limit / 2) {
      this.#paused = false
      this.#core.emit({ type: 'intake-resume', bytes, limit })
      // What arrived after the pause first, and the transport reads again only if that did not fill the bound.
      const held = this.#held
      let next = 0
      while (next < held.length && !this.#paused) {
        const { body, peer, peerName, address } = held[next++]!
        this.receive(body, peer, peerName, address)
      }
      held.splice(0, next)
      if (this.#paused) return
      this.#gateClosed = false
      intake.resume()
    }
  }

  /**
   * Serves a request, decoded or as the frame it waited as: `cost` is counted in as it starts (when it did not wait)
   * and out once it is answered.
   */
  async #serve(
    { id, cost, held, peer, peerName, address }: Omit<WaitingRequest<P>, 'frame'>,
    body: { request: WireValue; frame: Buffer } | { frame: Buffer },
    counted = false,
  ): Promise<void> {
    const core = this.#core
    // A frame that waited counted at less than its cost (past the bound, no gate) is counted in full as it runs.
    if (!counted) this.#hold(cost)
    else if (held < cost) this.#hold(cost - held)
    this.#running++
    this.#inHand.add(peer, id)
    let reply: Buffer
    let answered = false
    try {
      const authenticated = this.#authenticated
      // One shape for every request, its absent fields undefined: no objects made to be spread into it.
      const context: RequestContext = {
        peer: peerName,
        transport: core.transport,
        address,
        authenticated: authenticated === undefined ? undefined : () => authenticated(peer),
      }
      // A waited frame passed every check when it arrived; decoded now, its objects live only as long as the call.
      const request = 'request' in body ? body.request : decodeEnvelope(body.frame, peerName, this.#limits).body
      const result = await this.#handler!(request, context)
      reply = this.#encodeReply(id, result, peerName)
      answered = reply[1] === EnvelopeKind.Reply
    } catch (error) {
      core.emit({ type: 'handler-error', peer: peerName, error: error instanceof Error ? error.message : String(error) })
      reply = this.#encodeError(id, serializeError(error), peerName)
    }
    this.#running--
    this.#inHand.delete(peer, id)
    if (core.isClosed) return
    // Only a reply is kept for a later try: an error (a busy worker, a refusal) may not be the answer the next time.
    if (answered) this.#answered.remember(peer, id, body.frame, reply)
    this.#send(peer, reply, peerName)
    // Counted out once its reply is on its way: the reply's bytes are the connection's queue's from here.
    this.#hold(-cost)
    const next = this.#waiting?.shift()
    if (next !== undefined) void this.#serve(next, next, true)
  }

  /** Encodes a reply; one too large or not encodable becomes an error reply saying why. */
  #encodeReply(id: number, result: WireValue, peerName: string): Buffer {
    try {
      return encodeEnvelope({ kind: EnvelopeKind.Reply, id, body: result }, this.#maxFrameBytes, peerName)
    } catch (error) {
      const core = this.#core
      core.logger.warning(`${core.what} ${core.address}: reply ${id} to ${peerName} not sent: ${String(error)}`)
      return this.#encodeError(id, serializeError(error), peerName)
    }
  }

  #encodeError(id: number, error: SerializedError, peerName: string): Buffer {
    try {
      return encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id, body: error }, this.#maxFrameBytes, peerName)
    } catch {
      // The error itself would not encode (odd context values, a huge message): the caller must still hear that it failed.
      return encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id, body: { name: error.name, message: 'the request failed; its error could not be encoded' } })
    }
  }

  #answerLimit(body: Buffer, error: FrameLimitError, peer: P, peerName: string): void {
    const id = requestIdOf(body)
    if (id === undefined || this.#core.isClosed) return
    this.#send(peer, this.#encodeError(id, error.toJSON(), peerName), peerName)
  }

  #refuse(id: number, peer: P, peerName: string, maxInFlightBytes?: number): void {
    const core = this.#core
    let busy: SerializedError
    if (maxInFlightBytes === undefined) {
      busy = this.#busy ??= new ServerBusyError(core.address, this.concurrency, this.backlog).toJSON()
      core.requestRefused(`request ${id} from ${peerName} refused: ${this.concurrency} handler calls running and ${this.backlog} waiting`)
    } else {
      busy = this.#overBytes ??= new ServerBusyError(core.address, this.concurrency, this.backlog, maxInFlightBytes).toJSON()
      core.requestRefused(`request ${id} from ${peerName} refused: requests in flight hold more than ${maxInFlightBytes} bytes`)
    }
    this.#send(peer, this.#encodeError(id, busy, peerName), peerName)
  }

  /** Forgets the requests still waiting; the endpoint is closing and their peers with it. */
  close(): void {
    this.#waiting?.clear()
    this.#inHand.clear()
    this.#answered.clear()
    this.#held = []
    this.#inFlightBytes = 0
  }
}
