/**
 * What a syndic sends its upper master (sealed, like a minion's return) and what the upper master fires
 * for it. Salt's syndic forwards its master's returns as `_syndic_return` (per jid the load once, then
 * `{minion: return}`) and its master's other events with the pretag `syndic/<id>`; Brine keeps those
 * shapes and adds what makes a tree trustworthy: a syndic announces the minions it will answer for
 * (per jid) before their returns, and the upper master accepts a return only from the syndic that
 * announced that minion for that jid.
 */
import { PayloadError } from './errors.js'
import { isJid } from './jid.js'
import { validateEventLoad, type EventLoad } from './loads.js'
import { returnOfEvent } from './returns.js'

/** One minion's return inside a `_syndic_return` (Salt's `{return, retcode, success}`, plus `fun_args`). */
export interface SyndicMinionReturn {
  return: unknown
  retcode: number
  success: boolean
  fun_args: unknown[]
  out?: string
}

/** One job's share of a `_syndic_return` batch. */
export interface SyndicJobEntry {
  jid: string
  /** The job's function (Salt's `__fun__`). */
  fun?: string
  /** The job's load, the first time this syndic forwards this jid (Salt's `__load__`, bounded by `syndic_jid_forward_cache_hwm`). */
  load?: Record<string, unknown>
  /** The master that started the job (Salt's `__master_id__`). */
  master_id?: string
  /**
   * Minions this syndic answers for in this job: its master's expected minions and those its own lower
   * syndics announced. Announced before (or with) their returns; the upper master refuses the rest.
   */
  minions?: string[]
  /** Lower syndics this syndic still waits to hear from for this job; `[]` once its subtree has announced. */
  pending?: string[]
  /** Returns by minion id. */
  returns?: Record<string, SyndicMinionReturn>
}

/** `_syndic_return`: a batch of announcements and returns, every `syndic_event_forward_timeout`. */
export interface SyndicReturnLoad {
  cmd: '_syndic_return'
  /** The syndic's id (what it authenticated as). */
  id: string
  jobs: SyndicJobEntry[]
}

/**
 * `_syndic_event`: the syndic's master's other events, fired upstairs as `syndic/<id>/<tag>` (a tag that
 * already starts with `syndic/` came from further down and goes up as it is, not prefixed again), and
 * the syndic's own `salt/syndic/<id>/start`.
 */
export interface SyndicEventLoad {
  cmd: '_syndic_event'
  id: string
  events: EventLoad[]
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const isStringList = (value: unknown): value is string[] => Array.isArray(value) && value.every((item) => typeof item === 'string')

/** Checks a `_syndic_return` load's shape (ids are checked by the master, which knows its minions). */
export function validateSyndicReturnLoad(value: unknown): SyndicReturnLoad {
  const fail = (field: string, problem: string): never => {
    throw new PayloadError('_syndic_return', field, problem)
  }
  if (!isMap(value)) return fail('(load)', 'must be a mapping')
  if (value['cmd'] !== '_syndic_return') fail('cmd', "must be '_syndic_return'")
  if (typeof value['id'] !== 'string' || value['id'] === '') fail('id', 'must be a non-empty string')
  const jobs = value['jobs']
  if (!Array.isArray(jobs)) return fail('jobs', 'must be a list')
  jobs.forEach((job: unknown, index) => {
    const at = `jobs[${index}]`
    if (!isMap(job)) return fail(at, 'must be a mapping')
    if (!isJid(job['jid'])) fail(`${at}.jid`, `must be a jid (YYYYMMDDhhmmssffffff), got ${JSON.stringify(job['jid'])?.slice(0, 40)}`)
    if (job['fun'] !== undefined && typeof job['fun'] !== 'string') fail(`${at}.fun`, 'must be a string')
    if (job['load'] !== undefined && !isMap(job['load'])) fail(`${at}.load`, 'must be a mapping')
    if (job['master_id'] !== undefined && typeof job['master_id'] !== 'string') fail(`${at}.master_id`, 'must be a string')
    if (job['minions'] !== undefined && !isStringList(job['minions'])) fail(`${at}.minions`, 'must be a list of strings')
    if (job['pending'] !== undefined && !isStringList(job['pending'])) fail(`${at}.pending`, 'must be a list of strings')
    const returns = job['returns']
    if (returns === undefined) return undefined
    if (!isMap(returns)) return fail(`${at}.returns`, 'must be a mapping of minion id to return')
    for (const [minion, ret] of Object.entries(returns)) {
      const where = `${at}.returns[${JSON.stringify(minion.slice(0, 80))}]`
      if (!isMap(ret)) fail(where, 'must be a mapping')
      const entry = ret as Record<string, unknown>
      if (!Object.hasOwn(entry, 'return')) fail(`${where}.return`, 'is required')
      if (typeof entry['retcode'] !== 'number' || !Number.isInteger(entry['retcode'])) fail(`${where}.retcode`, 'must be an integer')
      if (typeof entry['success'] !== 'boolean') fail(`${where}.success`, 'must be true or false')
      if (!Array.isArray(entry['fun_args'])) fail(`${where}.fun_args`, 'must be a list')
      if (entry['out'] !== undefined && typeof entry['out'] !== 'string') fail(`${where}.out`, 'must be a string')
    }
    return undefined
  })
  return value as unknown as SyndicReturnLoad
}

/** Checks a `_syndic_event` load. */
export function validateSyndicEventLoad(value: unknown): SyndicEventLoad {
  if (!isMap(value)) throw new PayloadError('_syndic_event', '(load)', 'must be a mapping')
  if (value['cmd'] !== '_syndic_event') throw new PayloadError('_syndic_event', 'cmd', "must be '_syndic_event'")
  if (typeof value['id'] !== 'string' || value['id'] === '') throw new PayloadError('_syndic_event', 'id', 'must be a non-empty string')
  if (!Array.isArray(value['events'])) throw new PayloadError('_syndic_event', 'events', 'must be a list')
  value['events'].forEach(validateEventLoad)
  return value as unknown as SyndicEventLoad
}

/**
 * A return event's data (or a stored `Result` entry) → its `_syndic_return` entry, through the one
 * event → return conversion. The wire needs a boolean `success`: one the source did not state is not a
 * failure (only `success: false` is). `funArgs` stands in for a source without `fun_args` (a stored entry).
 */
export function syndicReturnOf(data: Readonly<Record<string, unknown>>, funArgs?: unknown[]): SyndicMinionReturn {
  const ret = returnOfEvent(data)
  const entry: SyndicMinionReturn = { return: ret.return, retcode: ret.retcode, success: ret.success ?? true, fun_args: funArgs ?? ret.fun_args }
  if (ret.out !== undefined) entry.out = ret.out
  return entry
}
