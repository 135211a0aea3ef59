/**
 * The minion daemon (DESIGN §3–§4, minion side): keys, grains, one {@link MasterLink} per master
 * it uses (auth, publishes, sealed returns with retries and a disk spool), a {@link MasterPolicy}
 * choosing those masters (Salt's `master_type`), and one {@link JobRunner} matching and running
 * the jobs every link delivers.
 */
import { loadTransport, type ScheduleEntry } from '@brine/common'
import { checkMinionMasters, ConfigError, masterAddressOf, mastersOf, timeoutsFromConfig, type MinionConfig } from '@brine/config'
import { generateJid, tags, type ReturnLoad } from '@brine/protocol'
import { CryptCache, loadOrCreateKeys, normalizeMinionId, validateMinionId, type KeyPair } from '@brine/crypt'
import { type Transport } from '@brine/transport'
import { ClosedError, createLogger, InvalidOperationError, LifecycleEvents, type Logger } from '@brine/core'
import type { MinionReturners } from '@brine/returners'
import {
  authIdOf,
  minionStartEvents,
  type MinionEvent,
  MasterLink,
  AllMastersPolicy,
  FailoverPolicy,
  type MasterPolicy,
  type Clock,
  ReturnSpool,
} from '@brine/link'
import { JobRunner } from './job-runner.js'
import { linkOptionsOf } from './link-options.js'
import { collectGrains, replaceGrains } from './modules/grains.js'
import { reloadCustomModules } from './modules/loader.js'
import { createModuleRegistry } from './modules/registry.js'
import { RunningJobs } from './modules/running-jobs.js'
import type { Grains, MasterChannel, ModuleDefinition, ModuleRegistry } from './modules/types.js'
import { executeJob } from './executor.js'
import { MinionSchedule, scheduleFile } from './schedule.js'

export interface MinionOptions {
  /** Default: a stderr logger at `opts.log_level`. The CLI passes `loggerFromConfig(opts, 'minion')`. */
  logger?: Logger
  /** Extra execution modules (Salt's `_modules`), by module name. */
  modules?: Readonly<Record<string, ModuleDefinition>>
  /**
   * Opened publishes, verified signatures and key objects (default: one of this minion's own).
   * Many minions in one process (a swarm) share one, so each publish is opened once for all.
   */
  cryptCache?: CryptCache
  /** This host's clocks (default the system's): what publish freshness is measured with. Tests inject one. */
  clock?: Clock
  /**
   * This host's core grains ({@link hostGrains}), when whoever runs many minions in one process (a swarm) computed
   * them once for all; each minion copies them and adds its own `id`, `master`, config and persisted grains.
   * Default: computed at start().
   */
  hostGrains?: Grains
}

/**
 * Tries of the grains and the start event sent after an auth (MasterLink.sendPersistently). Each try the master
 * refuses as busy or leaves unanswered waits half to all of random_reauth_delay (Salt's 10 s), plus auth_timeout
 * when unanswered: sixty tries outlast some five to fifteen minutes of a master busy with its fleet's `_auth` herd.
 */
const AFTER_AUTH_TRIES = 60

/** Salt's minion start event text uses Python's time.asctime(): `Mon Jan  1 12:00:00 2024`. */
/**
 * Salt's `master_type` as a policy. `func` and `disable` are not built: they fall back to the first
 * master, with a warning.
 */
function policyFor(opts: MinionConfig, masters: string[], logger: Logger): { policy: MasterPolicy; masters: string[] } {
  const type = opts.master_type ?? 'str'
  if (type === 'str') return { policy: new AllMastersPolicy(), masters }
  if (type === 'failover') {
    const timeouts = timeoutsFromConfig(opts)
    const policy = new FailoverPolicy({
      aliveIntervalMs: timeouts.masterAliveIntervalMs,
      failback: opts.master_failback === true,
      failbackIntervalMs: timeouts.masterFailbackIntervalMs,
      randomMaster: opts.random_master === true,
      // The first _auth times out after auth_timeout (an auth-failed event); the margin covers connecting.
      answerTimeoutMs: 2 * timeouts.authTimeoutMs,
      retryWaitMs: timeouts.acceptanceWaitTimeMs,
      logger,
    })
    return { policy, masters }
  }
  const [first] = masters as [string, ...string[]]
  logger.warning(
    `master_type ${type} is not supported yet: connecting to the first master only (${first})${masters.length > 1 ? `; ignoring ${masters.slice(1).join(', ')}` : ''}`,
  )
  return { policy: new AllMastersPolicy(), masters: [first] }
}

