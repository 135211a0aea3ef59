import { BrineError } from '@brine/transport'
import type { ErrorContext } from '@brine/transport'

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

/** Rejects with the signal's reason (or a JobKilledError) if `signal` is already aborted. */
export function throwIfAborted(signal: AbortSignal | undefined, jid: string): void {
  if (signal?.aborted === true) throw abortReason(signal, jid)
}

export function abortReason(signal: AbortSignal, jid: string): Error {
  const reason: unknown = signal.reason
  if (reason instanceof Error) return reason
  return new JobKilledError(jid, typeof reason === 'string' ? reason : 'aborted')
}
