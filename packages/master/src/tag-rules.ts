import { isMinionOwnTag, JOB_TAG_PREFIX, tags } from '@brine/common'

/** Longest tag anyone but the master itself may fire. */
export const MAX_TAG_CHARS = 1024

/**
 * Why `tag` may not be fired by a caller of the master (the root key's `fire_event`, the `event.send` runner, a
 * reaction), or undefined when it may: job tags and minion tags are the master's and its minions' own, so nobody
 * can forge a return or a minion's start. What a minion may fire is {@link minionTagProblem}.
 */
export function callerTagProblem(tag: unknown): string | undefined {
  if (typeof tag !== 'string' || tag === '' || tag.length > MAX_TAG_CHARS) return `a tag must be a non-empty string of at most ${MAX_TAG_CHARS} characters`
  if (tag.startsWith(JOB_TAG_PREFIX) || tag.startsWith('salt/minion/') || tag === tags.minionStartLegacy) return `tag ${JSON.stringify(tag.slice(0, 120))} is reserved for the master and its minions`
  return undefined
}

/** Why minion `id` may not fire `tag`, or undefined when it may: only `minion_start` and tags under `salt/minion/<id>/`. */
export function minionTagProblem(id: string, tag: string): string | undefined {
  return isMinionOwnTag(id, tag) ? undefined : `minion ${JSON.stringify(id)} may only fire minion_start or tags under ${tags.minionPrefix(id)}, not ${JSON.stringify(tag.slice(0, 120))}`
}
