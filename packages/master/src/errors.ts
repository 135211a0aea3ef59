import { BrineError, registerErrors, type SerializedError } from '@brine/core'

/** A Master used out of order: a property read before start() resolved, or start() called twice. */
export class MasterStateError extends BrineError {
  override name = 'MasterStateError'
  readonly state: string
  constructor(message: string, state: string) {
    super(message, { state })
    this.state = state
  }
}

/** The master's event bus could not be opened (socket path too long, cannot listen). */
export class EventBusError extends BrineError {
  override name = 'EventBusError'
}

/** A request worker thread died or could not be started. */
export class WorkerPoolError extends BrineError {
  override name = 'WorkerPoolError'
}

/**
 * The master's request workers are behind: a minion's `_auth` waited longer than the bound for a worker
 * and is refused unrun, so the minion asks again later (backing off, see docs/config.md `auth_tries`)
 * instead of the master spending its workers on a request whose sender has likely given up waiting.
 */
export class WorkerPoolBusyError extends BrineError {
  override name = 'WorkerPoolBusyError'
  readonly waitedMs: number
  readonly maxWaitMs: number
  constructor(waitedMs: number, maxWaitMs: number) {
    super(`the master's request workers are busy: this request waited ${waitedMs} ms for one (bound ${maxWaitMs} ms); refused unrun, ask again later`, {
      waitedMs,
      maxWaitMs,
    })
    this.waitedMs = waitedMs
    this.maxWaitMs = maxWaitMs
  }
}

/**
 * An error thrown inside a request worker, rebuilt on the main thread from its JSON form. It keeps
 * the original `name` (`DecryptError`, …) so the transport's error reply names the real problem.
 */
export class RebuiltWorkerError extends BrineError {
  override name: string = 'RebuiltWorkerError'
  constructor(json: SerializedError) {
    super(json.message, json.context ?? {})
    this.name = json.name
  }
}

/** A reactor setting or reaction file that cannot be used: bad YAML, an unknown call form, a substitution that names nothing. */
export class ReactionError extends BrineError {
  override name = 'ReactionError'
  readonly file: string
  constructor(file: string, problem: string, options?: ErrorOptions) {
    super(`reaction ${file}: ${problem}`, { file, problem }, options)
    this.file = file
  }
}

registerErrors({ MasterStateError, EventBusError, WorkerPoolError, WorkerPoolBusyError, RebuiltWorkerError, ReactionError })
