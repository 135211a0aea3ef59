import { BatchSizeError, EventBusUnavailableError, MatchTypeError } from '@brine/client'
import { LoginBusyError, LoginRateLimitedError } from '@brine/common'
import {
  EauthAuthenticationError,
  JidError,
  MalformedRequestError,
  PayloadError,
  PermissionDeniedError,
  TokenAuthenticationError,
  UnknownRunnerError,
  UnknownWheelFunctionError,
} from '@brine/protocol'
import { TargetError } from '@brine/targeting'
import { InvalidMinionIdError, RootKeyError } from '@brine/crypt'
import { ClosedError, FrameLimitError, TimeoutError, remoteCause, type BrineError, type BrineErrorClass } from '@brine/core'
import { ApiError } from './errors.js'

/** The master's answers that mean "who are you?": 401, as salt-api's hypermedia_handler answers them. */
const UNAUTHENTICATED: readonly BrineErrorClass[] = [EauthAuthenticationError, TokenAuthenticationError]
/** The master's answers that mean the call itself was wrong: 400. */
const BAD_REQUEST: readonly BrineErrorClass[] = [
  MalformedRequestError,
  PayloadError,
  UnknownRunnerError,
  UnknownWheelFunctionError,
  TargetError,
  JidError,
  InvalidMinionIdError,
  MatchTypeError,
]
/** This side's own failures to reach the master: 503. */
const UNAVAILABLE: readonly BrineErrorClass[] = [ClosedError, EventBusUnavailableError, RootKeyError]

const isOneOf = (error: unknown, classes: readonly BrineErrorClass[]): boolean => classes.some((errorClass) => error instanceof errorClass)

/** A login limit's window, whole seconds, as the error's context carries it (1 when it carries none). */
function retryAfterOf(error: BrineError): number {
  const seconds = Number(error.context['retryAfter'])
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 1
}

/**
 * The HTTP answer to a failed call to the master, by the class of the master's own error (rebuilt from the
 * wire, found along the cause chain) or of this side's: refused credentials 401, ACL refusals 401 too
 * (salt-api's; marked `refused`), login limits 429, bad calls 400, a request over the frame bounds 413 or 400,
 * a master that is down 503, a request that timed out 504. Undefined for anything else (a server fault).
 */
export function httpErrorOf(error: unknown, what: string, masterRunning: boolean): ApiError | undefined {
  if (error instanceof ApiError) return error
  const remote = remoteCause(error)
  const message = (error as Error)?.message ?? String(error)
  // What the master said, without the client's "the master refused …" and the transport's "… answered with Name: ".
  const said = remote?.message ?? message
  if (isOneOf(remote, UNAUTHENTICATED)) return new ApiError(401, said, { cause: error })
  const limited = [error, remote].find((candidate) => candidate instanceof LoginRateLimitedError || candidate instanceof LoginBusyError) as
    | BrineError
    | undefined
  if (limited !== undefined) return new ApiError(429, said, { cause: error, retryAfter: retryAfterOf(limited) })
  // A request over the master's entry or depth bound: too large (entries) or malformed (depth), never a server fault.
  const overBound = [error, remote].find((candidate) => candidate instanceof FrameLimitError) as FrameLimitError | undefined
  if (overBound !== undefined) return new ApiError(overBound.key === 'max_frame_entries' ? 413 : 400, message, { cause: error })
  // salt-api turns Salt's AuthorizationError into 401, so pepper says "Authentication denied"; the body keeps the rule.
  if (remote instanceof PermissionDeniedError) return new ApiError(401, said, { cause: error, refused: true })
  if (isOneOf(remote, BAD_REQUEST)) return new ApiError(400, said, { cause: error })
  // A batch size the client cannot use (`batch: 0`, `'x%'`) is the caller's mistake.
  if (error instanceof BatchSizeError) return new ApiError(400, message, { cause: error })
  if (error instanceof TimeoutError) {
    if (!masterRunning) return new ApiError(503, `the master is not available (${what}: ${message})`, { cause: error })
    return new ApiError(504, `${what} timed out: ${message}`, { cause: error })
  }
  if (isOneOf(error, UNAVAILABLE)) return new ApiError(503, `the master is not available (${what}: ${message})`, { cause: error })
  return undefined
}
