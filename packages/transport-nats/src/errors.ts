import { BrineError, TransportError, registerErrors } from '@brine/core'

/**
 * No NATS server of `nats_servers` took the connection: each was down, unreachable, refused the
 * credentials or the TLS settings. The message names every URL tried and why the last one failed.
 */
export class NatsConnectError extends TransportError {
  override name = 'NatsConnectError'
  readonly servers: readonly string[]
  readonly reason: string

  constructor(servers: readonly string[], reason: string, options?: ErrorOptions) {
    super(`cannot connect to NATS at ${servers.join(', ')}: ${reason}`, { servers, reason }, options)
    this.servers = servers
    this.reason = reason
  }
}

/** A NATS option that cannot work: a subject prefix with wildcards, a credentials file that is missing. */
export class NatsOptionsError extends BrineError {
  override name = 'NatsOptionsError'
  readonly key: string

  constructor(key: string, message: string, options?: ErrorOptions) {
    super(`${key}: ${message}`, { key }, options)
    this.key = key
  }
}

registerErrors({ NatsConnectError, NatsOptionsError })
