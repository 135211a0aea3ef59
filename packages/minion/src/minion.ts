/**
 * The minion daemon (DESIGN §3–§4, minion side): keys, `_auth` with the master, the publish
 * subscription, jobs run concurrently through the executor, sealed returns with retries and a
 * disk spool. One responsibility per collaborator: MinionAuth (auth.ts), JobRunner
 * (job-runner.ts), Returner (returner.ts), ReturnSpool (spool.ts).
 */
import {
  backoffFromConfig,
  ConfigError,
  endpointLimitsFromConfig,
  loadTransport,
  returnRetryDelayMs,
  tags,
  timeoutsFromConfig,
  type MinionConfig,
} from '@brine/common'
import { loadOrCreateKeys } from '@brine/crypt'
import {
  ClosedError,
  createLogger,
  InvalidOperationError,
  type Logger,
  type PublishClient,
  type RequestClient,
} from '@brine/transport'
import { MinionAuth, type MasterSession } from './auth.js'
import { JobRunner } from './job-runner.js'
import { LifecycleEvents, type MinionEvent } from './lifecycle.js'
import { collectGrains, replaceGrains } from './modules/grains.js'
import { createModuleRegistry } from './modules/registry.js'
import { RunningJobs } from './modules/running-jobs.js'
import type { Grains, ModuleDefinition, ModuleRegistry } from './modules/types.js'
import { Returner, sendSealed } from './returner.js'
import { ReturnSpool, spoolDir } from './spool.js'

export interface MinionOptions {
  /** Default: a stderr logger at `opts.log_level`. The CLI passes `loggerFromConfig(opts, 'minion')`. */
  logger?: Logger
  /** Extra execution modules (Salt's `_modules`), by module name. */
  modules?: Readonly<Record<string, ModuleDefinition>>
}

/** Salt's minion start event text uses Python's time.asctime(): `Mon Jan  1 12:00:00 2024`. */
function asctime(date: Date): string {
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  const two = (n: number): string => String(n).padStart(2, '0')
  return `${days[date.getDay()]} ${months[date.getMonth()]} ${String(date.getDate()).padStart(2, ' ')} ${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())} ${date.getFullYear()}`
}

/** Salt's `minion_start` / `salt/minion/<id>/start` events, as `_minion_event` carries them. */
export function minionStartEvents(id: string, now: Date = new Date()): { tag: string; data: Record<string, unknown> }[] {
  const data = `Minion ${id} started at ${asctime(now)}`
  return [tags.minionStart(id), tags.minionStartLegacy].map((tag) => ({ tag, data: { data, cmd: '_minion_event', id, pretag: null, tag } }))
}

interface Running {
  request: RequestClient
  publish: PublishClient
  auth: MinionAuth
  returner: Returner
  runner: JobRunner
  tasks: Promise<unknown>[]
}

export class Minion {
  readonly id: string
  readonly opts: MinionConfig
  /** Shared with the execution modules; grains.setval and saltutil.sync_grains change it in place. */
  readonly grains: Grains = {}
  /** The running-job table behind saltutil.running / find_job / kill_job. */
  readonly jobs = new RunningJobs()
  readonly registry: ModuleRegistry
  /** Resolves after the first successful `_auth`; rejects with ClosedError if stop() comes first. */
  readonly authenticated: Promise<void>
  readonly #logger: Logger
  readonly #events = new LifecycleEvents()
  readonly #controller = new AbortController()
  #resolveAuthenticated!: () => void
  #rejectAuthenticated!: (error: Error) => void
  #running: Running | undefined
  #starting: Promise<void> | undefined
  #stopping: Promise<void> | undefined

  constructor(opts: MinionConfig, options: MinionOptions = {}) {
    if (typeof opts.id !== 'string' || opts.id === '') throw new ConfigError('id must be a non-empty string', { key: 'id' })
    this.id = opts.id
    this.opts = opts
    this.#logger = options.logger ?? createLogger({ level: opts.log_level ?? 'warning', name: 'minion' })
    this.authenticated = new Promise<void>((resolve, reject) => {
      this.#resolveAuthenticated = resolve
      this.#rejectAuthenticated = reject
    })
    this.authenticated.catch(() => {}) // nobody has to listen
    this.registry = createModuleRegistry(
      { id: this.id, grains: this.grains, opts, logger: this.#logger, jobs: this.jobs, signal: this.#controller.signal },
      options.modules,
    )
  }

  /** Lifecycle events: the recent history, then live ones until stop(). Any number of consumers. */
  events(): AsyncIterable<MinionEvent> {
    return this.#events.events()
  }

  /** The master this minion talks to (the first of `master`), `host:port` of its ret port. */
  get master(): string {
    return `${this.#masterHost()}:${this.opts.master_port}`
  }

  /** Jobs started and not yet returned, spooled or killed. */
  get runningJobs(): number {
    return this.#running?.runner.running ?? 0
  }

  #masterHost(): string {
    const masters = Array.isArray(this.opts.master) ? this.opts.master : [this.opts.master]
    const first = masters[0]
    if (typeof first !== 'string' || first === '') throw new ConfigError('master must name at least one master', { key: 'master' })
    return first
  }

  /**
   * Loads (or creates) the keys, collects grains, connects both clients and starts authenticating
   * in the background. Resolves once connecting has begun, not when the key is accepted (that can
   * take an operator's action): await {@link authenticated} or watch {@link events} for that.
   */
  start(): Promise<void> {
    if (this.#stopping !== undefined) return Promise.reject(new ClosedError('minion', this.id))
    if (this.#starting !== undefined) return Promise.reject(new InvalidOperationError(`minion ${this.id} is already started`))
    this.#starting = this.#start().catch(async (error: unknown) => {
      // A failed start leaves nothing open: stop() after it is a no-op, the error goes to the caller.
      this.#controller.abort(new ClosedError('minion', this.id))
      this.#rejectAuthenticated(error instanceof Error ? error : new Error(String(error)))
      const running = this.#running
      this.#running = undefined
      if (running !== undefined) await Promise.all([running.request.close(), running.publish.close()])
      throw error
    })
    return this.#starting
  }

