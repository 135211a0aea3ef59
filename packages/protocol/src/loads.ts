import { PayloadError, truncateForMessage } from './errors.js'
import { isJid } from './jid.js'
import { tagProblem } from './tags.js'

/** Salt's target types (`tgt_type`, formerly `expr_form`). */
export const TARGET_TYPES = ['glob', 'pcre', 'list', 'grain', 'grain_pcre', 'ipcidr', 'compound', 'nodegroup'] as const
export type TargetType = (typeof TARGET_TYPES)[number]

/** A target as it travels: a list target may be a comma string or an array, a compound a string or words. */
export type Tgt = string | string[]

export interface Target {
  tgt: Tgt
  tgt_type?: TargetType
}

/**
 * What `LocalClient` sends the master (inside `{enc: 'clear', load}`) to start a job.
 * `timeout` is in seconds, as Salt's client sends it; `to` is Salt's gather timeout.
 */
export interface PublishLoad {
  cmd: 'publish'
  tgt: Tgt
  tgt_type: TargetType
  fun: string
  arg: unknown[]
  kwarg: Record<string, unknown>
  /** Absent when the master allocates it (docs/protocol.md). */
  jid?: string
  ret: string
  user: string
  /** The root key; or one of the eauth credentials below (docs/protocol.md). */
  key?: string
  /** An eauth token from `mk_token`. */
  token?: string
  /** An eauth backend with `username` and `password`. */
  eauth?: string
  username?: string
  password?: string
  timeout?: number
  to?: number
  /** The master that started the job, when a syndic passes a job down (Salt's `master_id`, kept as it is). */
  master_id?: string
  /** Salt's job metadata (`--metadata`): kept with the job, sent to the minions, echoed in each return, searched by `jobs.list_jobs`. */
  metadata?: Record<string, unknown>
  /** Filled in by the master: the minions expected to answer. */
  minions?: string[]
}

/**
 * What `brine --preview-target` asks the master: the minions a publish of `fun` to the target would expect,
 * under the same permission check; nothing is stored, fired or published. The credentials are a publish's.
 */
export type PreviewTargetLoad = Pick<PublishLoad, 'tgt' | 'tgt_type' | 'fun' | 'user' | 'key' | 'token' | 'eauth' | 'username' | 'password'> & {
  cmd: 'preview_target'
}

/** The master's answer to a `preview_target`: the minions, as a publish's reply names them. */
export type PreviewTargetReply = Pick<PublishReply, 'minions'>

/**
 * An eauth token as the master keeps it and `mk_token` / `get_token` answer it (Salt's token data):
 * `start` and `expire` are epoch seconds, `name` the user, `eauth` the backend that authenticated them.
 */
export interface TokenData {
  token: string
  start: number
  expire: number
  name: string
  eauth: string
  groups?: string[]
}

/** The master's reply to a publish: the jid and the minions expected to answer. */
export interface PublishReply {
  jid: string
  minions: string[]
  /**
   * With `order_masters`: the syndics expected to announce their minions for this job, each with the
   * minions it announced before that this job's target may select (what is reported missing if the
   * syndic never announces).
   */
  syndics?: Record<string, string[]>
  /** A list target's ids that are not accepted minions (Salt's `missing`); absent when there are none. */
  missing?: string[]
}

/** What the master publishes to minions for a job (encrypted and signed on the wire). */
export interface JobLoad {
  tgt: Tgt
  tgt_type: TargetType
  fun: string
  arg: unknown[]
  kwarg?: Record<string, unknown>
  jid: string
  ret: string
  user: string
  to?: number
  /** Which master in a multi-master or syndic tree started the job (Salt's master_id). */
  master_id?: string
  /** The publish's metadata, when it had some (Salt's `metadata`). */
  metadata?: Record<string, unknown>
  /** When the master published it, ms since the epoch in the master's clock (not in Salt's load). */
  issued: number
  /**
   * Until when a minion may still run it, ms since the epoch in the master's clock (`issued` +
   * `publish_ttl`): a recorded publish replayed later is refused (not in Salt's load).
   */
  expire: number
}

/** The fields a master adds to a job load when it publishes it (and keeps out of the job cache). */
export type PublishStamp = Pick<JobLoad, 'issued' | 'expire'>

/** A minion's return, sent over its request client. */
export interface ReturnLoad {
  cmd: '_return'
  id: string
  jid: string
  fun: string
  fun_args: unknown[]
  return: unknown
  retcode: number
  success: boolean
  out?: string
  master_id?: string
  /** The job's metadata, echoed as Salt's minion echoes it. */
  metadata?: Record<string, unknown>
  /** A schedule's return (Salt's `schedule` field): the job was not published; the minion made its jid. */
  schedule?: string
}

/**
 * A minion's first contact (docs/protocol.md): its id and public keys, signed by its sign key.
 * Key and signature encodings are @brine/crypt's; this type only fixes the field names.
 */
/** Events a minion sends to the master's bus, sealed like a return. */
export interface MinionEventLoad {
  cmd: '_minion_event'
  id: string
  events: EventLoad[]
}

/** An event on the master's bus: Salt's tag and data, `data._stamp` an ISO time. */
export interface EventLoad<T extends Record<string, unknown> = Record<string, unknown>> {
  tag: string
  data: T & { _stamp?: string }
}

type Check = (value: unknown) => string | undefined

