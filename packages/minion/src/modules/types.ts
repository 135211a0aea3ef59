import type { Logger } from '@brine/core'
import type { RunningJobs } from './running-jobs.js'

/** Grains: Salt's facts about a minion (os, kernel, ipv4, id, …), nested values allowed. */
export type Grains = Record<string, unknown>

/** The minion's config (Salt's key names: `id`, `cachedir`, `grains`, …). */
export type MinionOpts = Record<string, unknown>

/**
 * The authenticated request channel to a master, as modules use it (the file server's commands): sends a
 * sealed load and resolves with the master's sealed answer; a refusal rejects with NotAcknowledgedError
 * carrying the master's error. `id` is added to the load by the channel.
 */
export interface MasterChannel {
  /** `timeout` ms per try (default the link's auth_timeout); `tries` for a request that may be sent twice (a read). */
  request(
    load: { readonly cmd: string; readonly [field: string]: unknown },
    options?: { signal?: AbortSignal; timeout?: number; tries?: number },
  ): Promise<Record<string, unknown>>
}

/** What every module function can reach: Salt's `__opts__`, `__grains__` and friends. */
export interface ModuleContext {
  readonly id: string
  /** Shared, mutated in place by grains.setval and saltutil.sync_grains so matchers see changes. */
  readonly grains: Grains
  readonly opts: MinionOpts
  readonly logger: Logger
  readonly jobs: RunningJobs
  /** Aborted when the whole minion shuts down; every job's signal follows it. */
  readonly signal?: AbortSignal
  /** The master's request channel (absent where no master is, e.g. a module tested alone). */
  readonly master?: MasterChannel
  /** Sends events to the master(s) in use (event.send, event.fire_master); absent when the minion has no master link. */
  readonly fireMaster?: (events: { tag: string; data: Record<string, unknown> }[]) => Promise<void>
  /** The minion's schedule (the schedule.* functions); absent outside a minion daemon. */
  readonly schedule?: ScheduleControl
}

/** What the schedule.* functions may do with the minion's schedule. */
export interface ScheduleControl {
  readonly enabled: boolean
  add(name: string, raw: Record<string, unknown>, persist: boolean): Promise<void>
  delete(name: string, persist: boolean): Promise<boolean>
  setJobEnabled(name: string, enabled: boolean, persist: boolean): Promise<boolean>
  setEnabled(enabled: boolean, persist: boolean): Promise<void>
  runNow(name: string): boolean
  get(name: string): { readonly enabled: boolean } | undefined
  list(): Record<string, unknown>
}

/** The per-job view a function receives: the module context plus Salt's `__context__` pieces. */
export interface JobContext extends ModuleContext {
  readonly jid: string
  readonly fun: string
  /** Aborted by saltutil.kill_job, the minion's shutdown or the caller's signal. */
  readonly signal: AbortSignal
  /**
   * Salt's `__context__['retcode']`: starts at 0, a function sets it (test.retcode, cmd.run) to
   * make the job's retcode non-zero while still returning data.
   */
  retcode: number
  /** The registry the function belongs to (Salt's `__salt__`), for cross-module calls. */
  readonly registry: ModuleRegistry
  /** Records a child process pid so saltutil.running shows it and kill_job signals it. */
  trackChild(pid: number): void
  untrackChild(pid: number): void
}

/**
 * One execution-module function. The executor binds a call the way Python would: `args` holds
 * the declared positional parameters in order (filled from keyword arguments given by name, then
 * from `defaults`), followed by any extra positionals when `varargs` is set; `kwargs` holds the
 * remaining keyword arguments (only when `kwargs` is set, including Salt's `__pub_*` keys).
 */
export interface ModuleFunctionSpec {
  /** Salt's docstring, returned by sys.doc. */
  readonly doc: string
  /** Positional parameter names, in order. */
  readonly args?: readonly string[]
  /** Defaults for trailing positional parameters; a parameter with no default is required. */
  readonly defaults?: Readonly<Record<string, unknown>>
  /** Accepts `*args`. */
  readonly varargs?: boolean
  /** Accepts `**kwargs`. */
  readonly kwargs?: boolean
  /** Salt's `__outputter__`, copied into the return's `out`. */
  readonly outputter?: string
  run(args: unknown[], kwargs: Record<string, unknown>, ctx: JobContext): Promise<unknown>
}

export interface ModuleFunction extends ModuleFunctionSpec {
  /** Full name, `module.function`. */
  readonly name: string
  readonly args: readonly string[]
}

/** A module: its functions by short name (`ping` → `test.ping`). */
export type ModuleDefinition = Readonly<Record<string, ModuleFunctionSpec>>

/** Salt's loader dict (`__salt__`): every function by full name, plus its context. */
export interface ModuleRegistry {
  readonly context: ModuleContext
  get(fun: string): ModuleFunction | undefined
  has(fun: string): boolean
  /** Sorted full names. */
  names(): string[]
  /** Sorted module names. */
  modules(): string[]
  /** Adds a module's functions (replacing any of the same name), as a custom module would. */
  register(module: string, definition: ModuleDefinition): void
  /**
   * Replaces the custom modules loaded from disk: the built-ins (and modules given at start) again,
   * then `modules` over them function by function; `failed` records the modules that did not load.
   */
  setCustom(modules: Readonly<Record<string, ModuleDefinition>>, failed?: Readonly<Record<string, string>>): void
  /** Why module `module` failed to load at the last (re)load, if it did. */
  loadError(module: string): string | undefined
}
