import { LruMap } from '@brine/core'
import { JidError } from './errors.js'

/**
 * Job ids in Salt's format, `YYYYMMDDhhmmssffffff` (20 digits down to the microsecond).
 * Brine uses UTC, not Salt's local time, so jids sort the same on every master of a tree
 * whatever its time zone. Salt's `unique_jid` suffix (`_<pid>`) is accepted when parsing.
 */

const JID_PATTERN = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{6})(?:_.+)?$/

export interface JidGenerator {
  /**
   * A new jid for `now` (default: the current time, with microseconds), strictly greater than the last.
   * `unique` (Salt's `unique_jid`) appends `_<pid>`, so masters sharing a job cache never collide.
   */
  (now?: Date, options?: JidOptions): string
}

export interface JidOptions {
  /** Salt's `unique_jid`: append `_<pid>` to the jid. */
  unique?: boolean
}

const suffixed = (jid: string, options: JidOptions | undefined): string => (options?.unique === true ? `${jid}_${process.pid}` : jid)

/**
 * A monotonic generator: if the clock would give the same (or an earlier) microsecond as the
 * previous jid, the new one is the previous plus one microsecond, so jids never repeat.
 * Without `shared` that holds within one thread. Master workers (worker_threads) each load their
 * own copy of this module, so pass them one {@link createJidState} buffer (e.g. via workerData):
 * the last jid then lives in shared memory, updated with a compare-and-swap.
 */
export function createJidGenerator(shared?: SharedArrayBuffer): JidGenerator {
  const cell = shared === undefined ? undefined : new BigInt64Array(shared, 0, 1)
  let last = 0
  return (now?: Date, options?: JidOptions): string => {
    const micros = now === undefined ? Math.floor((performance.timeOrigin + performance.now()) * 1000) : now.getTime() * 1000
    if (cell === undefined) {
      last = micros > last ? micros : last + 1
      return suffixed(formatMicros(last), options)
    }
    const candidate = BigInt(micros)
    for (;;) {
      const previous = Atomics.load(cell, 0)
      const next = candidate > previous ? candidate : previous + 1n
      if (Atomics.compareExchange(cell, 0, previous, next) === previous) return suffixed(formatMicros(Number(next)), options)
    }
  }
}

/** Shared state for generators in several worker threads of one process. */
export function createJidState(): SharedArrayBuffer {
  return new SharedArrayBuffer(8)
}

const defaultGenerator = createJidGenerator()

/** A new jid from this process's monotonic generator. */
export function generateJid(now?: Date, options?: JidOptions): string {
  return defaultGenerator(now, options)
}

function formatMicros(micros: number): string {
  const date = new Date(Math.floor(micros / 1000))
  const pad = (value: number, width = 2): string => String(value).padStart(width, '0')
  return (
    pad(date.getUTCFullYear(), 4) +
    pad(date.getUTCMonth() + 1) +
    pad(date.getUTCDate()) +
    pad(date.getUTCHours()) +
    pad(date.getUTCMinutes()) +
    pad(date.getUTCSeconds()) +
    pad(micros % 1_000_000, 6)
  )
}

export interface ParsedJid {
  /** The jid's time, to the millisecond (UTC). */
  date: Date
  /** Microseconds within the second, 0..999999. */
  microsecond: number
}

/** Splits a jid into its time; throws JidError for anything that is not a real date in Salt's format. */
export function parseJid(jid: string): ParsedJid {
  const match = JID_PATTERN.exec(jid)
  if (match === null) throw new JidError(jid, 'expected 20 digits, YYYYMMDDhhmmssffffff')
  const [year, month, day, hour, minute, second, micro] = match.slice(1).map(Number) as [number, number, number, number, number, number, number]
  const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second, Math.floor(micro / 1000)))
  // Date.UTC rolls 2024-02-30 over into March; a round trip catches it.
  if (
    date.getUTCFullYear() !== year ||
    date.getUTCMonth() !== month - 1 ||
    date.getUTCDate() !== day ||
    date.getUTCHours() !== hour ||
    date.getUTCMinutes() !== minute ||
    date.getUTCSeconds() !== second
  ) {
    throw new JidError(jid, 'not a valid date and time')
  }
  return { date, microsecond: micro }
}

/** Jids found valid lately: every return of a job carries the same jid, and each is checked on the way in. */
const validJids = new LruMap<string, true>(256)

/** True for a string in Salt's jid format that names a real time. */
export function isJid(value: unknown): value is string {
  if (typeof value !== 'string') return false
  // has(), not get(): a hit needs no reordering (the jids of live jobs are the newest entries anyway).
  if (validJids.has(value)) return true
  try {
    parseJid(value)
  } catch {
    return false
  }
  validJids.set(value, true)
  return true
}

/** The jid {@link jidMillis} parsed last, and its time: a job's publish and each of its returns ask for the same jid. */
let lastJid: string | undefined
let lastJidMillis = 0

/** The jid's time, ms since the epoch (UTC); throws JidError as {@link parseJid} does. */
export function jidMillis(jid: string): number {
  if (jid === lastJid) return lastJidMillis
  const time = parseJid(jid).date.getTime()
  lastJid = jid
  lastJidMillis = time
  return time
}

/** The jid's time as a Date (millisecond precision, UTC). */
export function jidToDate(jid: string): Date {
  return new Date(jidMillis(jid))
}

/*
 * Salt's own helpers (salt.utils.jid), for Node programs that handle jids from Salt or from Brine. They
 * are looser than {@link isJid}: Salt checks the length and that the first 20 characters parse as a
 * Python int, not that they name a real time. The master keeps {@link isJid} where a jid crosses the
 * wire, because a jid there opens a job-cache entry and is compared with the master's clock.
 */

const SALT_MONTHS = ['', 'Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const

/** Python's `int(text)` accepts this: surrounding blanks, a sign, digits with single `_` between them. */
const PYTHON_INT = /^\s*[+-]?\p{Nd}+(?:_\p{Nd}+)*\s*$/u

/** Salt's length rule, in code points as Python counts: 20, or more with `_` as the 21st and something after it. */
const saltJidShape = (points: readonly string[]): boolean => points.length === 20 || (points.length > 21 && points[20] === '_')

/** Salt's `is_jid`: a string of Salt's jid length whose first 20 characters Python's `int()` reads. */
export function isSaltJid(value: unknown): value is string {
  if (typeof value !== 'string') return false
  const points = Array.from(value)
  return saltJidShape(points) && PYTHON_INT.test(points.slice(0, 20).join(''))
}

/**
 * Salt's `jid_to_time`: "2013, Dec 19 11:07:00.123489" from the jid's digits (a number is read as its
 * decimal text, as Salt's `str(jid)` does), and `''` for anything that is not shaped like a jid —
 * where Salt would raise on a month outside 00–12, this answers `''` too.
 */
export function jidToTime(value: unknown): string {
  const text = String(value)
  if (!saltJidShape(Array.from(text)) || !/^\d{20}/.test(text)) return ''
  const month = SALT_MONTHS[Number(text.slice(4, 6))]
  if (month === undefined) return ''
  const [year, day, hour, minute, second, micro] = [
    text.slice(0, 4),
    text.slice(6, 8),
    text.slice(8, 10),
    text.slice(10, 12),
    text.slice(12, 14),
    text.slice(14, 20),
  ]
  return `${year}, ${month} ${day} ${hour}:${minute}:${second}.${micro}`
}
