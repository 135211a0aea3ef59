/**
 * Salt's event tags, built and parsed in this one place. A program written against Salt's
 * `iter_events` matches these strings, so their spelling is part of the protocol.
 */

/** `salt/auth`: a minion asked to authenticate (data: Salt's `{act, id, pub, result}`). */
export const AUTH_TAG = 'salt/auth'
/** `salt/key`: a key changed state (data: `{act, id, result}`). */
export const KEY_TAG = 'salt/key'
/** `minion_start`: the legacy start event every minion fires once. */
export const MINION_START_TAG = 'minion_start'

/** The prefix every job event shares; a reader of all job events matches on it. */
export const JOB_TAG_PREFIX = 'salt/job/'

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

/** True when a minion `id` may fire `tag` on the master's bus (its own `salt/minion/<id>/…` or `minion_start`). */
export function isMinionOwnTag(id: string, tag: string): boolean {
  return tag === MINION_START_TAG || tag.startsWith(tags.minionPrefix(id))
}
