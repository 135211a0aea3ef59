/**
 * One minion return's shapes between the wire, the bus and the job cache: the `salt/job/<jid>/ret/<id>`
 * event with its two conversions, the `jobs.list_job` reply every reader parses, and the check of the
 * master's publish reply.
 */
import { eventStamp } from './event-bus.js'
import type { PublishReply, ReturnLoad } from './loads.js'

/**
 * Salt's `salt/job/<jid>/ret/<id>` data: exactly the return load's fields, so programs written against
 * Salt's events see the same keys.
 */
export type ReturnEvent = Pick<
  ReturnLoad,
  'cmd' | 'id' | 'jid' | 'fun' | 'fun_args' | 'return' | 'retcode' | 'success' | 'out' | 'master_id' | 'metadata' | 'schedule'
> & {
  /** When the master fired it (ISO 8601). */
  _stamp?: string
}

/**
 * One minion's return as its readers keep it (the collector, the syndic, the job cache's `Result`).
 * `success` is absent when the source did not say: only `success: false` marks a failure.
 */
export interface EventReturn {
  return: unknown
  retcode: number
  success?: boolean
  out?: string
  fun_args: unknown[]
}

/**
 * Return → event: the load's fields (cmd, id, jid, fun, fun_args, return, retcode, success, and
 * out/master_id/metadata when set); anything else a minion added is left out.
 */
export function returnEventData(ret: ReturnLoad): ReturnEvent {
  const data: ReturnEvent = {
    cmd: '_return',
    id: ret.id,
    jid: ret.jid,
    fun: ret.fun,
    fun_args: ret.fun_args,
    return: ret.return,
    retcode: ret.retcode,
    success: ret.success,
  }
  if (ret.out !== undefined) data.out = ret.out
  if (ret.master_id !== undefined) data.master_id = ret.master_id
  if (ret.metadata !== undefined) data.metadata = ret.metadata
  // Stamped here, so the bus fires this fresh object as it is instead of copying it to add the stamp.
  data._stamp = eventStamp()
  return data
}

/**
 * Event (or stored `Result` entry, which has the same field names) → return: retcode 0 when absent,
 * `success` and `out` only when the source carries them, `fun_args` `[]` when absent.
 */
export function returnOfEvent(data: Readonly<Record<string, unknown>>): EventReturn {
  const ret: EventReturn = {
    return: data['return'],
    retcode: typeof data['retcode'] === 'number' ? data['retcode'] : 0,
    fun_args: Array.isArray(data['fun_args']) ? data['fun_args'] : [],
  }
  if (typeof data['success'] === 'boolean') ret.success = data['success']
  if (typeof data['out'] === 'string') ret.out = data['out']
  return ret
}

/** One return as the job cache keeps it: Salt's `get_jid` shape (`jobs.list_job`'s `Result` entries). */
export interface StoredReturn {
  return: unknown
  retcode?: number
  success?: boolean
  out?: string
}

/** The returns the job cache holds for one jid, by minion id. */
export type StoredReturns = Readonly<Record<string, StoredReturn>>

/** `jobs.list_job`'s answer, parsed: the job's function and arguments when it names them, and its stored returns. */
export interface ListedJob {
  fun?: string
  funArgs: unknown[]
  returns: StoredReturns
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * `jobs.list_job`'s answer (Salt's `{jid, Function, Arguments, …, Result: {id: {return, retcode, success, out?}}}`)
 * → its parts; no returns for an unknown jid or any other shape, and a `Result` entry without `return` is skipped.
 */
export function parseListJob(value: unknown): ListedJob {
  if (!isRecord(value)) return { funArgs: [], returns: {} }
  const listed: ListedJob = { funArgs: Array.isArray(value['Arguments']) ? value['Arguments'] : [], returns: {} }
  if (typeof value['Function'] === 'string') listed.fun = value['Function']
  const result = value['Result']
  if (!isRecord(result)) return listed
  const returns: Record<string, StoredReturn> = {}
  for (const [id, entry] of Object.entries(result)) if (isRecord(entry) && 'return' in entry) returns[id] = entry as unknown as StoredReturn
  listed.returns = returns
  return listed
}

/**
 * The master's publish reply, checked: `{jid, minions}` with ids as strings, `syndics` and a non-empty
 * `missing` kept when present; undefined for any other shape (the caller names its own error).
 */
export function parsePublishReply(reply: unknown): PublishReply | undefined {
  if (!isRecord(reply) || typeof reply['jid'] !== 'string' || !Array.isArray(reply['minions'])) return undefined
  const checked: PublishReply = { jid: reply['jid'], minions: reply['minions'].map(String) }
  const syndics = reply['syndics']
  if (isRecord(syndics))
    checked.syndics = Object.fromEntries(Object.entries(syndics).map(([id, minions]) => [id, Array.isArray(minions) ? minions.map(String) : []]))
  const missing = reply['missing']
  if (Array.isArray(missing) && missing.length > 0) checked.missing = missing.map(String)
  return checked
}

/** `jobs.list_job`'s answer → the stored returns (see {@link parseListJob}). */
export const storedReturnsOfListJob = (value: unknown): StoredReturns => parseListJob(value).returns

/**
 * A runner's `{outputter, data}` answer (`jobs.lookup_jid` when a minion named an outputter, Salt's
 * shape) → its parts; any other value is the data itself.
 */
export function unwrapOutputter(value: unknown): { outputter?: string; data: unknown } {
  if (isRecord(value) && Object.keys(value).length === 2 && typeof value['outputter'] === 'string' && 'data' in value)
    return { outputter: value['outputter'], data: value['data'] }
  return { data: value }
}
