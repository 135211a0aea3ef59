import { join } from 'node:path'
import { BrineError, registerErrors } from '@brine/core'

/** One event on the master's bus, as Salt's `iter_events` yields it. */
export interface BusEvent {
  tag: string
  data: Record<string, unknown> & { _stamp?: string }
}

let stampedAt = Number.NaN
let stampText = ''

/**
 * An event's `_stamp`: the time as ISO 8601, the same text for every event of one millisecond (a busy master
 * stamps thousands of events a second, and formatting a date is most of what stamping one costs).
 */
export function eventStamp(now: number = Date.now()): string {
  if (now !== stampedAt) {
    stampedAt = now
    stampText = new Date(now).toISOString()
  }
  return stampText
}

/** File name of the master's event bus socket under sock_dir (Salt's name). */
export const EVENT_BUS_SOCKET = 'master_event_pub.ipc'

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
export const MAX_UNIX_SOCKET_PATH = 107

export function eventBusPath(sockDir: string): string {
  return join(sockDir, EVENT_BUS_SOCKET)
}

/**
 * The master's local request channel for `transport` under sock_dir: the same request handler as
 * `ret_port`, on a unix socket only the master's user can open, so no remote peer can fill it. The
 * local client (CLI, LocalClient, runner and wheel clients) uses it when it exists.
 */
export function localRequestPath(sockDir: string, transport: string): string {
  return join(sockDir, `ret_${transport}.ipc`)
}

/** Patterns one bus subscription may name (its frame is bounded by the bus's 1 KiB too). */
export const MAX_BUS_PATTERNS = 16

/** Characters in one bus tag pattern. */
export const MAX_BUS_PATTERN_LENGTH = 256

/** A bus subscription a reader sent that is not a list of tag patterns as docs/protocol.md describes them. */
export class BusSubscriptionError extends BrineError {
  override name = 'BusSubscriptionError'
  constructor(problem: string) {
    super(`bus subscription refused: ${problem}`, { problem })
  }
}

registerErrors({ BusSubscriptionError })

/**
 * What a reader of the bus sends to receive only some events: `{subscribe: [pattern, …]}`. A pattern is
 * a tag prefix in which a whole segment `*` stands for any one segment: `salt/job/`, then `*`, then
 * `/ret/` takes every job's returns and not their `new` events. A reader that sends none receives every event.
 */
export interface BusSubscription {
  subscribe: string[]
}

/** The patterns of a subscription frame's value, checked; throws {@link BusSubscriptionError} naming what is wrong. */
export function parseBusSubscription(value: unknown): string[] {
  const patterns = typeof value === 'object' && value !== null ? (value as { subscribe?: unknown }).subscribe : undefined
  if (!Array.isArray(patterns)) throw new BusSubscriptionError('expected {subscribe: [tag pattern, …]}')
  if (patterns.length === 0 || patterns.length > MAX_BUS_PATTERNS) {
    throw new BusSubscriptionError(`${patterns.length} patterns; 1 to ${MAX_BUS_PATTERNS} are allowed`)
  }
  for (const pattern of patterns) checkBusPattern(pattern)
  return patterns as string[]
}

function checkBusPattern(pattern: unknown): asserts pattern is string {
  if (typeof pattern !== 'string') throw new BusSubscriptionError(`a pattern is a ${typeof pattern}, not a string`)
  if (pattern.length > MAX_BUS_PATTERN_LENGTH) throw new BusSubscriptionError(`a pattern of ${pattern.length} characters exceeds ${MAX_BUS_PATTERN_LENGTH}`)
  const segments = pattern.split('/')
  if (segments.some((segment) => segment !== '*' && segment.includes('*'))) {
    throw new BusSubscriptionError(`pattern ${JSON.stringify(pattern)}: '*' stands only for a whole segment`)
  }
}

/**
 * One test of a tag against every pattern (checked with {@link parseBusSubscription}): true when the tag
 * starts with one of them, a `*` segment taking any one non-empty segment. The bus runs it on every event
 * for every subscriber that narrowed what it reads, so it splits each pattern once, here.
 */
export function busTagMatcher(patterns: readonly string[]): (tag: string) => boolean {
  const compiled = patterns.map((pattern) => pattern.split('*'))
  return (tag) => compiled.some((pieces) => matchesPieces(tag, pieces))
}

/** `pieces`: a pattern split at its `*` segments; each `*` takes the tag's text up to the next '/'. */
function matchesPieces(tag: string, pieces: readonly string[]): boolean {
  const first = pieces[0]!
  if (!tag.startsWith(first)) return false
  let position = first.length
  for (let i = 1; i < pieces.length; i++) {
    let end = tag.indexOf('/', position)
    if (end === -1) end = tag.length
    if (end === position) return false
    const piece = pieces[i]!
    if (!tag.startsWith(piece, end)) return false
    position = end + piece.length
  }
  return true
}
