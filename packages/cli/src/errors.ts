import { BrineError, registerErrors } from '@brine/core'

/** A daemon package that does not export the class the bin runs (a broken or mismatched install). */
export class DaemonLoadError extends BrineError {
  override name = 'DaemonLoadError'
  readonly role: string
  constructor(role: string, exportName: string) {
    super(`@brine/${role} does not export ${exportName}; reinstall Brine (npm ci) so its packages match`, { role, exportName })
    this.role = role
  }
}

/** The pidfile names a daemon of the same kind that is still running, or cannot be written. */
export class PidfileError extends BrineError {
  override name = 'PidfileError'
  readonly file: string
  readonly pid: number | undefined

  constructor(message: string, context: { file: string; pid?: number }, options?: ErrorOptions) {
    super(message, { file: context.file, pid: context.pid }, options)
    this.file = context.file
    this.pid = context.pid
  }
}

/**
 * The daemon cannot run as the config's `user`: the user does not exist, or the process is neither that
 * user nor root (Salt's "configured to run as user … but unable to switch"), or the switch itself failed.
 */
export class UserSwitchError extends BrineError {
  override name = 'UserSwitchError'
  readonly user: string
  readonly file: string | undefined
  readonly line: number | undefined

  constructor(message: string, context: { user: string; file?: string; line?: number }, options?: ErrorOptions) {
    super(message, { user: context.user, file: context.file, line: context.line }, options)
    this.user = context.user
    this.file = context.file
    this.line = context.line
  }
}

/** A command line that cannot be run as given (a flag missing its partner, a prompt without a terminal): exits 64. */
export class UsageError extends BrineError {
  override name = 'UsageError'
}

/**
 * `brine-call` (without `--local`) could not authenticate with its master: the key waits for the operator or was
 * rejected (Salt's salt-call gives up at once then too), or the master did not answer within `auth_timeout` × `auth_tries`.
 */
export class CallAuthError extends BrineError {
  override name = 'CallAuthError'
  readonly master: string

  constructor(master: string, reason: string) {
    super(`Minion failed to authenticate with the master ${master}: ${reason}`, { master })
    this.master = master
  }
}

registerErrors({ CallAuthError, DaemonLoadError, PidfileError, UserSwitchError, UsageError })
