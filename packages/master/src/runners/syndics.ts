import { isValidMinionId } from '@brine/crypt'
import { MalformedRequestError } from '@brine/protocol'
import { param, requiredString, type RunnerArgs, type RunnerContext, type RunnerFunction } from './context.js'

/** `syndics.list`: each syndic this master knows, with the minions pinned to it (docs/security.md). */
async function list(_args: RunnerArgs, context: RunnerContext): Promise<Record<string, { syndic_key: boolean; minions: string[] }>> {
  const out: Record<string, { syndic_key: boolean; minions: string[] }> = {}
  for (const id of context.syndics.ids().sort()) {
    out[id] = { syndic_key: await context.store.isSyndic(id), minions: [...context.syndics.minionsOf(id)].sort() }
  }
  return out
}

/** Minion ids from a list or a comma-separated string; each must be a valid id. */
function minionIds(value: unknown): string[] {
  const ids = typeof value === 'string' ? value.split(',').map((id) => id.trim()) : value
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === 'string' && isValidMinionId(id))) {
    throw new MalformedRequestError('runner syndics.move arguments', "'minions' must be minion ids (a list, or a string separated by commas)")
  }
  return [...new Set(ids as string[])]
}

/**
 * `syndics.move minions=web1,web2 syndic=syn2`: the operator's word that these minions now sit behind
 * syndic `syn2` (its key must be accepted as a syndic's): they are pinned to it, and the syndic they
 * were pinned to may no longer answer for them. Returns, per minion, where it was pinned and where it is now.
 */
async function move(args: RunnerArgs, context: RunnerContext): Promise<Record<string, { from: string | null; to: string }>> {
  const minions = minionIds(param(args, 0, 'minions'))
  const to = requiredString(args, 1, 'syndic', 'syndics.move')
  if (!(await context.store.isSyndic(to))) {
    throw new MalformedRequestError(
      'runner syndics.move arguments',
      `${JSON.stringify(to.slice(0, 80))} is not accepted as a syndic on this master (brine-key --accept-syndic)`,
    )
  }
  const moved = context.syndics.move(minions, to)
  context.logger.info(`syndics.move: ${minions.length} minion(s) pinned to syndic ${to}`)
  return Object.fromEntries(Object.entries(moved).map(([minion, from]) => [minion, { from, to }]))
}

export const SYNDICS_RUNNERS: Record<string, RunnerFunction> = {
  'syndics.list': list,
  'syndics.move': move,
}