const string: Check = (value) => (typeof value === 'string' ? undefined : 'must be a string')
const nonEmptyString: Check = (value) => (typeof value === 'string' && value !== '' ? undefined : 'must be a non-empty string')
const array: Check = (value) => (Array.isArray(value) ? undefined : 'must be a list')
const record: Check = (value) => (typeof value === 'object' && value !== null && !Array.isArray(value) ? undefined : 'must be a mapping')
const boolean: Check = (value) => (typeof value === 'boolean' ? undefined : 'must be true or false')
const integer: Check = (value) => (typeof value === 'number' && Number.isInteger(value) ? undefined : 'must be an integer')
const number: Check = (value) => (typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a number')
const jid: Check = (value) => (isJid(value) ? undefined : 'must be a jid (YYYYMMDDhhmmssffffff)')
const tgt: Check = (value) =>
  typeof value === 'string' || (Array.isArray(value) && value.every((item) => typeof item === 'string')) ? undefined : 'must be a string or a list of strings'
const tgtType: Check = (value) =>
  typeof value === 'string' && (TARGET_TYPES as readonly string[]).includes(value) ? undefined : `must be one of ${TARGET_TYPES.join(', ')}`
const literal =
  (expected: string): Check =>
  (value) =>
    value === expected ? undefined : `must be '${expected}'`
const optional =
  (check: Check): Check =>
  (value) =>
    value === undefined ? undefined : check(value)
/** Any value at all, null included, but the field must be there (a return may be null or false). */
const present: Check = () => undefined

/** A load's fields and their checks, listed once at load time (a master checks every return against the same list). */
type FieldChecks = ReadonlyArray<readonly [field: string, check: Check]>
const fieldChecks = (checks: Record<string, Check>): FieldChecks => Object.entries(checks)

/** Runs each field's check; the first failure becomes a PayloadError naming the load, field and value. */
function validate<T>(load: string, value: unknown, checks: FieldChecks): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new PayloadError(load, '(load)', 'must be a mapping')
  const fields = value as Record<string, unknown>
  for (const [field, check] of checks) {
    const given = fields[field]
    if (given === undefined && check === present) throw new PayloadError(load, field, 'is required')
    const problem = check(given)
    if (problem !== undefined) {
      // What the peer sent, shown short: a field can be megabytes (an over-long tag, a huge list).
      throw new PayloadError(
        load,
        field,
        `${problem} (${given === undefined ? 'missing' : `got ${truncateForMessage(JSON.stringify(given) ?? String(given))}`})`,
      )
    }
  }
  return value as T
}

/** The credentials an operator's clear request may carry: the root key, a token, or an eauth trio (docs/protocol.md). */
const CREDENTIAL_CHECKS: Record<string, Check> = {
  key: optional(string),
  token: optional(string),
  eauth: optional(string),
  username: optional(string),
  password: optional(string),
}

const PUBLISH_CHECKS = fieldChecks({
  cmd: literal('publish'),
  tgt,
  tgt_type: tgtType,
  fun: nonEmptyString,
  arg: array,
  kwarg: record,
  jid: optional(jid),
  ret: string,
  user: string,
  ...CREDENTIAL_CHECKS,
  timeout: optional(number),
  to: optional(number),
  master_id: optional(string),
  metadata: optional(record),
  minions: optional(array),
})

/** Checks a publish request; throws PayloadError naming the first bad field. */
export function validatePublishLoad(value: unknown): PublishLoad {
  return validate<PublishLoad>('publish', value, PUBLISH_CHECKS)
}

const PREVIEW_TARGET_CHECKS = fieldChecks({
  cmd: literal('preview_target'),
  tgt,
  tgt_type: tgtType,
  fun: nonEmptyString,
  user: string,
  ...CREDENTIAL_CHECKS,
})

/** Checks a `preview_target` request; throws PayloadError naming the first bad field. */
export function validatePreviewTargetLoad(value: unknown): PreviewTargetLoad {
  return validate<PreviewTargetLoad>('preview_target', value, PREVIEW_TARGET_CHECKS)
}

const JOB_CHECKS = fieldChecks({
  tgt,
  tgt_type: tgtType,
  fun: nonEmptyString,
  arg: array,
  kwarg: optional(record),
  jid,
  ret: string,
  user: string,
  to: optional(number),
  master_id: optional(string),
  metadata: optional(record),
  issued: number,
  expire: number,
})

/** Checks a job as a minion receives it. */
export function validateJobLoad(value: unknown): JobLoad {
  return validate<JobLoad>('job', value, JOB_CHECKS)
}

const RETURN_CHECKS = fieldChecks({
  cmd: literal('_return'),
  id: nonEmptyString,
  jid,
  fun: nonEmptyString,
  fun_args: array,
  return: present,
  retcode: integer,
  success: boolean,
  out: optional(string),
  master_id: optional(string),
  metadata: optional(record),
  schedule: optional(nonEmptyString),
})

/** Checks a minion's return; throws PayloadError naming the first bad field. */
export function validateReturnLoad(value: unknown): ReturnLoad {
  return validate<ReturnLoad>('_return', value, RETURN_CHECKS)
}

const MINION_EVENT_CHECKS = fieldChecks({ cmd: literal('_minion_event'), id: nonEmptyString, events: array })
const EVENT_CHECKS = fieldChecks({ tag: tagProblem, data: record })

export function validateMinionEventLoad(value: unknown): MinionEventLoad {
  const load = validate<MinionEventLoad>('_minion_event', value, MINION_EVENT_CHECKS)
  load.events.forEach(validateEventLoad)
  return load
}

export function validateEventLoad(value: unknown): EventLoad {
  return validate<EventLoad>('event', value, EVENT_CHECKS)
}
