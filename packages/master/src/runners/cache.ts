import type { TargetType } from '@brine/protocol'
import { MalformedRequestError } from '@brine/protocol'
import { param, type RunnerFunction } from './context.js'

/**
 * cache.grains: `{id: grains}` from the master's grains cache for the minions `tgt` selects (Salt 3006
 * requires `tgt`); a selected minion whose grains the master has not cached is left out. Nothing is sent.
 */
const grains: RunnerFunction = async (args, context) => {
  const tgt = param(args, 0, 'tgt')
  if (typeof tgt !== 'string' && !Array.isArray(tgt)) throw new MalformedRequestError('runner cache.grains arguments', "'tgt' is required (a target, e.g. '*')")
  const tgtType = String(param(args, 1, 'tgt_type') ?? 'glob') as TargetType
  const out: Record<string, unknown> = {}
  await context.grains.whenLoaded()
  for (const id of (await context.select(tgt as string | string[], tgtType)).sort()) {
    const cached = context.grains.get(id)
    if (cached !== undefined) out[id] = cached
  }
  return out
}

export const CACHE_RUNNERS: Record<string, RunnerFunction> = { 'cache.grains': grains }
