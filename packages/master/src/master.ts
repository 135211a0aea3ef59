import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import {
  createRootKey,
  fingerprint,
  loadOrCreateKeys,
  PkiStore,
  publicKeysOf,
  rootKeyPath,
  SessionKeys,
  type KeyPair,
  type PublicKeys,
  type SessionKey,
} from '@brine/crypt'
import { endpointLimitsFromConfig, loadTransport, timeoutsFromConfig, type JobCache, type MasterConfig, type Nodegroups } from '@brine/common'
import { openJobCache } from '@brine/returners'
import { iterTransportOpts, silentLogger, type Logger, type PublishServer, type RequestServer } from '@brine/transport'
import { Authorizer } from './authorize.js'
import { MasterStateError } from './errors.js'
import { EventBus, eventBusHwm } from './event-bus.js'
import { FanoutPublishServer } from './fanout-publisher.js'
import { GrainsCache } from './grains-cache.js'
import { JobPublisher } from './job-publisher.js'
import { MasterService } from './master-service.js'
import { SyndicRegistry } from './syndics.js'
import { MasterWireAdapter } from './wire-adapter.js'
import { InlinePool, ThreadPool, type RequestPool } from './worker-pool.js'
import { masterVersion } from './version.js'

export interface MasterOptions {
  logger?: Logger
  /**
   * A job cache to use instead of the one `master_job_cache` names (tests: `MemoryJobStore`). Without it
   * the master opens `local_cache` under `cachedir` (the default) or `postgres` at start. Either way the
   * master closes it on stop.
   */
  jobs?: JobCache
}

/** Longest delay setInterval accepts (2^31-1 ms); a longer publish_session is clamped to it. */
const MAX_TIMER_MS = 2 ** 31 - 1
/** How often jobs older than keep_jobs are pruned (Salt's maintenance loop checks every loop_interval). */
const PRUNE_INTERVAL_MS = 10 * 60 * 1000

export interface TransportEndpoints {
  name: string
  publish: PublishServer
  request: RequestServer
}

/**
 * The Brine master: key store and `_auth`, the {@link MasterService} behind one authorize step, its
 * wire adapter over every transport's RequestServer (crypto spread over `worker_threads`), a fan-out
 * publisher, the event bus, session key rotation, and the job cache `master_job_cache` names.
 */
export class Master {
  readonly opts: MasterConfig
  readonly bus: EventBus
  readonly #logger: Logger
  #jobs: JobCache | undefined
  #keys: KeyPair | undefined
  #store: PkiStore | undefined
  #session: SessionKeys | undefined
  #rootKey: string | undefined
  #pool: RequestPool | undefined
  #publisher: FanoutPublishServer | undefined
  #endpoints: TransportEndpoints[] = []
  #timer: NodeJS.Timeout | undefined
  #pruneTimer: NodeJS.Timeout | undefined
  #service: MasterService | undefined
  #syndics: SyndicRegistry | undefined
  #state: 'new' | 'starting' | 'started' | 'stopping' | 'stopped' = 'new'
  #stopped: Promise<void> | undefined

