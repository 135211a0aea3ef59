import { isDeepStrictEqual } from 'node:util'
import { storedReturnsOf, type ListJobsFilter } from '@brine/common'
import { jidToTime, parseJid, type ReturnLoad } from '@brine/protocol'
import { MalformedRequestError } from '@brine/protocol'
import { flag, param, requiredString, waitsOf, type RunnerArgs, type RunnerContext, type RunnerFunction } from './context.js'

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const

export { jidToTime }

/**
 * A `start_time`/`end_time` argument: Salt's "2026, Nov 22 17:09[:03[.123456]]", a jid, or ISO 8601.
 * Times without a zone are UTC, like jids.
 */
export function parseTimeArgument(value: unknown, name: string): Date {
  const text = String(value).trim()
  const salt = /^(\d{4}), ([A-Za-z]{3}) (\d{1,2}) (\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?$/.exec(text)
  if (salt !== null) {
    const month = MONTHS.findIndex((name) => name.toLowerCase() === salt[2]!.toLowerCase())
    if (month >= 0) {
      const micros = Number((salt[7] ?? '0').padEnd(6, '0'))
      return new Date(Date.UTC(Number(salt[1]), month, Number(salt[3]), Number(salt[4]), Number(salt[5]), Number(salt[6] ?? 0), Math.floor(micros / 1000)))
    }
  }
  if (/^\d{20}$/.test(text)) return parseJid(text).date
  const zoned = /(?:[zZ]|[+-]\d{2}:?\d{2})$/.test(text) || /^\d{4}-\d{2}-\d{2}$/.test(text)
  const parsed = Date.parse(zoned ? text : `${text.replace(' ', 'T')}Z`)
  if (Number.isNaN(parsed)) {
    throw new MalformedRequestError(
      'runner jobs.list_jobs arguments',
      `'${name}' is not a time: ${JSON.stringify(text)} (use "2026, Nov 22 17:09", ISO 8601 or a jid)`,
    )
  }
  return new Date(parsed)
}

/** Salt's `_format_job_instance` + StartTime: how jobs.* runners describe one job. */
export function formatJob(jid: string, load: Record<string, unknown>): Record<string, unknown> {
  const arg = Array.isArray(load['arg']) ? [...(load['arg'] as unknown[])] : []
  const kwarg = load['kwarg']
  // Salt packs keyword arguments into the arg list as one dict flagged __kwarg__.
  if (typeof kwarg === 'object' && kwarg !== null && !Array.isArray(kwarg) && Object.keys(kwarg).length > 0) arg.push({ ...kwarg, __kwarg__: true })
  const out: Record<string, unknown> = {
    Function: load['fun'] ?? 'unknown-function',
    Arguments: arg,
    Target: load['tgt'] ?? 'unknown-target',
    'Target-type': load['tgt_type'] ?? [],
    User: load['user'] ?? 'root',
  }
  if (load['metadata'] !== undefined) out['Metadata'] = load['metadata']
  out['StartTime'] = jidToTime(jid)
  return out
}

/** jobs.lookup_jid: `{id: return}`; `missing=True` adds the expected minions that never returned. */
async function lookupJid(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const jid = requiredString(args, 0, 'jid', 'jobs.lookup_jid')
  const job = await context.jobs.getJob(jid)
  if (job === undefined) return {}
  const returned = param(args, 2, 'returned') === undefined ? true : flag(args, 2, 'returned')
  const out: Record<string, unknown> = {}
  if (returned) for (const [id, ret] of Object.entries(job.returns)) out[id] = ret.return
  if (flag(args, 3, 'missing')) {
    for (const id of job.minions) if (!Object.hasOwn(job.returns, id)) out[id] = 'Minion did not return'
  }
  // Salt: the first return's outputter hint travels with the data (highstate output for state runs).
  const first: ReturnLoad | undefined = Object.values(job.returns)[0]
  return first?.out === undefined ? out : { outputter: first.out, data: out }
}

function globs(value: unknown): string[] | undefined {
  if (value === undefined || value === null || value === '') return undefined
  if (Array.isArray(value)) return value.map(String)
  return [String(value)]
}

/** jobs.list_jobs: `{jid: {Function, Arguments, Target, Target-type, User, StartTime, Metadata?}}`, filtered as Salt filters. */
async function listJobs(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const base: ListJobsFilter = {}
  const start = param(args, 5, 'start_time')
  const end = param(args, 6, 'end_time')
  if (start !== undefined && start !== null && start !== '') base.startTime = parseTimeArgument(start, 'start_time')
  if (end !== undefined && end !== null && end !== '') base.endTime = parseTimeArgument(end, 'end_time')
  const metadata = param(args, 2, 'search_metadata')
  const funs = globs(param(args, 3, 'search_function')) ?? [undefined]
  const targets = globs(param(args, 4, 'search_target')) ?? [undefined]
  // A list of globs matches any of them (Salt's fnmatch loop): one query per combination.
  const found = new Map<string, Record<string, unknown>>()
  for (const fun of funs) {
    for (const target of targets) {
      const filter: ListJobsFilter = { ...base }
      if (fun !== undefined) filter.fun = fun
      if (target !== undefined) filter.target = target
      for (const summary of await context.jobs.listJobs(filter)) {
        if (metadataMatches(summary.load['metadata'], metadata)) found.set(summary.jid, summary.load)
      }
    }
  }
  const out: Record<string, unknown> = {}
  for (const jid of [...found.keys()].sort()) out[jid] = formatJob(jid, found.get(jid)!)
  return out
}

/** jobs.print_job: `{jid: {...formatJob, Minions, Result: {id: {return, retcode, success, out?}}}}` (Salt's get_jid shape); `{}` for an unknown jid. */
async function printJob(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const jid = requiredString(args, 0, 'jid', 'jobs.print_job')
  const job = await context.jobs.getJob(jid)
  if (job === undefined) return {}
  return { [jid]: { ...formatJob(jid, job.load), Minions: [...job.minions].sort(), Result: storedReturnsOf(job) } }
}

/**
 * jobs.list_job: one job's description with its Result, `{id: {return, retcode, success, out?}}` (Salt's shape,
 * the jid inside). The local client's return collector reads returns the bus dropped through it.
 */
async function listJob(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const jid = requiredString(args, 0, 'jid', 'jobs.list_job')
  const job = await context.jobs.getJob(jid)
  if (job === undefined) return { jid }
  return { jid, ...formatJob(jid, job.load), Minions: [...job.minions].sort(), Result: storedReturnsOf(job) }
}

/**
 * jobs.exit_success: `{id: bool}` for each expected or returning minion: true when its return is truthy
 * (Salt's rule: the return itself, not retcode), false when it returned nothing truthy or never returned.
 */
async function exitSuccess(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const jid = requiredString(args, 0, 'jid', 'jobs.exit_success')
  const job = await context.jobs.getJob(jid)
  if (job === undefined) return {}
  const out: Record<string, boolean> = {}
  for (const id of job.minions) out[id] = false
  for (const [id, ret] of Object.entries(job.returns)) out[id] = pythonTruthy(ret.return)
  return out
}

/** Python's truth value of a decoded return: empty strings, lists, mappings, 0, false and None are false. */
function pythonTruthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === '') return false
  if (Array.isArray(value)) return value.length > 0
  if (typeof value === 'object') return Object.keys(value).length > 0
  return true
}

