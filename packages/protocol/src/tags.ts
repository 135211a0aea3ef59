/**
 * Salt's event tags, built and parsed in this one place. A program written against Salt's
 * `iter_events` matches these strings, so their spelling is part of the protocol.
 */

/** `salt/auth`: a minion asked to authenticate (data: Salt's `{act, id, pub, result}`). */
export const AUTH_TAG = 'salt/auth'
/** `salt/key`: a key changed state (data: `{act, id, result}`). */
export const KEY_TAG = 'salt/key'
/**
 * `brine/bus/dropped` (data `{count}`): what a `MasterEvent` reader sees where the master's bus had to drop
 * events for its connection (its queue was full; the next event that reached it said how many). A reader
 * that must not miss returns (the syndic) reads the job cache back when it sees it. Not one of Salt's tags.
 */
export const BUS_DROPPED_TAG = 'brine/bus/dropped'
/** `minion_start`: the legacy start event every minion fires once. */
export const MINION_START_TAG = 'minion_start'

/** The prefix every job event shares; a reader of all job events matches on it. */
export const JOB_TAG_PREFIX = 'salt/job/'
/** The prefix of events a syndic forwarded (Salt's `syndic/<id>/<tag>`), its announcements among them. */
export const SYNDIC_TAG_PREFIX = 'syndic/'
/** What a reader of one job's returns on a master with syndics listens to: job events and syndic announcements. */
export const JOB_EVENT_PREFIXES: readonly string[] = [JOB_TAG_PREFIX, SYNDIC_TAG_PREFIX]

/** The longest event tag a peer may have written on the bus (Salt has no bound; 1024 is `fire_event`'s). */
export const MAX_TAG_LENGTH = 1024

/** C0 and C1 control characters and DEL: a newline or tab in a tag forges lines in `event.listen` and logs. */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/

/**
 * Why `tag` cannot be an event tag a peer influences (a minion's or syndic's event, a webhook path), or
 * undefined when it can: a non-empty string of at most {@link MAX_TAG_LENGTH} characters, printable (no
 * control character, no line or paragraph separator).
 */
export function tagProblem(tag: unknown): string | undefined {
  if (typeof tag !== 'string' || tag === '') return 'must be a non-empty string'
  if (tag.length > MAX_TAG_LENGTH) return `is ${tag.length} characters long, over ${MAX_TAG_LENGTH}`
  const control = CONTROL_CHARACTER.exec(tag)
  if (control !== null)
    return `holds the control character U+${control[0].charCodeAt(0).toString(16).padStart(4, '0').toUpperCase()} at ${control.index} (tags are printable text)`
  return undefined
}

export const tags = {
  /** `salt/job/<jid>/new`: the master published a job (data carries `minions`). */
  jobNew: (jid: string): string => `salt/job/${jid}/new`,
  /** `salt/job/<jid>/ret/<id>`: one minion's return. */
  jobReturn: (jid: string, id: string): string => `salt/job/${jid}/ret/${id}`,
  /** `salt/job/<jid>/ret/`: what every return of one job starts with. */
  jobReturnPrefix: (jid: string): string => `salt/job/${jid}/ret/`,
  /** `salt/run/<jid>/new` and `salt/run/<jid>/ret`: a runner started and finished. */
  runNew: (jid: string): string => `salt/run/${jid}/new`,
  runReturn: (jid: string): string => `salt/run/${jid}/ret`,
  runProgress: (jid: string): string => `salt/run/${jid}/progress`,
  /** `salt/run/<jid>`: the tag runner_async answers with (Salt's `{tag, jid}`). */
  run: (jid: string): string => `salt/run/${jid}`,
  /** `salt/wheel/<jid>/new` and `salt/wheel/<jid>/ret`: a wheel function started and finished. */
  wheelNew: (jid: string): string => `salt/wheel/${jid}/new`,
  wheelReturn: (jid: string): string => `salt/wheel/${jid}/ret`,
  /** `salt/wheel/<jid>`: the tag of a wheel call's answer (Salt's `{tag, data}`). */
  wheel: (jid: string): string => `salt/wheel/${jid}`,
  /** `salt/netapi/hook/<path>`: what the REST API's webhook fires (`<path>` without leading or trailing slashes). */
  netapiHook: (path: string): string => (path === '' ? 'salt/netapi/hook' : `salt/netapi/hook/${path}`),
  /** `salt/minion/<id>/start`: a minion started. */
  minionStart: (id: string): string => `salt/minion/${id}/start`,
  /** `salt/minion/<id>/`: the only tags (besides `minion_start`) a minion may fire on the master's bus. */
  minionPrefix: (id: string): string => `salt/minion/${id}/`,
  /** `salt/syndic/<id>/start`: a syndic connected to this master (Salt's syndic start event). */
  syndicStart: (id: string): string => `salt/syndic/${id}/start`,
  /** `syndic/<id>/<tag>`: an event of syndic `id`'s master, forwarded up. */
  syndicEvent: (id: string, tag: string): string => `${SYNDIC_TAG_PREFIX}${id}/${tag}`,
  /** `syndic/<id>/salt/job/<jid>/new`: syndic `id` announced the minions it answers for in job `jid`. */
  syndicJobNew: (id: string, jid: string): string => `${SYNDIC_TAG_PREFIX}${id}/salt/job/${jid}/new`,
  auth: AUTH_TAG,
  key: KEY_TAG,
  minionStartLegacy: MINION_START_TAG,
} as const

