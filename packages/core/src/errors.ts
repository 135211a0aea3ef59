/**
 * Brine's error hierarchy. Every error has a `name` set from a string literal (bundlers may rename
 * classes, so `constructor.name` is never trusted), typed context fields, an optional `cause`, a
 * cross-copy marker for `isInstance` checks, and `toJSON()` so it can cross worker threads and the
 * wire as `{name, message, context}` and be rebuilt as its own class with {@link errorFromWire}
 * (each error module registers its classes with {@link registerErrors}).
 */

const BRINE_ERROR = Symbol.for('brine.error')

/** Context an error carries; only JSON-friendly values, so it survives the wire. */
export type ErrorContext = Record<string, string | number | boolean | null | undefined | readonly string[]>

/** The JSON form of an error, as it crosses the wire or a worker thread. */
export interface SerializedError {
  name: string
  message: string
  context?: ErrorContext
}

export class BrineError extends Error {
  override name: string = 'BrineError'
  readonly context: ErrorContext
  declare readonly [BRINE_ERROR]: true

  constructor(message: string, context: ErrorContext = {}, options?: ErrorOptions) {
    super(message, options)
    this.context = context
    Object.defineProperty(this, BRINE_ERROR, { value: true, enumerable: false })
  }

  /** True for any Brine error, even one made by another copy of this module. */
  static isInstance(value: unknown): value is BrineError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRINE_ERROR] === true
  }

  toJSON(): SerializedError {
    return { name: this.name, message: this.message, context: this.context }
  }
}

/** Base of every error raised by a transport. */
export class TransportError extends BrineError {
  override name: string = 'TransportError'
}

export class TimeoutError extends TransportError {
  override name = 'TimeoutError'
  readonly address: string
  readonly timeout: number
  readonly tries: number

  constructor(address: string, timeout: number, tries: number, options?: ErrorOptions) {
    super(`request to ${address} timed out after ${timeout} ms (${tries} ${tries === 1 ? 'try' : 'tries'})`, { address, timeout, tries }, options)
    this.address = address
    this.timeout = timeout
    this.tries = tries
  }
}

export class ClosedError extends TransportError {
  override name = 'ClosedError'
  constructor(what: string, address?: string) {
    super(address === undefined ? `${what} is closed` : `${what} ${address} is closed`, { address })
  }
}

export class FrameTooLargeError extends TransportError {
  override name = 'FrameTooLargeError'
  readonly size: number
  readonly limit: number

  constructor(size: number, limit: number, peer?: string) {
    const where = peer === undefined ? '' : ` ${peer.startsWith('to ') ? peer : `from ${peer}`}`
    super(`frame of ${size} bytes${where} exceeds max_frame_bytes (${limit})`, { size, limit, peer })
    this.size = size
    this.limit = limit
  }
}

export class MalformedFrameError extends TransportError {
  override name = 'MalformedFrameError'
  constructor(reason: string, peer?: string, options?: ErrorOptions) {
    super(peer === undefined ? `malformed frame: ${reason}` : `malformed frame from ${peer}: ${reason}`, { peer, reason }, options)
  }
}

/**
 * A received message is larger in structure than the receiver allows: more entries (array elements
 * plus map pairs) than `max_frame_entries`, or nesting deeper than `max_frame_depth`. Found by a scan of the bytes before anything is decoded, so the
 * refusal costs at most one pass over the frame and allocates nothing.
 */
export class FrameLimitError extends TransportError {
  override name = 'FrameLimitError'
  /** The config key of the bound: `max_frame_entries` or `max_frame_depth`. */
  readonly key: string
  readonly limit: number
  readonly size: number

  constructor(key: string, found: string, limit: number, size: number, peer?: string) {
    const where = peer === undefined ? '' : ` from ${peer}`
    super(`frame of ${size} bytes${where} ${found}, over ${key} (${limit}); refused before decoding`, { key, limit, size, peer })
    this.key = key
    this.limit = limit
    this.size = size
  }
}

export class AddressInUseError extends TransportError {
  override name = 'AddressInUseError'
  readonly address: string
  constructor(address: string, options?: ErrorOptions) {
    super(`address ${address} is already in use`, { address }, options)
    this.address = address
  }
}

