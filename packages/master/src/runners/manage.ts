import type { TargetType } from '@brine/protocol'
import { flag, param, waitsOf, type RunnerArgs, type RunnerContext, type RunnerFunction } from './context.js'

/** Salt's `_ping`: test.ping to the target; returns sorted [answered, silent] ids. */
async function ping(args: RunnerArgs, context: RunnerContext, fun: string): Promise<{ up: string[]; down: string[] }> {
  const tgt = param(args, -1, 'tgt') ?? '*'
  const tgtType = (param(args, -1, 'tgt_type') ?? 'glob') as TargetType
  const gathered = await context.gather(tgt as string, 'test.ping', [], { tgtType, ...waitsOf(args, context, fun) })
  const up = gathered.minions.filter((id) => gathered.returns.has(id)).sort()
  const down = gathered.minions.filter((id) => !gathered.returns.has(id)).sort()
  return { up, down }
}

/** manage.status: `{up: [...], down: [...]}`. */
const status: RunnerFunction = async (args, context) => ping(args, context, 'manage.status')

/** manage.up: the accepted minions that answered test.ping (within `timeout`, and find_job's `gather_job_timeout`). */
const up: RunnerFunction = async (args, context) => (await ping(args, context, 'manage.up')).up

/** manage.down: those that did not; `removekeys=True` deletes their keys through the wheel (rotating the session). */
const down: RunnerFunction = async (args, context) => {
  const silent = (await ping(args, context, 'manage.down')).down
  if (flag(args, 0, 'removekeys') && silent.length > 0) await context.wheel({ fun: 'key.delete', match: silent })
  return silent
}

/** `subset`: a list of ids (or `a,b`), else every minion. */
function subsetOf(args: RunnerArgs): Set<string> | undefined {
  const value = param(args, 0, 'subset')
  if (value === undefined || value === null || value === '') return undefined
  return new Set(Array.isArray(value) ? value.map(String) : String(value).split(','))
}

/**
 * manage.list_state (and present, joined, allowed, reaped): the accepted minions connected to this
 * master, sorted, without sending anything. `show_ip` is accepted and has no effect: Brine's transports
 * do not tell the master a minion's address.
 */
const listState: RunnerFunction = async (args, context) => {
  const subset = subsetOf(args)
  return context.connected().filter((id) => subset === undefined || subset.has(id))
}

/** manage.list_not_state (not_present, not_joined, …): accepted minions that are not connected. */
const listNotState: RunnerFunction = async (args, context) => {
  const subset = subsetOf(args)
  const connected = new Set(context.connected())
  const { minions } = await context.store.list()
  return minions.filter((id) => !connected.has(id) && (subset === undefined || subset.has(id)))
}

/**
 * manage.alived: Brine's "alive" is answering — the accepted minions that answer test.ping now (Salt's
 * presence detection has no Brine equivalent); not_alived lists those that do not.
 */
const alived =
  (answering: boolean): RunnerFunction =>
  async (args, context) => {
    const subset = subsetOf(args)
    const { up: answered, down: silent } = await ping(
      { arg: [], kwarg: { ...args.kwarg, tgt: '*', tgt_type: 'glob' } },
      context,
      answering ? 'manage.alived' : 'manage.not_alived',
    )
    return (answering ? answered : silent).filter((id) => subset === undefined || subset.has(id))
  }

/** Compares dotted versions numerically (1.10.0 > 1.9.0); -1, 0 or 1. */
export function compareVersions(a: string, b: string): number {
  const parts = (version: string): number[] =>
    version
      .split(/[.+-]/)
      .slice(0, 3)
      .map((part) => Number.parseInt(part, 10) || 0)
  const [left, right] = [parts(a), parts(b)]
  for (let index = 0; index < 3; index++) {
    const difference = (left[index] ?? 0) - (right[index] ?? 0)
    if (difference !== 0) return Math.sign(difference)
  }
  return 0
}

const LABELS: Record<number, string> = { [-2]: 'Minion offline', [-1]: 'Minion requires update', 0: 'Up to date', 1: 'Minion newer than master' }

/**
 * manage.versions: Salt's report, `{"Up to date": {id: version}, "Minion requires update": {…},
 * "Minion newer than master": {…}, "Minion offline": {id: false}, "Master": version}`. Minions that
 * did not answer test.version within `timeout` are listed as offline.
 */
const versions: RunnerFunction = async (args, context) => {
  const gathered = await context.gather('*', 'test.version', [], waitsOf(args, context, 'manage.versions'))
  const groups = new Map<number, Record<string, string | false>>()
  for (const id of [...gathered.minions].sort()) {
    const value = gathered.returns.get(id)?.ret
    const difference = typeof value === 'string' && value !== '' ? compareVersions(value, context.version) : -2
    const group = groups.get(difference) ?? {}
    group[id] = difference === -2 ? false : (value as string)
    groups.set(difference, group)
  }
  const out: Record<string, unknown> = {}
  for (const [difference, group] of [...groups].sort(([a], [b]) => a - b)) out[LABELS[difference]!] = group
  out['Master'] = context.version
  return out
}

export const MANAGE_RUNNERS: Record<string, RunnerFunction> = {
  'manage.status': status,
  'manage.up': up,
  'manage.down': down,
  'manage.versions': versions,
  'manage.list_state': listState,
  'manage.present': listState,
  'manage.joined': listState,
  'manage.allowed': listState,
  'manage.reaped': listState,
  'manage.list_not_state': listNotState,
  'manage.not_present': listNotState,
  'manage.not_joined': listNotState,
  'manage.not_allowed': listNotState,
  'manage.not_reaped': listNotState,
  'manage.alived': alived(true),
  'manage.not_alived': alived(false),
}