  constructor(opts: MasterConfig, options: MasterOptions = {}) {
    this.opts = opts
    this.#logger = options.logger ?? silentLogger
    this.#jobs = options.jobs
    this.bus = new EventBus({ sockDir: opts.sock_dir, hwm: eventBusHwm(opts.pub_hwm), logger: this.#logger.child('event-bus') })
  }

  /** The master's public keys (after start). */
  get publicKeys(): PublicKeys {
    return publicKeysOf(this.#started('publicKeys').keys)
  }

  /** `salt-key -F master`: the fingerprint minions pin as `master_finger`. */
  get fingerprint(): string {
    return fingerprint(this.publicKeys)
  }

  get store(): PkiStore {
    return this.#started('store').store
  }

  /** The session key publishes are sealed under now. */
  get session(): SessionKey {
    return this.#started('session').session.current()
  }

  /** The root key written at start to `<cachedir>/.root_key`. */
  get rootKey(): string {
    return this.#started('rootKey').rootKey
  }

  get publisher(): PublishServer {
    return this.#started('publisher').publisher
  }

  /** One entry per transport served, with its two servers. */
  get endpoints(): readonly TransportEndpoints[] {
    return this.#endpoints
  }

  /** The job cache: the one given to the constructor, else the one `master_job_cache` names, opened by start(). */
  get jobs(): JobCache {
    if (this.#jobs === undefined) throw new MasterStateError(`master.jobs is available once start() has resolved (or pass options.jobs); the master is ${this.#state}`, this.#state)
    return this.#jobs
  }

  /** The master's operations behind one authorize step (publish, runner, wheel, auth, minion returns, events, grains). */
  get service(): MasterService {
    if (this.#service === undefined) throw new MasterStateError(`master.service is available once start() has resolved; the master is ${this.#state}`, this.#state)
    return this.#service
  }

  /** Worker threads in use (0 = inline). */
  get workerThreads(): number {
    return this.#pool?.size ?? 0
  }

  #started(what: string): { keys: KeyPair; store: PkiStore; session: SessionKeys; rootKey: string; publisher: FanoutPublishServer } {
    if (this.#keys === undefined || this.#store === undefined || this.#session === undefined || this.#rootKey === undefined || this.#publisher === undefined) {
      throw new MasterStateError(`master.${what} is available once start() has resolved; the master is ${this.#state}`, this.#state)
    }
    return { keys: this.#keys, store: this.#store, session: this.#session, rootKey: this.#rootKey, publisher: this.#publisher }
  }

  /** Rotates the session key: minions re-authenticate on the next publish; removed ones cannot. */
  rotateSession(reason = 'requested'): SessionKey {
    const next = this.#started('rotateSession').session.rotate()
    this.#logger.info(`session key rotated to generation ${next.gen} (${reason})`)
    return next
  }

  async start(): Promise<void> {
    if (this.#state !== 'new') throw new MasterStateError(`master cannot start: it is ${this.#state}`, this.#state)
    this.#state = 'starting'
    try {
      await this.#start()
      this.#state = 'started'
    } catch (error) {
      await this.stop()
      throw error
    }
  }

  async #start(): Promise<void> {
    const opts = this.opts
    const timeouts = timeoutsFromConfig(opts)
    const { keys } = await loadOrCreateKeys(opts.pki_dir, 'master', { logger: this.#logger })
    this.#keys = keys
    const store = await PkiStore.open(opts.pki_dir, { logger: this.#logger })
    this.#store = store
    this.#session = new SessionKeys()
    const rootKey = await createRootKey(rootKeyPath(opts.cachedir))
    this.#rootKey = rootKey
    const grains = new GrainsCache(opts.cachedir, this.#logger)
    await grains.load()
    const syndics = new SyndicRegistry(opts.cachedir, this.#logger.child('syndics'))
    await syndics.load()
    this.#syndics = syndics
    // master_job_cache: local_cache (default) or postgres, unless the caller injected one.
    this.#jobs ??= await openJobCache(opts, { logger: this.#logger })
    const jobs = this.#jobs
    await this.bus.start()
    const pool = this.#createPool(keys, store)
    this.#pool = pool

    const limits = endpointLimitsFromConfig(opts)
    const publishServers: PublishServer[] = []
    for (const [name, topts] of iterTransportOpts(opts)) {
      const transport = await loadTransport(name)
      const logger = this.#logger.child(name)
      const publish = transport.createPublishServer({ host: topts.interface, port: topts.publish_port, ...endpointLimitsFromConfig(topts), logger })
      const request = transport.createRequestServer({ host: topts.interface, port: topts.ret_port, ...limits, ...endpointLimitsFromConfig(topts), logger })
      this.#endpoints.push({ name, publish, request })
      publishServers.push(publish)
    }
    const fanout = new FanoutPublishServer(publishServers)
    this.#publisher = fanout
    const publisher = new JobPublisher({
      store,
      grains,
      jobs,
      bus: this.bus,
      publisher: fanout,
      seal: async (jid, load) => pool.run(jid, { op: 'seal-publish', load, session: this.session }),
      nodegroups: opts.nodegroups as Nodegroups,
      ...(typeof opts.master_id === 'string' ? { masterId: opts.master_id } : {}),
      logger: this.#logger,
    })
    const service = new MasterService({
      authorizer: new Authorizer({ rootKey }),
      publisher,
      store,
      jobs,
      bus: this.bus,
      grains,
      crypto: pool,
      session: { current: () => this.session, rotate: (reason) => this.rotateSession(reason) },
      masterPub: publicKeysOf(keys),
      settings: {
        autoAccept: opts.auto_accept,
        openMode: opts.open_mode,
        timeoutMs: timeouts.timeoutMs,
        gatherJobTimeoutMs: timeouts.gatherJobTimeoutMs,
        version: masterVersion(),
        orderMasters: opts.order_masters === true,
        syndicWaitMs: timeouts.syndicWaitMs,
        sharedJobCache: opts.master_job_cache === 'postgres',
      },
      syndics,
      logger: this.#logger,
    })
    this.#service = service
    const adapter = new MasterWireAdapter({ service, store, crypto: pool, masterBoxSecret: keys.box.secretKey, logger: this.#logger })
    for (const { name, publish, request } of this.#endpoints) {
      request.handle(adapter.handle)
      await publish.start()
      await request.start()
      this.#logger.info(`transport ${name}: publish ${publish.address}, ret ${request.address}`)
    }
    if (timeouts.publishSessionMs > 0) {
      this.#timer = setInterval(() => this.rotateSession('publish_session'), Math.min(timeouts.publishSessionMs, MAX_TIMER_MS))
      this.#timer.unref()
    }
    if (timeouts.keepJobsMs > 0) {
      void this.pruneJobs()
      this.#pruneTimer = setInterval(() => void this.pruneJobs(), PRUNE_INTERVAL_MS)
      this.#pruneTimer.unref()
    }
  }

  /**
   * Removes jobs older than `keep_jobs` hours from the job cache, as Salt's maintenance loop does;
   * `now` is injectable so a test need not wait. Returns how many jobs were removed.
   */
  async pruneJobs(now: Date = new Date()): Promise<number> {
    const keepJobsMs = timeoutsFromConfig(this.opts).keepJobsMs
    try {
      const removed = await this.jobs.prune(new Date(now.getTime() - keepJobsMs))
      if (removed > 0) this.#logger.info(`job cache: pruned ${removed} job(s) older than keep_jobs (${this.opts.keep_jobs} h)`)
      return removed
    } catch (error) {
      this.#logger.error(`job cache: pruning failed: ${(error as Error).message}`)
      return 0
    }
  }

  #createPool(keys: KeyPair, store: PkiStore): RequestPool {
    const submit = store.submit.bind(store)
    const size = this.opts.worker_threads
    if (size <= 0) return new InlinePool(keys, submit)
    const script = new URL('./request-worker.js', import.meta.url)
    if (!existsSync(fileURLToPath(script))) {
      // Running from TypeScript sources (tests): there is no built worker script to start.
      this.#logger.warning(`worker_threads: ${size} ignored: ${fileURLToPath(script)} does not exist (not built?); handling requests on the main thread`)
      return new InlinePool(keys, submit)
    }
    this.#logger.info(`request handling: ${size} worker threads`)
    return new ThreadPool({ size, script, masterKeys: keys, submit, logger: this.#logger.child('workers') })
  }

  /** Closes servers, workers, the bus, the timers and the job cache. Idempotent; safe after a failed start. */
  stop(): Promise<void> {
    this.#stopped ??= this.#stop()
    return this.#stopped
  }

  async #stop(): Promise<void> {
    this.#state = 'stopping'
    if (this.#timer !== undefined) clearInterval(this.#timer)
    if (this.#pruneTimer !== undefined) clearInterval(this.#pruneTimer)
    this.#timer = undefined
    this.#pruneTimer = undefined
    const results = await Promise.allSettled([
      ...this.#endpoints.flatMap(({ publish, request }) => [request.close(), publish.close()]),
      this.#pool?.close() ?? Promise.resolve(),
      this.bus.close(),
      this.#syndics?.flush() ?? Promise.resolve(),
    ])
    // The job cache goes last: requests still being handled above may be writing returns and job records to it.
    results.push(...(await Promise.allSettled([(this.#service?.settle() ?? Promise.resolve()).then(() => this.#jobs?.close())])))
    this.#state = 'stopped'
    for (const result of results) {
      if (result.status === 'rejected') this.#logger.warning(`master stop: ${String(result.reason)}`)
    }
  }
}
