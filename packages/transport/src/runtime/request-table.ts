import {
  InFlightLimitError,
  InvalidOperationError,
  TimeoutError,
  errorFromJSON,
  type WireValue,
  EnvelopeKind,
  encodeEnvelope,
  decodeLimitsOf,
  type DecodeLimits,
  type Envelope,
} from '@brine/core'
import type { SendOptions } from '../contract/types.js'
import type { EndpointCore } from './endpoint-core.js'

/** Ids wrap here: at most five bytes of msgpack, and far more than can ever be in flight at once. */
export const REQUEST_ID_LIMIT = 2 ** 32

/** The largest delay setTimeout honours; a longer one would fire after 1 ms. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1

/** Throws RangeError unless `timeout` is a usable per-try timeout in ms. */
export function checkTimeout(timeout: number): number {
  if (!(timeout > 0 && timeout <= MAX_TIMEOUT_MS)) throw new RangeError(`timeout must be a positive number of ms up to ${MAX_TIMEOUT_MS}, got ${timeout}`)
  return timeout
}

/** Throws RangeError unless `patience` is a non-negative integer. */
export function checkPatience(patience: number): number {
  if (!Number.isInteger(patience) || patience < 0) throw new RangeError(`patience must be a non-negative integer, got ${patience}`)
  return patience
}

/** Throws RangeError unless `tries` is a positive integer. */
export function checkTries(tries: number): number {
  if (!Number.isInteger(tries) || tries < 1) throw new RangeError(`tries must be a positive integer, got ${tries}`)
  return tries
}

export interface RequestTableOptions {
  /** Per-try timeout (ms) and tries when send() names none. */
  timeout: number
  tries: number
  /** Requests in flight at once (the client's hwm); one more is refused with InFlightLimitError. */
  limit: number
  maxFrameBytes: number
  /** Entries and depth a reply may have (default: a client's, `decodeLimitsOf({}, 'client')`). */
  limits?: DecodeLimits
  /**
   * How each request's envelope is encoded, once per request, bounded by `maxFrameBytes`: TCP's writes its length
   * prefix with it (`encodeEnvelopeFrame`) rather than `wrap` copying the envelope behind one; default `encodeEnvelope`.
   */
  encodeRequest?: (envelope: Envelope, limit: number, peer: string) => Buffer
  /** What each try sends, made once per request from the encoded request (after `encodeRequest`); default: it as it is. */
  wrap?: (envelope: Buffer) => Buffer
  /** Ids wrap here (default {@link REQUEST_ID_LIMIT}); must exceed `limit`. */
  idLimit?: number
}

/** The transport's side of a request table: it only moves bytes. */
export interface RequestLink {
  /** Sends one try of `request` (its `data`) now, or holds it until the link is up. Must not throw. */
  transmit(request: PendingRequest): void
  /** `request` has settled (answered, timed out, aborted or closed): drop any reference the link kept. */
  settled?(request: PendingRequest): void
}

const ONCE = { once: true } as const

/**
 * One request in flight: one object per request, which is also its abort listener (`handleEvent`),
 * and its per-try timer calls a module-level function, so a request costs no closures beyond its promise.
 */
export class PendingRequest {
  /** Tries made so far (less those the server handed back with a Pending notice). */
  attempt = 0
  /** Tries handed back so far, at most `patience`. */
  handedBack = 0
  timer: NodeJS.Timeout | undefined = undefined
  settled = false

  constructor(
    readonly table: RequestTable,
    readonly id: number,
    /** What every try sends: the same bytes each time, so a late reply to an earlier try still matches. */
    readonly data: Buffer,
    readonly timeout: number,
    readonly tries: number,
    readonly patience: number,
    readonly resolve: (reply: WireValue) => void,
    readonly reject: (error: unknown) => void,
    readonly signal: AbortSignal | undefined,
  ) {}

  /** The signal's abort event. */
  handleEvent(): void {
    this.table.fail(this, abortReason(this.signal!))
  }
}

function onTryTimeout(request: PendingRequest): void {
  request.table.tryTimedOut(request)
}

/**
 * The client side of request/reply, written once for every transport: ids (wrapping, skipping ids
 * still in flight), the in-flight limit, per-try timers and `tries`, matching replies by id (so a
 * late reply to an earlier try completes the request), AbortSignal, and ClosedError for everything
 * pending on close. The transport hands it each reply frame and sends what it is asked to.
 */
export class RequestTable {
  readonly #core: EndpointCore
  readonly #link: RequestLink
  readonly #pending = new Map<number, PendingRequest>()
  readonly #timeout: number
  readonly #tries: number
  readonly #limit: number
  readonly #maxFrameBytes: number
  readonly #limits: DecodeLimits
  readonly #encodeRequest: (envelope: Envelope, limit: number, peer: string) => Buffer
  readonly #wrap: ((envelope: Buffer) => Buffer) | undefined
  readonly #idLimit: number
  #lastId = -1
  #open = false

