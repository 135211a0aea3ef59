import { isMinionOwnTag, JOB_TAG_PREFIX, tagProblem, tags } from '@brine/protocol'

/**
 * Why `tag` may not be fired by a caller of the master (the root key's `fire_event`, the `event.send` runner, a
 * reaction), or undefined when it may. What any tag must be (printable, bounded) is @brine/protocol's
 * {@link tagProblem}, the one rule every door shares; on top of it, job tags and minion tags are the master's and
 * its minions' own, so nobody can forge a return or a minion's start. What a minion may fire is
 * {@link minionTagProblem}.
 */
export function callerTagProblem(tag: unknown): string | undefined {
  const shape = tagProblem(tag)
  if (shape !== undefined || typeof tag !== 'string') return `tag ${shape ?? 'must be a string'}`
  if (tag.startsWith(JOB_TAG_PREFIX) || tag.startsWith('salt/minion/') || tag === tags.minionStartLegacy)
    return `tag ${JSON.stringify(tag.slice(0, 120))} is reserved for the master and its minions`
  return undefined
}

/**
 * Why minion `id` may not fire `tag`, or undefined when it may: only `minion_start` and tags under
 * `salt/minion/<id>/`. The tag's shape was checked with the rest of the event load (tagProblem).
 */
export function minionTagProblem(id: string, tag: string): string | undefined {
  return isMinionOwnTag(id, tag)
    ? undefined
    : `minion ${JSON.stringify(id)} may only fire minion_start or tags under ${tags.minionPrefix(id)}, not ${JSON.stringify(tag.slice(0, 120))}`
}
