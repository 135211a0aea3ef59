import { BrineError, registerErrors } from '@brine/core'

/**
 * The errors a master answers requests with: refusals of the one authorize step, of a request's shape,
 * of a function it does not have, of a return or an event, of a syndic's batch. Part of the protocol,
 * so every side of the wire (the client, the REST API, minions and syndics) rebuilds them as these
 * classes ({@link registerErrors}) and tells them apart with `instanceof`.
 */

/**
 * A refusal of the one authorize step or its permission check: a clear command outside the allow-list,
 * a `_`-prefixed name, missing or wrong credentials, or a function or target the caller's permissions
 * do not cover. Names the command (and the user and function when known).
 */
export class PermissionDeniedError extends BrineError {
  override name = 'PermissionDeniedError'
  readonly command: string
  readonly user: string | undefined
  readonly fun: string | undefined
  constructor(command: string, reason: string, context: { user?: string; fun?: string } = {}) {
    super(`permission denied for ${JSON.stringify(command.slice(0, 80))}: ${reason}`, {
      command: command.slice(0, 80),
      reason,
      user: context.user,
      fun: context.fun?.slice(0, 200),
    })
    this.command = command.slice(0, 80)
    this.user = context.user
    this.fun = context.fun?.slice(0, 200)
  }
}

/** A request or load that does not have the shape docs/protocol.md gives it. */
export class MalformedRequestError extends BrineError {
  override name = 'MalformedRequestError'
  constructor(what: string, problem: string) {
    super(`malformed ${what}: ${problem}`, { what, problem })
  }
}

/** A wheel function the master does not provide. */
export class UnknownWheelFunctionError extends BrineError {
  override name = 'UnknownWheelFunctionError'
  constructor(fun: string, available: readonly string[]) {
    super(`unknown wheel function ${JSON.stringify(fun.slice(0, 80))} (available: ${available.join(', ')})`, { fun: fun.slice(0, 80), available })
  }
}

/** A runner function the master does not provide. */
export class UnknownRunnerError extends BrineError {
  override name = 'UnknownRunnerError'
  constructor(fun: string, available: readonly string[]) {
    super(`unknown runner ${JSON.stringify(fun.slice(0, 80))} (available: ${available.join(', ')})`, { fun: fun.slice(0, 80), available })
  }
}

/**
 * External auth credentials (`eauth` + `username` + `password`) that did not authenticate, or name a
 * backend `external_auth` does not configure. Salt's name; the REST API answers 401.
 */
export class EauthAuthenticationError extends BrineError {
  override name = 'EauthAuthenticationError'
  readonly user: string
  readonly eauth: string
  constructor(eauth: string, user: string, reason = '') {
    super(`Authentication failure of type "eauth" occurred for user ${user.slice(0, 80)}${reason === '' ? '' : `: ${reason}`}.`, {
      eauth: eauth.slice(0, 40),
      user: user.slice(0, 80),
    })
    this.user = user.slice(0, 80)
    this.eauth = eauth.slice(0, 40)
  }
}

/** A token that is unknown, expired or revoked, or whose backend is no longer configured. Salt's name; the REST API answers 401. */
export class TokenAuthenticationError extends BrineError {
  override name = 'TokenAuthenticationError'
  constructor(reason: string) {
    super(`Authentication failure of type "token" occurred: ${reason}.`, { reason })
  }
}

/** Why a return was refused: its jid is dated in the future, was never issued, its job was not sent to that minion, or (a schedule's) it is another job's. */
export type ReturnRefusalReason = 'future jid' | 'unknown jid' | 'not sent to this minion' | 'unstorable' | 'jid of another job'

/**
 * A minion's return the master will never store, however often it is sent: for a jid dated beyond
 * `clock_skew` in the future, a jid this master never issued (nor holds in its job cache), or a job
 * whose publish could not reach that minion. The minion drops it (docs/protocol.md) instead of spooling it.
 */
export class ReturnRefusedError extends BrineError {
  override name = 'ReturnRefusedError'
  readonly jid: string
  readonly id: string
  readonly reason: ReturnRefusalReason
  constructor(jid: string, id: string, reason: ReturnRefusalReason, detail: string) {
    super(`return of minion ${JSON.stringify(id.slice(0, 80))} for job ${jid.slice(0, 40)} refused (${reason}): ${detail}`, {
      jid: jid.slice(0, 40),
      id: id.slice(0, 80),
      reason,
    })
    this.jid = jid
    this.id = id
    this.reason = reason
  }
}

/** Events a minion sent that the master will not fire: one larger than `minion_event_max_bytes`, or beyond its rate. */
export class MinionEventRefusedError extends BrineError {
  override name = 'MinionEventRefusedError'
  readonly id: string
  readonly reason: 'too large' | 'rate'
  constructor(id: string, reason: 'too large' | 'rate', detail: string) {
    super(`events of minion ${JSON.stringify(id.slice(0, 80))} refused (${reason}): ${detail}`, { id: id.slice(0, 80), reason })
    this.id = id
    this.reason = reason
  }
}

/**
 * `_syndic_return` or `_syndic_event` from a key an operator has not accepted as a syndic's
 * (`brine-key --accept-syndic ID`): only a syndic may speak for minions behind it.
 */
export class SyndicNotAcceptedError extends BrineError {
  override name = 'SyndicNotAcceptedError'
  readonly id: string
  readonly command: string
  constructor(id: string, command: string) {
    super(`${command} refused: ${JSON.stringify(id.slice(0, 80))} is not accepted as a syndic on this master (brine-key --accept-syndic ${id.slice(0, 80)})`, {
      id: id.slice(0, 80),
      command,
    })
    this.id = id
    this.command = command
  }
}

/** A syndic's batch naming more distinct minions than `syndic_max_minions`: refused whole, nothing stored. */
export class SyndicLimitError extends BrineError {
  override name = 'SyndicLimitError'
  readonly id: string
  readonly limit: number
  readonly size: number
  constructor(id: string, size: number, limit: number) {
    super(`batch from syndic ${JSON.stringify(id.slice(0, 80))} names ${size} distinct minions, over syndic_max_minions (${limit}); refused`, {
      id: id.slice(0, 80),
      size,
      limit,
      key: 'syndic_max_minions',
    })
    this.id = id
    this.limit = limit
    this.size = size
  }
}

/** How much of a target or pattern an error message shows: enough to recognise it, never megabytes. */
export const SHOWN_TARGET_CHARS = 200

/** `text` cut to `limit` characters, with how long it really was: `aaaa… (1048576 characters)`. */
export function truncateForMessage(text: string, limit = SHOWN_TARGET_CHARS): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}… (${text.length} characters)`
}

/** A string that is not a jid in Salt's `YYYYMMDDhhmmssffffff` format. */
export class JidError extends BrineError {
  override name = 'JidError'
  constructor(jid: string, problem: string) {
    super(`invalid jid '${jid}': ${problem}`, { jid, problem })
  }
}

/** A wire load missing a field or carrying one of the wrong type. */
export class PayloadError extends BrineError {
  override name = 'PayloadError'
  readonly load: string
  readonly field: string

  constructor(load: string, field: string, problem: string) {
    super(`${load} load: field '${field}' ${problem}`, { load, field, problem })
    this.load = load
    this.field = field
  }
}

registerErrors({
  JidError,
  PayloadError,
  PermissionDeniedError,
  MalformedRequestError,
  UnknownWheelFunctionError,
  UnknownRunnerError,
  EauthAuthenticationError,
  TokenAuthenticationError,
  ReturnRefusedError,
  MinionEventRefusedError,
  SyndicNotAcceptedError,
  SyndicLimitError,
})