  async #start(): Promise<void> {
    const opts = this.opts
    const logger = this.#logger
    const signal = this.#controller.signal
    const emit = (event: MinionEvent): void => this.#events.emit(event)
    const masters = Array.isArray(opts.master) ? opts.master : [opts.master]
    const host = this.#masterHost()
    if (masters.length > 1) {
      logger.warning(`multi-master is not supported yet: connecting to the first master only (${host}); ignoring ${masters.slice(1).join(', ')}`)
    }
    const timeouts = timeoutsFromConfig(opts)
    const { keys } = await loadOrCreateKeys(opts.pki_dir, 'minion', { logger })
    replaceGrains(this.grains, await collectGrains(this.id, opts))
    const transport = await loadTransport(opts.transport)
    if (signal.aborted) throw new ClosedError('minion', this.id)

    const common = { host, reconnect: backoffFromConfig(opts), ...endpointLimitsFromConfig(opts) }
    const request = transport.createRequestClient({ ...common, port: opts.master_port, timeout: timeouts.authTimeoutMs, logger: logger.child('request') })
    const publish = transport.createPublishClient({ ...common, port: opts.publish_port, id: this.id, logger: logger.child('publish') })
    const auth = new MinionAuth({
      id: this.id,
      keys,
      pkiDir: opts.pki_dir,
      masterFinger: opts.master_finger,
      client: request,
      authTimeoutMs: timeouts.authTimeoutMs,
      acceptanceWaitMs: timeouts.acceptanceWaitTimeMs,
      acceptanceWaitMaxMs: timeouts.acceptanceWaitTimeMaxMs,
      logger: logger.child('auth'),
      signal,
      emit,
      onAuthenticated: (session, first) => {
        if (first) this.#resolveAuthenticated()
        void this.#afterAuth(session, first)
      },
    })
    const returner = new Returner({
      client: request,
      auth,
      spool: new ReturnSpool(spoolDir(opts.cachedir), logger.child('spool')),
      logger: logger.child('return'),
      emit,
      retryDelayMs: () => returnRetryDelayMs(opts),
      tries: opts.return_retry_tries,
      signal,
    })
    const runner = new JobRunner({
      id: this.id,
      grains: this.grains,
      nodegroups: opts.nodegroups,
      registry: this.registry,
      auth,
      returner,
      logger,
      emit,
      signal,
    })
    const running: Running = { request, publish, auth, returner, runner, tasks: [] }
    this.#running = running
    await request.start()
    await publish.start()
    logger.info(`minion ${this.id}: transport ${transport.name}, master ${request.address}, publishes ${publish.address}`)
    running.tasks.push(
      this.#publishLoop(running),
      this.#watchRequestLink(running),
      auth.authenticate().catch(() => {}), // ends with ClosedError only when stopping
    )
  }

  /** After every auth: grains (the master targets by them), the start event once, then the spool. */
  async #afterAuth(session: MasterSession, first: boolean): Promise<void> {
    const running = this.#running
    if (running === undefined) return
    const signal = this.#controller.signal
    const timeout = timeoutsFromConfig(this.opts).authTimeoutMs
    const send = async (load: { cmd: string } & Record<string, unknown>): Promise<void> => {
      try {
        await sendSealed(running.request, session, load, { timeout, tries: 1, signal })
      } catch (error) {
        if (!signal.aborted) this.#logger.warning(`could not send ${load.cmd} to the master: ${(error as Error).message}`)
      }
    }
    await send({ cmd: '_grains', id: this.id, grains: this.grains })
    if (first) await send({ cmd: '_minion_event', id: this.id, events: minionStartEvents(this.id) })
    if (!signal.aborted) await running.returner.flush()
  }

  async #publishLoop(running: Running): Promise<void> {
    for await (const envelope of running.publish) {
      if (this.#controller.signal.aborted) break
      try {
        await running.runner.handle(envelope)
      } catch (error) {
        if (this.#controller.signal.aborted) break
        this.#logger.error('unexpected error while handling a publish; continuing', error)
      }
    }
  }

  /** A reconnected request link may mean a restarted master: authenticate again (which flushes the spool). */
  async #watchRequestLink(running: Running): Promise<void> {
    let connected = 0
    for await (const event of running.request.events()) {
      if (event.type !== 'peer-connect') continue
      connected++
      if (connected > 1 && running.auth.current !== undefined && !this.#controller.signal.aborted) {
        this.#logger.info(`reconnected to the master at ${running.request.address}; re-authenticating`)
        running.auth.authenticate().catch(() => {})
      }
    }
  }

  /**
   * Stops the daemon: aborts auth waits and running jobs (a killed job does not return), spools
   * returns that were still in flight, closes both clients and clears timers. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop()
    return this.#stopping
  }

  async #stop(): Promise<void> {
    this.#controller.abort(new ClosedError('minion', this.id))
    this.#rejectAuthenticated(new ClosedError('minion', this.id))
    await this.#starting?.catch(() => {})
    const running = this.#running
    if (running !== undefined) {
      running.returner.close()
      await running.runner.drain()
      await running.returner.drain()
      await Promise.all([running.request.close(), running.publish.close()])
      await Promise.allSettled(running.tasks)
      running.returner.close()
    }
    this.#logger.info(`minion ${this.id} stopped`)
    this.#events.emit({ type: 'stopped' })
    this.#events.close()
  }
}