/** A job event's tag, taken apart. */
export type JobTag = { kind: 'new'; jid: string } | { kind: 'ret'; jid: string; id: string }

const JOB_TAG = /^salt\/job\/([^/]+)\/(?:(new)|ret\/(.+))$/

/** `salt/job/<jid>/new` or `salt/job/<jid>/ret/<id>` → its parts; undefined for any other tag. */
export function parseJobTag(tag: string): JobTag | undefined {
  if (!tag.startsWith(JOB_TAG_PREFIX)) return undefined
  const match = JOB_TAG.exec(tag)
  if (match === null) return undefined
  const jid = match[1] as string
  return match[2] === 'new' ? { kind: 'new', jid } : { kind: 'ret', jid, id: match[3] as string }
}

/** `salt/job/<jid>/ret/<id>` → `{jid, id}`; undefined for any other tag. */
export function parseJobReturnTag(tag: string): { jid: string; id: string } | undefined {
  const parsed = parseJobTag(tag)
  return parsed?.kind === 'ret' ? { jid: parsed.jid, id: parsed.id } : undefined
}

/**
 * The jid a job event is about, found without a regex (a bus reader filters every event with it):
 * `salt/job/<jid>/…` or a syndic's `syndic/<id>/salt/job/<jid>/…`; undefined for any other tag.
 */
export function jobEventJid(tag: string): string | undefined {
  let start: number
  if (tag.startsWith(JOB_TAG_PREFIX)) start = JOB_TAG_PREFIX.length
  else {
    const parsed = parseSyndicTag(tag)
    if (parsed === undefined || !parsed.tag.startsWith(JOB_TAG_PREFIX)) return undefined
    start = tag.length - parsed.tag.length + JOB_TAG_PREFIX.length
  }
  const end = tag.indexOf('/', start)
  return end > start ? tag.slice(start, end) : undefined
}

/** True when a minion `id` may fire `tag` on the master's bus (its own `salt/minion/<id>/…` or `minion_start`). */
export function isMinionOwnTag(id: string, tag: string): boolean {
  return tag === MINION_START_TAG || tag.startsWith(tags.minionPrefix(id))
}

/** `syndic/<id>/<rest>` → its parts; undefined for any other tag (syndic ids, like minion ids, hold no `/`). */
export function parseSyndicTag(tag: string): { syndic: string; tag: string } | undefined {
  if (!tag.startsWith(SYNDIC_TAG_PREFIX)) return undefined
  const slash = tag.indexOf('/', SYNDIC_TAG_PREFIX.length)
  if (slash <= SYNDIC_TAG_PREFIX.length) return undefined
  return { syndic: tag.slice(SYNDIC_TAG_PREFIX.length, slash), tag: tag.slice(slash + 1) }
}

/** A syndic's announcement event (`syndic/<id>/salt/job/<jid>/new` with `minions`) → its parts; undefined otherwise. */
export function parseSyndicAnnouncement(event: { tag: string; data: Record<string, unknown> }): SyndicAnnouncementParts | undefined {
  const parsed = parseSyndicTag(event.tag)
  if (parsed === undefined) return undefined
  const inner = parseJobTag(parsed.tag)
  if (inner?.kind !== 'new') return undefined
  const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [])
  return { syndic: parsed.syndic, jid: inner.jid, minions: strings(event.data['minions']), pending: strings(event.data['syndic_pending']) }
}

/** What {@link parseSyndicAnnouncement} gives. */
export interface SyndicAnnouncementParts {
  syndic: string
  jid: string
  minions: string[]
  /** Lower syndics the announcing syndic still waits for (`syndic_pending`); empty when its subtree is complete. */
  pending: string[]
}
