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
import { endpointLimitsFromConfig, loadTransport, timeoutsFromConfig, type MasterConfig, type Nodegroups } from '@brine/common'
import { iterTransportOpts, silentLogger, type Logger, type PublishServer, type RequestServer } from '@brine/transport'
import { EventBus, eventBusHwm } from './event-bus.js'
import { FanoutPublishServer } from './fanout-publisher.js'
import { GrainsCache } from './grains-cache.js'
import type { JobCache } from '@brine/common'
import { MemoryJobStore } from './job-store.js'
import { MasterRequestHandler } from './request-handler.js'
import { InlinePool, ThreadPool, type RequestPool } from './worker-pool.js'
import { masterVersion } from './version.js'

export interface MasterOptions {
  logger?: Logger
  /** Job records (default: in memory). */
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
 * The Brine master: key store and `_auth`, one request handler over every transport's
 * RequestServer (crypto spread over `worker_threads`), a fan-out publisher, the event bus,
 * session key rotation and job records.
 */
export class Master {
  readonly opts: MasterConfig
  readonly bus: EventBus
  readonly jobs: JobCache
  readonly #logger: Logger
  #keys: KeyPair | undefined
  #store: PkiStore | undefined
  #session: SessionKeys | undefined
  #rootKey: string | undefined
  #pool: RequestPool | undefined
  #publisher: FanoutPublishServer | undefined
  #endpoints: TransportEndpoints[] = []
  #timer: NodeJS.Timeout | undefined
  #pruneTimer: NodeJS.Timeout | undefined
  #handler: MasterRequestHandler | undefined
  #state: 'new' | 'starting' | 'started' | 'stopping' | 'stopped' = 'new'
  #stopped: Promise<void> | undefined

  constructor(opts: MasterConfig, options: MasterOptions = {}) {
    this.opts = opts
    this.#logger = options.logger ?? silentLogger
    this.jobs = options.jobs ?? new MemoryJobStore()
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

  /** The request handler: its publishJob, gather and wheel are the paths runners use. */
  get handler(): MasterRequestHandler {
    if (this.#handler === undefined) throw new Error('master.handler is available once start() has resolved')
    return this.#handler
  }

  /** Worker threads in use (0 = inline). */
  get workerThreads(): number {
    return this.#pool?.size ?? 0
  }

  #started(what: string): { keys: KeyPair; store: PkiStore; session: SessionKeys; rootKey: string; publisher: FanoutPublishServer } {
    if (this.#keys === undefined || this.#store === undefined || this.#session === undefined || this.#rootKey === undefined || this.#publisher === undefined) {
      throw new Error(`master.${what} is available once start() has resolved`)
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
    if (this.#state !== 'new') throw new Error(`master cannot start: it is ${this.#state}`)
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
    this.#rootKey = await createRootKey(rootKeyPath(opts.cachedir))
    const grains = new GrainsCache(opts.cachedir, this.#logger)
    await grains.load()
    await this.bus.start()
    this.#pool = this.#createPool(keys, store)

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
    this.#publisher = new FanoutPublishServer(publishServers)
    const handler = new MasterRequestHandler({
      store,
      pool: this.#pool,
      bus: this.bus,
      jobs: this.jobs,
      grains,
      publisher: this.#publisher,
      masterPub: publicKeysOf(keys),
      masterBoxSecret: keys.box.secretKey,
      session: () => this.session,
      rotateSession: (reason) => this.rotateSession(reason),
      rootKey: this.#rootKey,
      autoAccept: opts.auto_accept,
      openMode: opts.open_mode,
      nodegroups: opts.nodegroups as Nodegroups,
      ...(typeof opts.master_id === 'string' ? { masterId: opts.master_id } : {}),
      timeoutMs: timeouts.timeoutMs,
      version: masterVersion(),
      logger: this.#logger,
    })
    this.#handler = handler
    for (const { name, publish, request } of this.#endpoints) {
      request.handle(handler.handle)
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
    ])
    // The job cache goes last: requests still being handled above may be writing returns and job records to it.
    results.push(...(await Promise.allSettled([(this.#handler?.settle() ?? Promise.resolve()).then(() => this.jobs.close())])))
    this.#state = 'stopped'
    for (const result of results) {
      if (result.status === 'rejected') this.#logger.warning(`master stop: ${String(result.reason)}`)
    }
  }
}