export class Minion {
  readonly id: string
  readonly opts: MinionConfig
  /** Shared with the execution modules; grains.setval and saltutil.sync_grains change it in place. */
  readonly grains: Grains = {}
  /** The running-job table behind saltutil.running / find_job / kill_job. */
  readonly jobs = new RunningJobs()
  readonly registry: ModuleRegistry
  /** The schedule (`schedule:` and schedule.*), its entries run here and returned to the masters in use. */
  readonly schedule: MinionSchedule
  /** Resolves after the first successful `_auth` with any master; rejects with ClosedError if stop() comes first. */
  readonly authenticated: Promise<void>
  readonly #logger: Logger
  readonly #events = new LifecycleEvents<MinionEvent>()
  readonly #controller = new AbortController()
  readonly #cache: CryptCache
  readonly #clock: Clock | undefined
  readonly #hostGrains: Grains | undefined
  readonly #runner: JobRunner
  /** Loaded at the first job that names a returner: most minions never see one, and @brine/returners brings a PostgreSQL driver. */
  #returners: Promise<MinionReturners> | undefined
  readonly #tasks = new Set<Promise<unknown>>()
  #resolveAuthenticated!: () => void
  #rejectAuthenticated!: (error: Error) => void
  #policy: MasterPolicy | undefined
  /** Each open link's spool directory, to tell whether returns still wait there for its master. */
  readonly #spools = new WeakMap<MasterLink, ReturnSpool>()
  #starting: Promise<void> | undefined
  #stopping: Promise<void> | undefined

