/**
 * Every error class of `@brine/minion`. Names are string literals (bundlers rename classes);
 * context carries what a log line needs (the command, file, function, jid or module involved).
 *
 * Two families: the daemon's own (a return the master did not acknowledge, a spool file that is
 * not a return, a bad module name), and Salt's exceptions as execution modules raise them
 * (`CommandExecutionError`, `SaltInvocationError` as `InvocationError`, Python's `TypeError` as
 * `ArgumentError`), which the executor turns into Salt's return texts.
 */
import { BrineError, registerErrors, type ErrorContext } from '@brine/core'

/** A module registered under a name that is not a Python identifier (`[A-Za-z_][A-Za-z0-9_]*`). */
export class InvalidModuleNameError extends BrineError {
  override name = 'InvalidModuleNameError'
  readonly module: string
  constructor(module: string) {
    super(`invalid module name ${JSON.stringify(module.slice(0, 80))}: a module name is a letter or '_' followed by letters, digits or '_'`, {
      module: module.slice(0, 80),
    })
    this.module = module
  }
}

/**
 * Salt's `CommandExecutionError`: a module ran but what it drove failed (bad cwd, runas refused).
 * The executor reports it as `ERROR: <message>` with retcode 1, as Salt's minion does.
 */
export class CommandExecutionError extends BrineError {
  override name = 'CommandExecutionError'
  constructor(message: string, context: ErrorContext = {}, options?: ErrorOptions) {
    super(message, context, options)
  }
}

/**
 * Salt's `SaltInvocationError`: the caller asked for something invalid (unknown keyword
 * argument, wrong value). Reported as `ERROR executing '<fun>': <message>`.
 */
export class InvocationError extends BrineError {
  override name = 'InvocationError'
  constructor(message: string, context: ErrorContext = {}, options?: ErrorOptions) {
    super(message, context, options)
  }
}

/**
 * Python's `TypeError` on a bad call (missing or surplus positional arguments). Reported as
 * `Passed invalid arguments to <fun>: <message>` followed by the function's docstring.
 */
export class ArgumentError extends BrineError {
  override name = 'ArgumentError'
  constructor(fun: string, message: string) {
    super(message, { fun })
  }
}

/** The job was aborted (saltutil.kill_job, minion shutdown) before its function finished. */
export class JobKilledError extends BrineError {
  override name = 'JobKilledError'
  constructor(jid: string, reason: string) {
    super(`job ${jid} was killed: ${reason}`, { jid, reason })
  }
}

/** The error a job aborted through `signal` ends with: the signal's reason, or a JobKilledError. */
export function abortReason(signal: AbortSignal, jid: string): Error {
  const reason: unknown = signal.reason
  if (reason instanceof Error) return reason
  return new JobKilledError(jid, typeof reason === 'string' ? reason : 'aborted')
}

registerErrors({ InvalidModuleNameError, CommandExecutionError, InvocationError, ArgumentError, JobKilledError })