/** A request client already has `limit` requests in flight (its hwm); send() refuses the next one. */
export class InFlightLimitError extends TransportError {
  override name = 'InFlightLimitError'
  readonly address: string
  readonly limit: number

  constructor(address: string, limit: number) {
    super(`${limit} requests already in flight to ${address} (hwm ${limit}); request refused`, { address, limit })
    this.address = address
    this.limit = limit
  }
}

/**
 * A request server is running `limit` handler calls and `backlog` more requests are waiting for one, or (a
 * server that cannot stop reading its peers) holds `maxInFlightBytes` of requests already: the request is
 * refused with this error as its reply instead of being held in memory. The requester sees it as a
 * {@link RemoteError} whose `remoteName` is `ServerBusyError`.
 */
export class ServerBusyError extends TransportError {
  override name = 'ServerBusyError'
  readonly address: string
  readonly limit: number
  readonly backlog: number
  readonly maxInFlightBytes: number | undefined

  constructor(address: string, limit: number, backlog: number, maxInFlightBytes?: number) {
    super(
      maxInFlightBytes === undefined
        ? `request server ${address} is busy: ${limit} handler calls running (concurrency limit ${limit}) and ${backlog} waiting (backlog limit ${backlog}); request refused`
        : `request server ${address} is busy: its requests in flight hold more than ${maxInFlightBytes} bytes (maxInFlightBytes); request refused`,
      maxInFlightBytes === undefined ? { address, limit, backlog } : { address, limit, backlog, maxInFlightBytes },
    )
    this.address = address
    this.limit = limit
    this.backlog = backlog
    this.maxInFlightBytes = maxInFlightBytes
  }
}

/**
 * A request handler on the far side threw; carries its error's name and message, and `remote`: that error
 * rebuilt as its own class (see {@link errorFromWire}), also this error's `cause`.
 */
export class RemoteError extends TransportError {
  override name = 'RemoteError'
  readonly remoteName: string
  readonly remote: BrineError
  constructor(remote: SerializedError, address: string) {
    const rebuilt = errorFromWire(remote)
    super(`${address} answered with ${remote.name}: ${remote.message}`, { ...remote.context, remoteName: remote.name, address }, { cause: rebuilt })
    this.remoteName = remote.name
    this.remote = rebuilt
  }
}

/** A second consumer of a single-consumer iterator, a handler set twice, and the like. */
export class InvalidOperationError extends BrineError {
  override name = 'InvalidOperationError'
}

export class UnknownTransportError extends BrineError {
  override name = 'UnknownTransportError'
  readonly transport: string
  readonly available: readonly string[]

  constructor(transport: string, available: readonly string[], suggestion?: string, source?: string) {
    const where = source === undefined ? '' : ` at ${source}`
    const hint = suggestion === undefined ? '' : `; did you mean '${suggestion}'?`
    super(`unknown transport '${transport}'${where} (available: ${available.join(', ')})${hint}`, {
      transport,
      available,
      suggestion,
      source,
    })
    this.transport = transport
    this.available = available
  }
}

export class TransportUnavailableError extends BrineError {
  override name = 'TransportUnavailableError'
  readonly transport: string
  constructor(transport: string, hint: string, options?: ErrorOptions) {
    const reason = options?.cause instanceof Error ? `: ${options.cause.message}` : ''
    super(`transport '${transport}' could not be loaded${reason}. ${hint}`, { transport, hint }, options)
    this.transport = transport
  }
}

export class DuplicateTransportError extends BrineError {
  override name = 'DuplicateTransportError'
  constructor(transport: string) {
    super(`transport '${transport}' is already registered`, { transport })
  }
}

/**
 * Rebuilds a handler's error that crossed the wire: a server's refusal of the request's shape comes
 * back as the FrameLimitError it was (naming the bound), anything else as a {@link RemoteError}.
 */
export function errorFromJSON(json: SerializedError, address: string): TransportError {
  const context = json.context ?? {}
  if (json.name === 'FrameLimitError' && typeof context['key'] === 'string' && typeof context['limit'] === 'number' && typeof context['size'] === 'number') {
    const error = new FrameLimitError(context['key'], '', context['limit'], context['size'])
    error.message = `${address} refused the request: ${json.message}`
    return error
  }
  return new RemoteError(json, address)
}