  constructor(opts: MinionConfig, options: MinionOptions = {}) {
    const id = authIdOf(opts)
    const [problem] = checkMinionMasters(opts)
    if (problem !== undefined) throw problem
    this.id = id
    this.opts = opts
    this.#logger = options.logger ?? createLogger({ level: opts.log_level ?? 'warning', name: 'minion' })
    this.#cache = options.cryptCache ?? new CryptCache({ publicKeys: 4, sharedKeys: 4, openedPublishes: 16, verifiedSignatures: 16 })
    this.#clock = options.clock
    this.#hostGrains = options.hostGrains
    this.authenticated = new Promise<void>((resolve, reject) => {
      this.#resolveAuthenticated = resolve
      this.#rejectAuthenticated = reject
    })
    this.authenticated.catch(() => {}) // nobody has to listen
    const signal = this.#controller.signal
    this.schedule = new MinionSchedule({
      config: opts.schedule,
      file: scheduleFile(opts.cachedir),
      run: (entry) => {
        const run = this.#runScheduled(entry)
        this.#track(run)
        return run
      },
      logger: this.#logger.child('schedule'),
    })
    const fireMaster = (events: { tag: string; data: Record<string, unknown> }[]): Promise<void> => this.#fireMaster(events)
    const master: MasterChannel = { request: (load, requestOptions) => this.#request(load, requestOptions) }
    this.registry = createModuleRegistry(
      { id: this.id, grains: this.grains, opts, logger: this.#logger, jobs: this.jobs, signal, master, fireMaster, schedule: this.schedule },
      options.modules,
    )
    this.#runner = new JobRunner({
      id: this.id,
      grains: this.grains,
      nodegroups: opts.nodegroups,
      registry: this.registry,
      logger: this.#logger,
      emit: (event) => this.#events.emit(event),
      signal,
      severalMasters: mastersOf(opts).length > 1,
      returners: { send: async (job, ret) => (await this.#openReturners()).send(job, ret) },
    })
  }

  /** Lifecycle events: the recent history, then live ones until stop(). Any number of consumers. */
  events(): AsyncIterable<MinionEvent> {
    return this.#events.events()
  }

  /** The first master this minion talks to, `host:port` of its ret port. */
  get master(): string {
    const first = masterAddressOf(mastersOf(this.opts)[0] as string, this.opts.master_port)!
    return `${first.host}:${first.port}`
  }

  /** The links to the masters in use now (empty before start() and after stop()). */
  get links(): readonly MasterLink[] {
    return this.#stopping === undefined ? (this.#policy?.links ?? []) : []
  }

  /** Jobs started and not yet returned, spooled or killed. */
  get runningJobs(): number {
    return this.#runner.running
  }

  /**
   * Loads (or creates) the keys, collects grains, connects to the masters and starts
   * authenticating in the background. Resolves once connecting has begun, not when the key is
   * accepted (that can take an operator's action): await {@link authenticated} or watch
   * {@link events} for that.
   */
  start(): Promise<void> {
    if (this.#stopping !== undefined) return Promise.reject(new ClosedError('minion', this.id))
    if (this.#starting !== undefined) return Promise.reject(new InvalidOperationError(`minion ${this.id} is already started`))
    this.#starting = this.#start().catch(async (error: unknown) => {
      // A failed start leaves nothing open: stop() after it is a no-op, the error goes to the caller.
      this.#controller.abort(new ClosedError('minion', this.id))
      this.#rejectAuthenticated(error instanceof Error ? error : new Error(String(error)))
      await this.#policy?.close()
      throw error
    })
    return this.#starting
  }

  async #start(): Promise<void> {
    const opts = this.opts
    const logger = this.#logger
    const selected = policyFor(opts, mastersOf(opts), logger)
    // The key objects made while loading go to the crypt cache: the first _auth's signature and box key reuse them.
    const { keys } = await loadOrCreateKeys(opts.pki_dir, 'minion', { logger, cache: this.#cache })
    await this.schedule.load()
    replaceGrains(this.grains, await collectGrains(this.id, opts, this.#hostGrains))
    // Custom modules synced before, and module_dirs: a module that fails is logged and recorded, not fatal.
    await reloadCustomModules(this.registry, opts, logger)
    const transport = await loadTransport(opts.transport)
    if (this.#controller.signal.aborted) throw new ClosedError('minion', this.id)
    const several = selected.masters.length > 1
    this.#policy = selected.policy
    await selected.policy.start({
      masters: selected.masters,
      open: (host) => this.#link(host, selected.masters.indexOf(host), keys, transport, several),
      serve: (link) => this.#track(this.#serve(link)),
      owes: (link) => this.#owes(link),
      emit: (event) => {
        this.#events.emit(event)
        // Salt fires the start event at the master a failover minion tunes in to, every time it does.
        if (event.type === 'master-selected') this.#announce(event.master)
      },
    })
    this.schedule.start()
    logger.info(`minion ${this.id}: transport ${transport.name}, master${several ? 's' : ''} ${selected.policy.links.map((link) => link.master).join(', ')}`)
  }

  /** The link to one master, the entry at `index` of `master` ({@link linkOptionsOf}). */
  #link(entry: string, index: number, keys: KeyPair, transport: Transport, several: boolean): MasterLink {
    const options = linkOptionsOf(this.opts, entry, index, { id: this.id, keys, transport, several })
    const link = new MasterLink({
      ...options,
      ...(this.#clock === undefined ? {} : { clock: this.#clock }),
      cache: this.#cache,
      logger: several ? this.#logger.child(`master ${options.host}:${options.port}`) : this.#logger,
      signal: this.#controller.signal,
      afterAuth: (authenticated, first) => this.#afterAuth(authenticated, first),
      onEvent: (event) => {
        this.#events.emit(event)
        if (event.type === 'authenticated') this.#resolveAuthenticated()
      },
    })
    this.#spools.set(link, new ReturnSpool(options.spoolDir, this.#logger))
    return link
  }

  /** Whether returns are still owed to `link`'s master: jobs it published still running, returns in flight or spooled. */
  async #owes(link: MasterLink): Promise<boolean> {
    if (this.#runner.runningFor(link.master) > 0 || link.returnsInFlight > 0) return true
    const spool = this.#spools.get(link)
    if (spool === undefined) return false
    try {
      return (await spool.list()).length > 0
    } catch (error) {
      this.#logger.warning(`cannot list the spool of ${link.master} (${spool.dir}): ${(error as Error).message}; keeping its link`)
      return true
    }
  }

  /** Sends the start events to the master a failover minion just chose. */
  #announce(master: string): void {
    const link = this.#policy?.links.find((candidate) => candidate.master === master)
    if (link === undefined) return
    const signal = this.#controller.signal
    this.#track(
      link.sendPersistently({ cmd: '_minion_event', id: this.id, events: minionStartEvents(this.id) }, AFTER_AUTH_TRIES).catch((error: unknown) => {
        if (!signal.aborted) this.#logger.warning(`could not send _minion_event to the master ${master}: ${(error as Error).message}`)
      }),
    )
  }

  /**
   * After every auth with a master: grains (the master targets by them), then the start event once, each sent
   * again while the master is too busy to take it (the herd of a fleet's start): lost, the grains would leave
   * grain targets guessing and the start event would never announce the minion (a reactor, or a harness
   * waiting for `salt/minion/<id>/start`, would wait for it in vain).
   */
  async #afterAuth(link: MasterLink, first: boolean): Promise<void> {
    const signal = this.#controller.signal
    const send = async (load: { cmd: string } & Record<string, unknown>): Promise<void> => {
      try {
        await link.sendPersistently(load, AFTER_AUTH_TRIES)
      } catch (error) {
        if (!signal.aborted) this.#logger.warning(`could not send ${load.cmd} to the master ${link.master}: ${(error as Error).message}`)
      }
    }
    await send({ cmd: '_grains', id: this.id, grains: this.grains })
    // A failover minion announces itself when it chooses a master (#announce), not on every link's first auth.
    if (first && this.#policy?.type !== 'failover') await send({ cmd: '_minion_event', id: this.id, events: minionStartEvents(this.id) })
  }

  /** The links whose master is in use now (all with `str`; the chosen one with failover). */
  #linksInUse(): MasterLink[] {
    const policy = this.#policy
    return policy === undefined ? [] : policy.links.filter((link) => policy.serves(link))
  }

  /** Sends events (event.send, event.fire_master) to every master in use; rejects with the first master's refusal. */
  async #fireMaster(events: { tag: string; data: Record<string, unknown> }[]): Promise<void> {
    const links = this.#linksInUse()
    if (links.length === 0) throw new ClosedError('minion', `${this.id}: no master is connected`)
    const signal = this.#controller.signal
    const sent = await Promise.allSettled(links.map((link) => link.send({ cmd: '_minion_event', id: this.id, events }, { tries: 1, signal })))
    const failed = sent.find((result) => result.status === 'rejected')
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason
  }

  /**
   * One run of a schedule entry: the function runs like a published job (it shows in saltutil.running) under a jid
   * of its own, and with `return_job` its return goes to every master in use (Salt's `schedule` return).
   */
  async #runScheduled(entry: ScheduleEntry): Promise<void> {
    const jid = generateJid()
    this.#logger.info(`schedule ${entry.name}: running ${entry.function} with jid ${jid}`)
    const kwarg = { ...entry.kwargs }
    const result = await executeJob(
      this.registry,
      { jid, fun: entry.function, arg: [...entry.args], kwarg, user: 'Schedule' },
      { signal: this.#controller.signal },
    )
    if (result.killed === true || !entry.returnJob) return
    const funArgs = [...entry.args, ...(Object.keys(kwarg).length > 0 ? [{ ...kwarg, __kwarg__: true }] : [])]
    const ret: ReturnLoad = {
      cmd: '_return',
      id: this.id,
      jid,
      fun: entry.function,
      fun_args: funArgs,
      return: result.return,
      retcode: result.retcode,
      success: result.success,
      schedule: entry.name,
    }
    if (result.out !== undefined) ret.out = result.out
    await Promise.all(this.#linksInUse().map((link) => link.deliver(ret)))
  }

  /** A module's request to the master: through the first link that is authenticated (else the first link, which waits for its auth). */
  #request(
    load: { readonly cmd: string; readonly [field: string]: unknown },
    options: { signal?: AbortSignal; timeout?: number; tries?: number } = {},
  ): Promise<Record<string, unknown>> {
    const links = this.links
    const link = links.find((candidate) => candidate.session !== undefined) ?? links[0]
    if (link === undefined) return Promise.reject(new ClosedError('minion (no master link)', this.id))
    const { signal, timeout, tries } = options
    return link.request(
      { ...load, id: this.id },
      { ...(signal === undefined ? {} : { signal }), ...(timeout === undefined ? {} : { timeout }), ...(tries === undefined ? {} : { tries }) },
    )
  }

  #track(task: Promise<unknown>): void {
    this.#tasks.add(task)
    void task.finally(() => this.#tasks.delete(task))
  }

  /** One link's jobs to the runner, in publish order, until the link closes; those of a master not in use are dropped. */
  async #serve(link: MasterLink): Promise<void> {
    for await (const publish of link.publishes()) {
      if (this.#controller.signal.aborted) break
      if (this.#policy?.serves(link) === false) {
        this.#logger.debug(`job ${publish.job.jid} from ${link.master} ignored: that master is not the one in use (master_type failover)`)
        this.#events.emit({ type: 'publish-ignored', master: link.master, jid: publish.job.jid, fun: publish.job.fun, reason: 'not the master in use' })
        continue
      }
      try {
        await this.#runner.handle(publish)
      } catch (error) {
        if (this.#controller.signal.aborted) break
        this.#logger.error(`unexpected error while handling a job from ${link.master}; continuing`, error)
      }
    }
  }

  #openReturners(): Promise<MinionReturners> {
    this.#returners ??= import('@brine/returners').then(
      ({ MinionReturners }) => new MinionReturners({ cachedir: this.opts.cachedir, logger: this.#logger.child('returners') }),
    )
    return this.#returners
  }

  /**
   * Stops the daemon: aborts auth waits and running jobs (a killed job does not return), spools
   * returns that were still in flight, closes every link and clears timers. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop()
    return this.#stopping
  }

  async #stop(): Promise<void> {
    await this.schedule.stop()
    this.#controller.abort(new ClosedError('minion', this.id))
    this.#rejectAuthenticated(new ClosedError('minion', this.id))
    await this.#starting?.catch(() => {})
    await this.#runner.drain()
    await (await this.#returners?.catch(() => undefined))?.close()
    await this.#policy?.close()
    await Promise.allSettled([...this.#tasks])
    this.#logger.info(`minion ${this.id} stopped`)
    this.#events.emit({ type: 'stopped' })
    this.#events.close()
  }
}