/**
 * jobs.last_run: print_job of the newest job list_jobs finds with the same filters (`function`, `target`,
 * `metadata` as `search_metadata`), false when none matches or `metadata` is not a mapping (Salt's answer).
 */
async function lastRun(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const metadata = param(args, 2, 'metadata')
  if (pythonTruthy(metadata) && !isMapping(metadata)) return false
  const kwarg: Record<string, unknown> = {}
  const fun = param(args, 3, 'function')
  const target = param(args, 4, 'target')
  if (metadata !== undefined) kwarg['search_metadata'] = metadata
  if (fun !== undefined && fun !== null) kwarg['search_function'] = fun
  if (target !== undefined && target !== null) kwarg['search_target'] = target
  const jobs = (await listJobs({ arg: [], kwarg }, context)) as Record<string, unknown>
  const last = Object.keys(jobs).sort().at(-1)
  return last === undefined ? false : printJob({ arg: [last], kwarg: {} }, context)
}

const isMapping = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Salt's search_metadata: a job matches when any key given is in its metadata with an equal value. No
 * filter when it is empty (None, `{}`, ''); one that is not a mapping matches nothing (Salt logs and finds none).
 */
function metadataMatches(jobMetadata: unknown, wanted: unknown): boolean {
  if (!pythonTruthy(wanted)) return true
  if (!isMapping(wanted) || !isMapping(jobMetadata)) return false
  return Object.entries(wanted).some(([key, value]) => Object.hasOwn(jobMetadata, key) && isDeepStrictEqual(jobMetadata[key], value))
}

/**
 * jobs.active: asks every minion `saltutil.running` (waiting `timeout`) and reports each job still
 * running somewhere: `{jid: {...formatJob, Running: [{id: pid}], Returned: [ids]}}`.
 */
async function active(args: RunnerArgs, context: RunnerContext): Promise<unknown> {
  const gathered = await context.gather('*', 'saltutil.running', [], waitsOf(args, context, 'jobs.active'))
  const out: Record<string, Record<string, unknown> & { Running: Array<Record<string, unknown>>; Returned: string[] }> = {}
  for (const id of [...gathered.returns.keys()].sort()) {
    const running = gathered.returns.get(id)!.ret
    if (!Array.isArray(running)) continue
    for (const item of running as Array<Record<string, unknown>>) {
      const jid = item?.['jid']
      if (typeof jid !== 'string') continue
      let entry = out[jid]
      if (entry === undefined) {
        if (jidToTime(jid) === '') continue // not a jid we can date
        entry = { ...formatJob(jid, item), Running: [], Returned: [] }
        out[jid] = entry
      }
      entry.Running.push({ [id]: item['pid'] ?? null })
    }
  }
  for (const [jid, entry] of Object.entries(out)) {
    const job = await context.jobs.getJob(jid)
    if (job !== undefined) entry.Returned = Object.keys(job.returns).sort()
  }
  return out
}

export const JOBS_RUNNERS: Record<string, RunnerFunction> = {
  'jobs.lookup_jid': lookupJid,
  'jobs.list_jobs': listJobs,
  'jobs.list_job': listJob,
  'jobs.print_job': printJob,
  'jobs.active': active,
  'jobs.exit_success': exitSuccess,
  'jobs.last_run': lastRun,
}
