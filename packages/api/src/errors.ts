import { BrineError, registerErrors } from '@brine/core'

/** The response header that marks a 401 as an ACL refusal (salt-api gives both the same status). */
export const REFUSED_HEADER = 'X-Brine-Refused'

/**
 * A request the API answers with an HTTP error: the status salt-api gives (400 bad lowstate or body,
 * 401 no or bad credentials or refused by the ACL (`refused`), 403 `authorized_ips`, 405 a method the path
 * does not serve, 406 unsupported content type
 * or Accept, 413 too large, 503 master down, 504 timeout) and a message for the JSON body.
 */
export class ApiError extends BrineError {
  override name = 'ApiError'
  readonly status: number
  /** Seconds, sent as `Retry-After` (429: a login limit's window). */
  readonly retryAfter: number | undefined
  /** The master's ACL refused the call (a 401 as salt-api answers it, marked by {@link REFUSED_HEADER}). */
  readonly refused: boolean
  constructor(status: number, message: string, options?: ErrorOptions & { retryAfter?: number; refused?: boolean }) {
    super(message, { status }, options)
    this.status = status
    this.retryAfter = options?.retryAfter
    this.refused = options?.refused ?? false
  }
}

/** brine-api could not start: settings, certificate files, or the port. Names what and where. */
export class ApiStartError extends BrineError {
  override name = 'ApiStartError'
}

registerErrors({ ApiError, ApiStartError })