  constructor(core: EndpointCore, options: RequestTableOptions, link: RequestLink) {
    this.#core = core
    this.#link = link
    this.#timeout = checkTimeout(options.timeout)
    this.#tries = checkTries(options.tries)
    if (!Number.isInteger(options.limit) || options.limit < 1) throw new RangeError(`hwm must be a positive integer, got ${options.limit}`)
    this.#limit = options.limit
    this.#maxFrameBytes = options.maxFrameBytes
    this.#limits = options.limits ?? decodeLimitsOf({}, 'client')
    this.#encodeRequest = options.encodeRequest ?? encodeEnvelope
    this.#wrap = options.wrap
    this.#idLimit = options.idLimit ?? REQUEST_ID_LIMIT
    if (!(this.#idLimit > this.#limit)) throw new RangeError(`idLimit (${this.#idLimit}) must exceed the in-flight limit (${this.#limit})`)
  }

  /** Requests sent and not yet settled. */
  get inFlight(): number {
    return this.#pending.size
  }

  /** Lets send() through; called by the endpoint's start(). */
  open(): void {
    this.#open = true
  }

  send(request: WireValue, options: SendOptions = {}): Promise<WireValue> {
    const core = this.#core
    if (core.isClosed) return Promise.reject(core.closedError())
    if (!this.#open) return Promise.reject(new InvalidOperationError(`${core.what} ${core.address}: call start() before send()`))
    let timeout: number
    let tries: number
    let patience: number
    let data: Buffer
    const signal = options.signal
    try {
      timeout = options.timeout === undefined ? this.#timeout : checkTimeout(options.timeout)
      tries = options.tries === undefined ? this.#tries : checkTries(options.tries)
      patience = options.patience === undefined ? 0 : checkPatience(options.patience)
      signal?.throwIfAborted()
      if (this.#pending.size >= this.#limit) {
        const error = new InFlightLimitError(core.address, this.#limit)
        core.requestRefused(error.message)
        throw error
      }
      const id = this.#nextId()
      const encoded = this.#encodeRequest({ kind: EnvelopeKind.Request, id, body: request }, this.#maxFrameBytes, core.address)
      data = this.#wrap === undefined ? encoded : this.#wrap(encoded)
    } catch (error) {
      return Promise.reject(error)
    }
    return new Promise<WireValue>((resolve, reject) => {
      const pending = new PendingRequest(this, this.#lastId, data, timeout, tries, patience, resolve, reject, signal)
      this.#pending.set(pending.id, pending)
      signal?.addEventListener('abort', pending, ONCE)
      this.#try(pending)
    })
  }

  /** The next id after the last one, skipping ids still in flight after a wrap. */
  #nextId(): number {
    let id = this.#lastId
    do {
      id = id + 1 >= this.#idLimit ? 0 : id + 1
    } while (this.#pending.has(id))
    this.#lastId = id
    return id
  }

  #try(request: PendingRequest): void {
    request.attempt++
    request.timer = setTimeout(onTryTimeout, request.timeout, request)
    this.#link.transmit(request)
  }

  /** @internal A try's timer ran out: try again, or fail with TimeoutError after the last try. */
  tryTimedOut(request: PendingRequest): void {
    if (request.settled) return
    if (request.attempt < request.tries) this.#try(request)
    else this.fail(request, new TimeoutError(this.#core.address, request.timeout, request.tries))
  }

  /** Takes a request out of the table; false when it had already settled. */
  #settle(request: PendingRequest): boolean {
    if (request.settled) return false
    request.settled = true
    this.#pending.delete(request.id)
    clearTimeout(request.timer)
    request.signal?.removeEventListener('abort', request)
    this.#link.settled?.(request)
    return true
  }

  /** @internal Rejects one request (timeout, abort) if it is still pending. */
  fail(request: PendingRequest, error: unknown): void {
    if (this.#settle(request)) request.reject(error)
  }

  /**
   * One reply frame from the server: decoded, matched by id and settled. A frame that is too
   * large, undecodable or a request is dropped with a `frame-drop`; a reply nobody waits for any
   * more (timed out, aborted, already answered) is ignored.
   */
  receive(body: Buffer, peer: string): void {
    const core = this.#core
    const envelope = core.envelopeOf(body, peer, this.#maxFrameBytes, this.#limits)
    if (envelope === undefined) return
    if (envelope.kind === EnvelopeKind.Request) {
      core.frameDropped(peer, `malformed frame from ${peer}: a request, not a reply`, body.length)
      return
    }
    const request = this.#pending.get(envelope.id)
    if (request === undefined) {
      core.logger.debug(`${core.what} ${core.address}: reply to request ${envelope.id} arrived after it settled`)
    } else if (envelope.kind === EnvelopeKind.Reply) {
      if (this.#settle(request)) request.resolve(envelope.body)
    } else if (envelope.kind === EnvelopeKind.Pending) {
      // The server holds the request: within its patience, the try it answered this way does not count, and the
      // next one (when this try's timer runs out) asks again whether the answer is still coming.
      if (!request.settled && request.handedBack < request.patience && request.attempt > 0) {
        request.handedBack++
        request.attempt--
      }
    } else {
      this.fail(request, errorFromJSON(envelope.body, core.address))
    }
  }

  /** Rejects everything pending with the endpoint's ClosedError; later sends reject too. */
  close(): void {
    for (const request of [...this.#pending.values()]) this.fail(request, this.#core.closedError())
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError')
}
