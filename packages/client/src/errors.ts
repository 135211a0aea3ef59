import { BrineError, registerErrors } from '@brine/core'

/** The master refused a clear request (`publish`, `wheel`, `runner`) or its reply was an error. */
export class MasterRequestError extends BrineError {
  override name: string = 'MasterRequestError'
}

/** A publish the master refused or answered with something that is not `{jid, minions}`. */
export class PublishError extends MasterRequestError {
  override name = 'PublishError'
}

/** A runner the master refused to run (unknown name, bad root key) or an answer that is not `{jid, return}`. */
export class RunnerError extends MasterRequestError {
  override name = 'RunnerError'
}

/** A wheel call the master refused (unknown function, bad arguments, bad root key). */
export class WheelError extends MasterRequestError {
  override name = 'WheelError'
}

/** The master's event bus socket cannot be reached; names the socket. */
export class EventBusUnavailableError extends BrineError {
  override name = 'EventBusUnavailableError'
}

/** A tag match type that MasterEvent does not know; says which it does. */
export class MatchTypeError extends BrineError {
  override name = 'MatchTypeError'
  readonly matchType: string
  constructor(matchType: string) {
    super(`unknown match type '${matchType}' (use startswith, endswith, find, regex or fnmatch)`, { matchType })
    this.matchType = matchType
  }
}

/**
 * A batch size that is neither a number of minions (`3`) nor a percentage of them (`10%`, or Salt's
 * `%10`); names the value and where it came from (`--batch`, `batch_safe_size`, …).
 */
export class BatchSizeError extends BrineError {
  override name = 'BatchSizeError'
  readonly value: string
  readonly key: string
  /** What is wrong with it, and the forms that work (without the value and key). */
  readonly reason: string
  constructor(value: string, key: string, reason: string) {
    const full = `${reason}; give a number of minions (3) or a percentage of them (10%, or %10)`
    super(`invalid batch size ${JSON.stringify(value)} for ${key}: ${full}`, { value, key })
    this.value = value
    this.key = key
    this.reason = full
  }
}

/** A subset size that is not a whole number of minions of at least 1; names the value and where it came from (`--subset`, `subset`). */
export class SubsetSizeError extends BrineError {
  override name = 'SubsetSizeError'
  readonly value: string
  readonly key: string
  constructor(value: string, key: string, reason: string) {
    super(`invalid subset size ${JSON.stringify(value)} for ${key}: ${reason}; give a number of minions (3)`, { value, key })
    this.value = value
    this.key = key
  }
}

/** A {@link Job} used after `close()`: its returns can no longer be read through it. */
export class JobClosedError extends BrineError {
  override name = 'JobClosedError'
  readonly jid: string
  constructor(jid: string) {
    super(`job ${jid} is closed: its returns are no longer read (LocalClient.getCliReturns reads them again)`, { jid })
    this.jid = jid
  }
}

registerErrors({
  MasterRequestError,
  PublishError,
  RunnerError,
  WheelError,
  EventBusUnavailableError,
  MatchTypeError,
  BatchSizeError,
  SubsetSizeError,
  JobClosedError,
})
