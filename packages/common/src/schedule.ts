/**
 * Salt's schedule entries (`schedule:` in a minion's or master's config, `schedule.add` at run time), read
 * once into a typed {@link ScheduleEntry}, and when each runs next. Shared by the minion's scheduler
 * (execution functions) and the master's (runners).
 */
import { Cron } from 'croner'
import { ConfigError, scheduleIntervalMs, secondsToMs } from '@brine/config'
import { ScheduleError } from './errors.js'

/** One schedule entry, its times in ms. */
export interface ScheduleEntry {
  readonly name: string
  /** Salt's `function`: `test.ping` on a minion, `jobs.list_jobs` on the master. */
  readonly function: string
  readonly args: readonly unknown[]
  readonly kwargs: Readonly<Record<string, unknown>>
  /** `seconds` + `minutes` + `hours` + `days`, when set. */
  readonly intervalMs: number | undefined
  /** A five- or six-field cron expression, when set (never together with an interval). */
  readonly cron: string | undefined
  /** Each run is delayed by a random time in [start, end] ms (Salt's `splay`: a number, or `{start, end}`). */
  readonly splay: { readonly startMs: number; readonly endMs: number } | undefined
  /** How many runs of this entry may be running at once (Salt's default 1). */
  readonly maxrunning: number
  /** Send the result to the master's job cache as a return of its own jid (Salt's default true). */
  readonly returnJob: boolean
  readonly enabled: boolean
  /** Run once right after the scheduler starts (Salt's `run_on_start`), then on the interval. */
  readonly runOnStart: boolean
}

/** The entry keys Salt's schedule knows that Brine keeps when it persists and lists an entry. */
export const SCHEDULE_KEYS = [
  'function',
  'args',
  'kwargs',
  'job_args',
  'job_kwargs',
  'seconds',
  'minutes',
  'hours',
  'days',
  'cron',
  'splay',
  'maxrunning',
  'return_job',
  'enabled',
  'run_on_start',
] as const

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

function splayOf(name: string, value: unknown): ScheduleEntry['splay'] {
  if (value === undefined || value === null) return undefined
  try {
    if (typeof value === 'number') return { startMs: 0, endMs: secondsToMs(value, 'splay') }
    if (isMap(value)) return { startMs: secondsToMs(value['start'] ?? 0, 'splay.start'), endMs: secondsToMs(value['end'], 'splay.end') }
  } catch (error) {
    throw new ScheduleError(name, (error as ConfigError).message)
  }
  throw new ScheduleError(name, 'splay must be a number of seconds or {start, end}')
}

function cronOf(name: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'string') throw new ScheduleError(name, 'cron must be a string such as "*/5 * * * *"')
  try {
    new Cron(value, { paused: true })
  } catch (error) {
    throw new ScheduleError(name, `cron ${JSON.stringify(value.slice(0, 80))} is not a cron expression: ${(error as Error).message}`)
  }
  return value
}

function flag(name: string, entry: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const value = entry[key]
  if (value === undefined || value === null) return fallback
  if (typeof value !== 'boolean') throw new ScheduleError(name, `${key} must be true or false`)
  return value
}

/**
 * Reads entry `name` of a `schedule:` mapping. Salt's `when` (dateutil times) and `once` are not supported: an
 * entry needs an interval or `cron`, and either is a ScheduleError naming the entry, as is anything mistyped.
 */
export function parseScheduleEntry(name: string, raw: unknown): ScheduleEntry {
  if (!isMap(raw)) throw new ScheduleError(name, 'must be a mapping with at least function and an interval or cron')
  const fun = raw['function']
  if (typeof fun !== 'string' || !/^[A-Za-z_][\w]*\.[\w.]+$/.test(fun)) throw new ScheduleError(name, "function must be a name such as 'test.ping'")
  for (const unsupported of ['when', 'once', 'range'])
    if (raw[unsupported] !== undefined) throw new ScheduleError(name, `${unsupported} is not supported by Brine (use an interval or cron)`)
  let intervalMs: number | undefined
  try {
    intervalMs = scheduleIntervalMs(raw, name)
  } catch (error) {
    throw new ScheduleError(name, (error as ConfigError).message)
  }
  const cron = cronOf(name, raw['cron'])
  if (intervalMs === undefined && cron === undefined) throw new ScheduleError(name, 'needs seconds, minutes, hours, days or cron')
  if (intervalMs !== undefined && cron !== undefined) throw new ScheduleError(name, 'takes an interval or cron, not both')
  if (intervalMs !== undefined && intervalMs < 1000) throw new ScheduleError(name, 'the interval must be at least 1 second')
  // Salt reads `job_args` / `job_kwargs` (schedule.add's names) as well as `args` / `kwargs`.
  const args = raw['args'] ?? raw['job_args'] ?? []
  const kwargs = raw['kwargs'] ?? raw['job_kwargs'] ?? {}
  if (!Array.isArray(args)) throw new ScheduleError(name, 'args must be a list')
  if (!isMap(kwargs)) throw new ScheduleError(name, 'kwargs must be a mapping')
  const maxrunning = raw['maxrunning'] ?? 1
  if (typeof maxrunning !== 'number' || !Number.isInteger(maxrunning) || maxrunning < 1) throw new ScheduleError(name, 'maxrunning must be a positive integer')
  return {
    name,
    function: fun,
    args,
    kwargs,
    intervalMs,
    cron,
    splay: splayOf(name, raw['splay']),
    maxrunning,
    returnJob: flag(name, raw, 'return_job', true),
    enabled: flag(name, raw, 'enabled', true),
    runOnStart: flag(name, raw, 'run_on_start', false),
  }
}

/** The Salt keys of `raw` that Brine keeps (what `schedule.list` shows and what is persisted). */
export function scheduleEntryKeys(raw: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(SCHEDULE_KEYS.filter((key) => raw[key] !== undefined).map((key) => [key, raw[key]]))
}

/**
 * When `entry` runs next after `fromMs` (ms since the epoch): the next interval, or the cron expression's next
 * time (in the host's time zone, as Salt's croniter does), plus a random splay. Undefined when cron has no next time.
 */
export function nextScheduleRun(entry: ScheduleEntry, fromMs: number, random: () => number = Math.random): number | undefined {
  let at: number | undefined
  if (entry.cron !== undefined) at = new Cron(entry.cron, { paused: true }).nextRun(new Date(fromMs))?.getTime()
  else if (entry.intervalMs !== undefined) at = fromMs + entry.intervalMs
  if (at === undefined) return undefined
  const splay = entry.splay
  return splay === undefined ? at : at + splay.startMs + Math.floor(random() * Math.max(0, splay.endMs - splay.startMs))
}
