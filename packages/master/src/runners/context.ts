import type { PkiStore } from '@brine/crypt'
import type { JobCache } from '@brine/common'
import type { TargetType, Tgt } from '@brine/protocol'
import type { Logger } from '@brine/core'
import { MalformedRequestError } from '@brine/protocol'
import type { AuditLog } from '../audit/audit-log.js'
import type { EventBus } from '../event-bus.js'
import type { FileServer } from '../file-server/file-server.js'
import type { GatheredJob } from '../gather.js'
import type { GrainsCache } from '../grains-cache.js'
import type { SyndicRegistry } from '../syndics.js'
import { msFromSeconds } from '@brine/config'

export type { GatheredJob } from '../gather.js'

/** What a runner may use of the master: its job cache, key store, bus, publish and wheel paths. */
export interface RunnerContext {
  jobs: JobCache
  store: PkiStore
  bus: EventBus
  /** The syndics attached to this master and the minions pinned to each. */
  syndics: SyndicRegistry
  /**
   * Publishes `fun` to `tgt` through the master's own publish path (no network round trip) and
   * gathers the returns with the one return collector: `timeout` ms, then `saltutil.find_job` rounds
   * of `gatherJobTimeout` ms while a minion still runs it, then the job cache.
   */
  gather(tgt: Tgt, fun: string, arg: readonly unknown[], options: { tgtType?: TargetType; timeout: number; gatherJobTimeout: number }): Promise<GatheredJob>
  /** The grains each minion last reported (cache.grains). */
  grains: GrainsCache
  /** The accepted minions `tgt` selects, as a publish would resolve it (no publish is sent). */
  select(tgt: Tgt, tgtType: TargetType): Promise<string[]>
  /**
   * The accepted minions connected to this master: each authenticated with it (or returned to it) since
   * it started, and its key was not deleted or rejected since. Brine has no presence events; this is
   * what stands for Salt's `connected_ids`.
   */
  connected(): string[]
  /** The master's resolved config (test.get_opts). */
  configValues: Readonly<Record<string, unknown>>
  /** Fires `salt/run/<jid>/progress` for this run (Salt's `__jid_event__.fire_event(data, 'progress')`). */
  progress(data: Record<string, unknown>): void
  /** Runs a wheel function through the same path `brine-key` uses (events, session rotation). */
  wheel(load: Record<string, unknown>): Promise<unknown>
  /** Config `timeout` in ms, the default wait of runners that publish. */
  timeoutMs: number
  /** Config `gather_job_timeout` in ms, the default find_job wait of runners that publish. */
  gatherJobTimeoutMs: number
  /** The master's Brine version (manage.versions). */
  version: string
  /** The audit log, when the master keeps one (jobs.audit reads it). */
  audit?: AuditLog
  /** The file server (the fileserver runners); absent on a master built without one. */
  files?: FileServer
  logger: Logger
}

/** Positional and keyword arguments, as Salt passes them to a runner function. */
export interface RunnerArgs {
  arg: unknown[]
  kwarg: Record<string, unknown>
}

export type RunnerFunction = (args: RunnerArgs, context: RunnerContext) => Promise<unknown>

/** Argument `index` or keyword `name` (Salt lets either carry a parameter); `undefined` if neither. */
export function param(args: RunnerArgs, index: number, name: string): unknown {
  if (Object.hasOwn(args.kwarg, name)) return args.kwarg[name]
  return args.arg[index]
}

export function requiredString(args: RunnerArgs, index: number, name: string, fun: string): string {
  const value = param(args, index, name)
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  if (typeof value !== 'string' || value === '') throw new MalformedRequestError(`runner ${fun} arguments`, `'${name}' is required (a string)`)
  return value
}

/** Salt's truthy spellings for flags given on the command line (`removekeys=True`). */
export function flag(args: RunnerArgs, index: number, name: string): boolean {
  const value = param(args, index, name)
  if (typeof value === 'string') return ['true', 'yes', '1', 'on'].includes(value.toLowerCase())
  return value === true || value === 1
}

/** Kwarg `name` (Salt's seconds) in ms, else `fallback` ms. */
function secondsKwarg(args: RunnerArgs, name: string, fallback: number, fun: string): number {
  const value = args.kwarg[name]
  if (value === undefined || value === null) return fallback
  const seconds = typeof value === 'string' ? Number(value) : value
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) {
    throw new MalformedRequestError(`runner ${fun} arguments`, `'${name}' must be a non-negative number of seconds, got ${JSON.stringify(value)}`)
  }
  return Math.round(msFromSeconds(seconds))
}

/** Kwarg `timeout` (Salt's seconds) in ms, else the config's. */
export function timeoutOf(args: RunnerArgs, context: RunnerContext, fun: string): number {
  return secondsKwarg(args, 'timeout', context.timeoutMs, fun)
}

/** The waits of a runner that asks minions: kwargs `timeout` and `gather_job_timeout` (Salt's seconds), else the config's, in ms. */
export function waitsOf(args: RunnerArgs, context: RunnerContext, fun: string): { timeout: number; gatherJobTimeout: number } {
  return { timeout: timeoutOf(args, context, fun), gatherJobTimeout: secondsKwarg(args, 'gather_job_timeout', context.gatherJobTimeoutMs, fun) }
}
