/** The errors of a minion's link to its masters: a return the master did not take, a master name that does not
 * resolve, a spool file that cannot be read, a return that cannot be spooled. Names are string literals (bundlers rename classes). */
import { BrineError, registerErrors } from '@brine/core'

/**
 * The master answered a sealed request with something other than its sealed `{ok: true}`. `refusal` is the
 * name of the master's error when it sent one (`StaleRequestError`, `ReturnRefusedError`, …: see
 * `SEALED_REFUSALS` in @brine/protocol for the ones that say what to do).
 */
export class NotAcknowledgedError extends BrineError {
  override name = 'NotAcknowledgedError'
  readonly cmd: string
  readonly refusal: string | undefined
  /** The master's error as it sent it (`{name, message, context}`), when it sent one. */
  readonly remote: { name?: unknown; message?: unknown; context?: unknown } | undefined
  constructor(cmd: string, reason: string, options?: ErrorOptions & { refusal?: string; error?: { name?: unknown; message?: unknown; context?: unknown } }) {
    super(`the master did not acknowledge ${cmd}: ${reason}`, { cmd, reason, refusal: options?.refusal }, options)
    this.cmd = cmd
    this.refusal = options?.refusal
    this.remote = options?.error
  }
}

/** The `master:` name does not resolve to an address: the resolver's own error is the cause and in the message. */
export class MasterUnresolvedError extends BrineError {
  override name = 'MasterUnresolvedError'
  readonly host: string
  constructor(host: string, reason: string, options?: ErrorOptions) {
    super(`the master's name '${host}' does not resolve: ${reason}`, { host, reason }, options)
    this.host = host
  }
}

/** A spool file that cannot be read back as a return; it is set aside, not retried. */
export class SpoolFileError extends BrineError {
  override name = 'SpoolFileError'
  readonly file: string
  constructor(file: string, reason: string, options?: ErrorOptions) {
    super(`spooled return ${file}: ${reason}`, { file, reason }, options)
    this.file = file
  }
}

/**
 * A return that could not be spooled: its file could not be written (the disk, the process's descriptors) and the
 * returns already held in memory until their writes succeed take `limit` bytes (`SPOOL_HELD_BYTES`) or more.
 */
export class SpoolFullError extends BrineError {
  override name = 'SpoolFullError'
  readonly file: string
  readonly held: number
  readonly limit: number
  constructor(file: string, held: number, limit: number, options?: ErrorOptions) {
    const why = options?.cause instanceof Error ? options.cause.message : 'an older copy of it still waits to be written'
    super(
      `cannot spool ${file}: writing it failed (${why}) and the returns held in memory until their spool writes succeed ` +
        `already take ${held} bytes of SPOOL_HELD_BYTES (${limit})`,
      { file, held, limit },
      options,
    )
    this.file = file
    this.held = held
    this.limit = limit
  }
}

registerErrors({ NotAcknowledgedError, MasterUnresolvedError, SpoolFileError, SpoolFullError })