/** A class of Brine error, whatever its constructor takes. */
export type BrineErrorClass = abstract new (...args: never[]) => BrineError

// On globalThis, as the marker is: a second copy of this module (a bundle beside the sources) shares one registry.
const REGISTRY = Symbol.for('brine.error.registry')
const registry: Map<string, BrineErrorClass> =
  ((globalThis as Record<symbol, unknown>)[REGISTRY] as Map<string, BrineErrorClass> | undefined) ??
  ((globalThis as Record<symbol, unknown>)[REGISTRY] = new Map<string, BrineErrorClass>())

/**
 * Registers error classes under their names, so an error of theirs that crossed the wire or a worker
 * thread comes back as that class ({@link errorFromWire}). Each error module registers its classes,
 * keyed by class name, which is also the `name` each sets (the lint checks both). A name already
 * registered keeps its first class: the second is the same class from another copy of its module.
 */
export function registerErrors(classes: Record<string, BrineErrorClass>): void {
  for (const [name, errorClass] of Object.entries(classes)) if (!registry.has(name)) registry.set(name, errorClass)
}

/** The class registered under `name`, if any. */
export function registeredError(name: string): BrineErrorClass | undefined {
  return registry.get(name)
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Rebuilds an error from its wire form `{name, message, context}`: an instance of the class registered
 * under `name` (a plain {@link BrineError} keeping the name when none is), so `instanceof` tells what it
 * was. The constructor is not run (its arguments are not on the wire): the message and context are the
 * sender's, and each context entry that names no member of the class becomes a field of the same name,
 * as the classes keep their typed fields (`address`, `limit`, `key`, …).
 */
export function errorFromWire(json: SerializedError, options?: ErrorOptions): BrineError {
  const name = typeof json?.name === 'string' && json.name !== '' ? json.name : 'Error'
  const errorClass = registry.get(name) ?? BrineError
  const error = Object.create(errorClass.prototype as object) as BrineError
  Error.captureStackTrace(error, errorFromWire)
  const context: ErrorContext = isRecord(json?.context) ? { ...(json.context as ErrorContext) } : {}
  const hidden = { writable: true, configurable: true, enumerable: false }
  Object.defineProperty(error, 'message', { ...hidden, value: typeof json?.message === 'string' ? json.message : String(json?.message) })
  if (options?.cause !== undefined) Object.defineProperty(error, 'cause', { ...hidden, value: options.cause })
  Object.defineProperty(error, BRINE_ERROR, { value: true, enumerable: false })
  Object.defineProperty(error, 'name', { value: name, writable: true, configurable: true, enumerable: true })
  Object.defineProperty(error, 'context', { value: context, writable: false, configurable: true, enumerable: true })
  for (const [key, value] of Object.entries(context)) {
    if (!(key in error)) Object.defineProperty(error, key, { value, writable: false, configurable: true, enumerable: true })
  }
  return error
}

/**
 * The far side's own error behind `error`: along its `cause` chain, the typed error a {@link RemoteError}
 * carries, or undefined when nothing in the chain came back from the wire.
 */
export function remoteCause(error: unknown): BrineError | undefined {
  const seen = new Set<unknown>()
  for (let current = error; isRecord(current) && !seen.has(current); current = current['cause']) {
    seen.add(current)
    if (current instanceof RemoteError) return current.remote
  }
  return undefined
}

/** Turns anything thrown into the JSON form sent back to a requester. */
export function serializeError(error: unknown): SerializedError {
  if (BrineError.isInstance(error)) return error.toJSON()
  if (error instanceof Error) return { name: error.name || 'Error', message: error.message }
  return { name: 'Error', message: String(error) }
}

registerErrors({
  BrineError,
  TransportError,
  TimeoutError,
  ClosedError,
  FrameTooLargeError,
  MalformedFrameError,
  FrameLimitError,
  AddressInUseError,
  InFlightLimitError,
  ServerBusyError,
  RemoteError,
  InvalidOperationError,
  UnknownTransportError,
  TransportUnavailableError,
  DuplicateTransportError,
})
