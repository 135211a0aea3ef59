import { BrineError } from '@brine/transport'

/**
 * A request the API answers with an HTTP error: the status salt-api gives (400 bad lowstate or body,
 * 401 no or bad credentials, 403 refused by the ACL or `authorized_ips`, 406 unsupported content type
 * or Accept, 413 too large, 503 master down, 504 timeout) and a message for the JSON body.
 */
export class ApiError extends BrineError {
  override name = 'ApiError'
  readonly status: number
  /** Seconds, sent as `Retry-After` (429: a login limit's window). */
  readonly retryAfter: number | undefined
  constructor(status: number, message: string, options?: ErrorOptions & { retryAfter?: number }) {
    super(message, { status }, options)
    this.status = status
    this.retryAfter = options?.retryAfter
  }
}

/** brine-api could not start: settings, certificate files, or the port. Names what and where. */
export class ApiStartError extends BrineError {
  override name = 'ApiStartError'
}
