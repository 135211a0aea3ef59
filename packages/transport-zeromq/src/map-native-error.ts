import { AddressInUseError, BrineError, ClosedError, TimeoutError, TransportError } from '@brine/core'

/** Where a native error happened, so the Brine error can name it. */
export interface NativeErrorContext {
  /** What failed, for messages: `publish server`, `request client`, … */
  what: string
  /** `tcp://host:port` of the endpoint. */
  address: string
  /** `host:port` as configured, named by AddressInUseError. */
  hostPort?: string
  /** The endpoint is closing or closed: any failure now is a ClosedError. */
  closing?: boolean
  /** Set when the socket has a send timeout: EAGAIN then means it ran out. */
  sendTimeout?: { timeout: number; tries: number }
}

/** Native codes zeromq.js reports for an operation on a socket that is closed or being closed. */
const CLOSED_CODES = new Set(['ENOTSOCK', 'EBADF', 'ETERM', 'ECONTEXT'])

function nativeCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' ? code : undefined
}

/** True when `error` says the socket is closed (whatever the native code). */
export function isClosedSocketError(error: unknown): boolean {
  const code = nativeCode(error)
  if (code !== undefined && CLOSED_CODES.has(code)) return true
  return error instanceof Error && /socket is closed/i.test(error.message)
}

/**
 * The one place native zeromq errors become Brine errors. Brine errors pass through untouched;
 * anything unrecognised becomes a TransportError carrying the native code and the original as cause.
 */
export function mapNativeError(error: unknown, context: NativeErrorContext): Error {
  if (BrineError.isInstance(error)) return error
  const code = nativeCode(error)
  const cause = { cause: error }
  // A receive pending when the socket closes rejects with EAGAIN; while closing that means "closed".
  if (context.closing === true || isClosedSocketError(error)) return new ClosedError(context.what, context.address)
  if (code === 'EADDRINUSE') return new AddressInUseError(context.hostPort ?? context.address, cause)
  if (code === 'EAGAIN' && context.sendTimeout !== undefined) {
    return new TimeoutError(context.address, context.sendTimeout.timeout, context.sendTimeout.tries, cause)
  }
  const message = error instanceof Error ? error.message : String(error)
  return new TransportError(`${context.what} ${context.address}: ${code === undefined ? '' : `${code} `}${message}`, { address: context.address, code }, cause)
}
