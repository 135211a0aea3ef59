import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import {
  createRootKey,
  fingerprint,
  loadOrCreateKeys,
  PkiStore,
  publicKeysOf,
  ReplayGuard,
  rootKeyPath,
  SessionStore,
  type KeyPair,
  type PublicKeys,
  type ReplayGuardStats,
  type SessionKey,
} from '@brine/crypt'
import { loadTransport, localChannelTransport, type JobCache } from '@brine/common'
import {
  ConfigError,
  eauthLimitsFromConfig,
  endpointLimitsFromConfig,
  fileServerLimitsFromConfig,
  serverLimitsFromConfig,
  timeoutsFromConfig,
  msFromSeconds,
  type MasterConfig,
} from '@brine/config'
import { jidToDate, localRequestPath, MAX_UNIX_SOCKET_PATH } from '@brine/protocol'
import { type Nodegroups } from '@brine/targeting'
import { openJobCache } from '@brine/returners'
import { defaultMaxConnections, iterTransportOpts, type PublishServer, type RequestServer, type RequestServerOptions, type Transport } from '@brine/transport'
import { silentLogger, type Logger } from '@brine/core'
import { AuditLog, auditLogPath } from './audit/audit-log.js'
import { Authorizer } from './authorize.js'
import { ExternalAuth } from './eauth/external-auth.js'
import { PasswordHashPool, type PasswordHashStats } from './eauth/hash-pool.js'
import { MasterStateError } from './errors.js'
import { EventBus, eventBusHwm } from './event-bus.js'
import { FanoutPublishServer } from './fanout-publisher.js'
import { fileServerFromConfig, type FileServer } from './file-server/file-server.js'
import { GrainsCache } from './grains-cache.js'
import { IssuedJobs } from './issued-jobs.js'
import { JobPublisher } from './job-publisher.js'
import { MasterSchedule } from './master-schedule.js'
import { MasterService } from './master-service.js'
import { MinionEventGate } from './minion-event-gate.js'
import { reactorCaller } from './reactor/caller.js'
import { Reactor, reactorRules } from './reactor/reactor.js'
import { SyndicIntake } from './syndic-intake.js'
import { SyndicRegistry } from './syndics.js'
import { TokenCommands } from './eauth/token-commands.js'
import { MasterWireAdapter, WARM_BATCH, isOperatorRequest } from './wire-adapter.js'
import { InlinePool, ThreadPool, type RequestPool, type ThreadPoolStats, type ThreadPoolWorkers } from './worker-pool.js'
import { DemandPool, WORKER_START_TASKS, WORKER_START_WINDOW_MS } from './demand-pool.js'
import { PublishSealer } from './publish-sealer.js'
import { listenBacklogFor, warnOfListenCap } from './listen-backlog.js'
import { masterVersion } from './version.js'

export interface MasterOptions {
  logger?: Logger
  /**
   * A job cache to use instead of the one `master_job_cache` names (tests: `MemoryJobStore`). Without it
   * the master opens `local_cache` under `cachedir` (the default) or `postgres` at start. Either way the
   * master closes it on stop.
   */
  jobs?: JobCache
  /**
   * The master's clock, ms since the epoch (default Date.now): every freshness decision (publish expiry,
   * the sealed-request window, the time in auth replies, future jids, pruning) reads it. Tests inject one.
   */
  now?: () => number
  /**
   * The built `request-worker.js` the worker threads run (default: the one beside this module). Tests running
   * from TypeScript sources point it at the package's dist/ to get real threads.
   */
  workerScript?: URL
  /**
   * Request tasks within a second that start the worker threads, and session-key holders that start them as a
   * restarted master starts (default {@link WORKER_START_TASKS}). Tests lower it to see a small fleet as a herd.
   */
  workerStartTasks?: number
}

/** A count config key that must be a positive integer (a bound of 0 would refuse everything). */
function positiveInteger(value: unknown, key: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
    throw new ConfigError(`${key} must be a positive integer, got ${String(value)}`, { key })
  return value
}

/** `26.5 h`, `3 d 2.0 h`: a duration in a log line. */
function formatHours(ms: number): string {
  const hours = ms / 3_600_000
  return hours < 48 ? `${hours.toFixed(1)} h` : `${Math.floor(hours / 24)} d ${(hours % 24).toFixed(1)} h`
}

/** Longest delay setInterval accepts (2^31-1 ms); a longer publish_session is clamped to it. */
const MAX_TIMER_MS = 2 ** 31 - 1
/** How often jobs older than keep_jobs are pruned (Salt's maintenance loop checks every loop_interval). */
const PRUNE_INTERVAL_MS = msFromSeconds(10 * 60)

type Timeouts = ReturnType<typeof timeoutsFromConfig>

/** What the master service is built from, made by the start-up steps before it. */
interface ServiceParts {
  keys: KeyPair
  store: PkiStore
  externalAuth: ExternalAuth
  files: FileServer
  grains: GrainsCache
  syndics: SyndicRegistry
  jobs: JobCache
  issued: IssuedJobs
  publisher: JobPublisher
  pool: RequestPool
  timeouts: Timeouts
}

export interface TransportEndpoints {
  name: string
  publish: PublishServer
  request: RequestServer
  /**
   * The same request handler on a unix socket under sock_dir (`ret_<transport>.ipc`, owner-only), for
   * the local client: no remote peer can fill it. Absent when sock_dir makes the path too long.
   */
  local?: RequestServer
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
  #session: SessionStore | undefined
  #rootKey: string | undefined
  #pool: RequestPool | undefined
  #sealer: PublishSealer | undefined
  #publisher: FanoutPublishServer | undefined
  #endpoints: TransportEndpoints[] = []
  /** The next `publish_session` rotation. */
  #timer: NodeJS.Timeout | undefined
  #publishSessionMs = 0
  #pruneTimer: NodeJS.Timeout | undefined
  #service: MasterService | undefined
  #externalAuth: ExternalAuth | undefined
  #hashes: PasswordHashPool | undefined
  readonly #workerScript: URL
  readonly #workerStartTasks: number
  #replayGuard: ReplayGuard | undefined
  #files: FileServer | undefined
  readonly #now: () => number
  /** The newest jid a skew warning was logged for, so each clock problem is said once. */
  #skewWarned: string | undefined
  #syndics: SyndicRegistry | undefined
  #audit: AuditLog | undefined
  #reactor: Reactor | undefined
  #schedule: MasterSchedule | undefined
  #state: 'new' | 'starting' | 'started' | 'stopping' | 'stopped' = 'new'
  #stopped: Promise<void> | undefined

  constructor(opts: MasterConfig, options: MasterOptions = {}) {
    this.opts = opts
    this.#logger = options.logger ?? silentLogger
    this.#jobs = options.jobs
    this.#now = options.now ?? Date.now
    this.#workerScript = options.workerScript ?? new URL('./request-worker.js', import.meta.url)
    this.#workerStartTasks = options.workerStartTasks ?? WORKER_START_TASKS
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
    return this.#started('session').session.keys.current()
  }

  /** The session key's store: whether the key was kept from before the restart, when it was made, its file. */
  get sessionStore(): SessionStore {
    return this.#started('sessionStore').session
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
    if (this.#jobs === undefined)
      throw new MasterStateError(`master.jobs is available once start() has resolved (or pass options.jobs); the master is ${this.#state}`, this.#state)
    return this.#jobs
  }

  /** The master's operations behind one authorize step (publish, runner, wheel, auth, minion returns, events, grains). */
  get service(): MasterService {
    if (this.#service === undefined)
      throw new MasterStateError(`master.service is available once start() has resolved; the master is ${this.#state}`, this.#state)
    return this.#service
  }

  /** The audit log (after start): every publish, runner and wheel call, accepted or refused. */
  get audit(): AuditLog {
    if (this.#audit === undefined) throw new MasterStateError(`master.audit is available once start() has resolved; the master is ${this.#state}`, this.#state)
    return this.#audit
  }

  /** The file server: file_roots, what it served and received (after start). */
  get files(): FileServer {
    if (this.#files === undefined) throw new MasterStateError(`master.files is available once start() has resolved; the master is ${this.#state}`, this.#state)
    return this.#files
  }

  /** What the sealed-request replay guard holds and has refused (after start). */
  replayStats(): ReplayGuardStats {
    if (this.#replayGuard === undefined)
      throw new MasterStateError(`master.replayStats() is available once start() has resolved; the master is ${this.#state}`, this.#state)
    return this.#replayGuard.stats()
  }

  /** Worker threads in use (0 = inline). */
  get workerThreads(): number {
    return this.#pool?.size ?? 0
  }

  /**
   * The request worker threads running now, started and retired so far, and the tasks they ran by kind; undefined
   * when the work runs inline.
   */
  requestWorkers(): (ThreadPoolWorkers & { tasks: ThreadPoolStats['offThread'] }) | undefined {
    const pool = this.#pool
    return pool instanceof DemandPool || pool instanceof ThreadPool ? { ...pool.workers(), tasks: pool.stats().offThread } : undefined
  }

  #started(what: string): { keys: KeyPair; store: PkiStore; session: SessionStore; rootKey: string; publisher: FanoutPublishServer } {
    if (this.#keys === undefined || this.#store === undefined || this.#session === undefined || this.#rootKey === undefined || this.#publisher === undefined) {
      throw new MasterStateError(`master.${what} is available once start() has resolved; the master is ${this.#state}`, this.#state)
    }
    return { keys: this.#keys, store: this.#store, session: this.#session, rootKey: this.#rootKey, publisher: this.#publisher }
  }

  /** Rotates the session key: minions re-authenticate on the next publish; removed ones cannot. */
  rotateSession(reason = 'requested'): SessionKey {
    const next = this.#started('rotateSession').session.rotate()
    this.#logger.info(`session key rotated to generation ${next.gen} (${reason})`)
    this.#scheduleRotation()
    return next
  }

  /** The next `publish_session` rotation: that long after the current key was made (a key kept across a restart is not younger for it). */
  #scheduleRotation(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    this.#timer = undefined
    const session = this.#session
    if (this.#publishSessionMs <= 0 || session === undefined || this.#state === 'stopping' || this.#state === 'stopped') return
    const due = Math.max(0, session.madeAt + this.#publishSessionMs - this.#now())
    this.#timer = setTimeout(() => this.rotateSession('publish_session'), Math.min(due, MAX_TIMER_MS))
    this.#timer.unref()
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

  /** The start-up steps, in order: each one that reads config checks it, so a bad setting stops the start before anything is served. */
  async #start(): Promise<void> {
    const timeouts = timeoutsFromConfig(this.opts)
    // Sealed requests from before this moment are refused: what the last run applied is not remembered (docs/protocol.md, "Freshness").
    const startedAt = this.#now()
    const { keys, store } = await this.#openKeys(timeouts.publishSessionMs)
    const externalAuth = await this.#openExternalAuth(keys, store)
    // file_roots and the ignore patterns are checked here: a bad one stops the start.
    const files = fileServerFromConfig(this.opts, fileServerLimitsFromConfig(this.opts), this.#logger.child('fileserver'))
    this.#files = files
    const { grains, syndics } = await this.#loadCaches()
    await this.bus.start()
    const pool = this.#threads(this.opts.worker_threads, keys, 'worker_threads')
    this.#pool = pool
    // A herd of minions holding the kept session key comes back at once. Their shared keys are derived WARM_BATCH to a
    // task as the master listens (warmBoxes below): when those tasks are a herd of their own the threads boot while the
    // rest of the start runs; fewer (a thousand holders are 8 tasks, about 0.1 s of CPU) run on this thread, cheaper
    // than two threads loading their modules while the fleet reconnects, and no check-in waits for a thread to boot.
    const session = this.#session
    if (pool instanceof DemandPool && session !== undefined && session.reused && Math.ceil(session.holders / WARM_BATCH) >= this.#workerStartTasks)
      pool.prestart()
    const publishServers = await this.#createEndpoints()
    // master_job_cache: local_cache (default) or postgres, unless the caller injected one. Opened once the transports
    // are loaded: the local cache rebuilds its index in the background, and the modules' loading no longer waits behind it.
    this.#jobs ??= await openJobCache(this.opts, { logger: this.#logger, now: this.#now })
    const jobs = this.#jobs
    const fanout = new FanoutPublishServer(publishServers)
    this.#publisher = fanout
    const issued = this.#issuedJobs(jobs, timeouts.clockSkewMs)
    const publisher = this.#jobPublisher({ keys, store, grains, jobs, issued, pool, fanout, publishTtlMs: timeouts.publishTtlMs })
    // Automation settings are read before anything is served, so a bad reactor or schedule stops the start.
    const rules = reactorRules(this.opts.reactor)
    const scheduled = MasterSchedule.entriesOf(this.opts.schedule)
    this.#audit = new AuditLog(auditLogPath(this.opts), { bus: this.bus, logger: this.#logger.child('audit') })
    const service = this.#createService({ keys, store, externalAuth, files, grains, syndics, jobs, issued, publisher, pool, timeouts })
    this.#service = service
    this.#startAutomation(service, rules, scheduled, externalAuth)
    const intake = new SyndicIntake({
      store,
      jobs,
      bus: this.bus,
      issued,
      syndics,
      nodegroups: publisher.nodegroups,
      maxMinions: this.opts.syndic_max_minions,
      sharedJobCache: this.opts.master_job_cache === 'postgres',
      logger: this.#logger,
    })
    const adapter = this.#wireAdapter({
      service,
      intake,
      tokens: new TokenCommands(externalAuth),
      keys,
      store,
      pool,
      files,
      requestWindowMs: timeouts.requestWindowMs,
      startedAt,
    })
    await this.#serve(adapter)
    // The holders of a kept session key are coming back: their shared keys are derived in batches as they do.
    if (session !== undefined && session.reused && session.holders > 0) {
      // Only ahead of time: whatever fails here, each minion's own request derives its key as before.
      adapter.warmBoxes(session.heldBy()).catch((error: unknown) => this.#logger.debug(`box keys of the session key's holders: ${(error as Error).message}`))
    }
    this.#startTimers(timeouts, externalAuth)
  }

  /** The master's own key pair, the minions' key store, the session key (kept from before a restart when it may be) and the root key the local client reads. */
  async #openKeys(publishSessionMs: number): Promise<{ keys: KeyPair; store: PkiStore }> {
    const opts = this.opts
    const { keys } = await loadOrCreateKeys(opts.pki_dir, 'master', { logger: this.#logger })
    this.#keys = keys
    const store = await PkiStore.open(opts.pki_dir, { logger: this.#logger, now: this.#now, maxPending: opts.max_pending_keys })
    this.#store = store
    this.#session = await SessionStore.open({
      pkiDir: opts.pki_dir,
      master: fingerprint(publicKeysOf(keys)),
      publishSessionMs,
      acceptedKeys: (id) => store.acceptedKeys(id),
      now: this.#now,
      logger: this.#logger,
    })
    this.#rootKey = await createRootKey(rootKeyPath(opts.cachedir))
    return { keys, store }
  }

  /** `external_auth` and the threads that hash its passwords; a backend Brine does not implement, or bad file-backend settings, stop the start. */
  async #openExternalAuth(keys: KeyPair, store: PkiStore): Promise<ExternalAuth> {
    const opts = this.opts
    const eauthLimits = eauthLimitsFromConfig(opts)
    // Threads of their own: a login storm queues behind its own bound, never behind (or ahead of) job crypto.
    // None without external_auth: nothing would ever be hashed.
    const hashThreads = Object.keys(opts.external_auth ?? {}).length > 0 ? eauthLimits.hashThreads : 0
    const pool = this.#threads(hashThreads, keys, 'eauth_hash_threads')
    this.#hashes = new PasswordHashPool({ pool, concurrency: Math.max(1, hashThreads), backlog: eauthLimits.hashBacklog })
    const externalAuth = await ExternalAuth.fromConfig(opts, this.#logger.child('eauth'), this.#hashes)
    this.#externalAuth = externalAuth
    if (externalAuth.configured) this.#logger.info(`external auth: ${Object.keys(opts.external_auth).join(', ')}; tokens in ${String(opts.token_dir)}`)
    return externalAuth
  }

  /**
   * The minions' grains and the syndics attached before a restart, read back from cachedir. The grains (a file per
   * minion) load while the master starts listening: what needs them all waits for them (GrainsCache.whenLoaded).
   */
  async #loadCaches(): Promise<{ grains: GrainsCache; syndics: SyndicRegistry }> {
    const grains = new GrainsCache(this.opts.cachedir, this.#logger)
    void grains.load()
    const syndics = new SyndicRegistry(this.opts.cachedir, this.#logger.child('syndics'))
    await syndics.load()
    this.#syndics = syndics
    return { grains, syndics }
  }

  /** One publish server and one request server (and a local one beside it) per transport `iterTransportOpts` yields; returns the publish servers. */
  async #createEndpoints(): Promise<PublishServer[]> {
    const limits = endpointLimitsFromConfig(this.opts)
    const publishServers: PublishServer[] = []
    // The fleet that reconnects at once after a restart: every accepted minion, one connection to each server.
    const accepted = (await this.#store?.acceptedIds())?.length ?? 0
    for (const [name, topts] of iterTransportOpts(this.opts)) {
      const transport = await loadTransport(name)
      const logger = this.#logger.child(name)
      // Bounds before work: what an unauthenticated peer may cost (entries, depth, connections, incomplete frames, idling).
      const configured = serverLimitsFromConfig(topts)
      const bounds = { ...configured, listenBacklog: listenBacklogFor(configured.listenBacklog, accepted) }
      if (transport.peerSockets !== false) warnOfListenCap(bounds.listenBacklog, accepted, logger)
      const publish = transport.createPublishServer({ host: topts.interface, port: topts.publish_port, ...endpointLimitsFromConfig(topts), ...bounds, logger })
      const options: RequestServerOptions = {
        host: topts.interface,
        port: topts.ret_port,
        ...limits,
        ...endpointLimitsFromConfig(topts),
        ...bounds,
        urgent: isOperatorRequest,
        logger,
      }
      const request = transport.createRequestServer(options)
      const local = this.#localRequestServer(await localChannelTransport(transport), name, options)
      this.#endpoints.push({ name, publish, request, ...(local === undefined ? {} : { local }) })
      publishServers.push(publish)
    }
    return publishServers
  }

  /** The jobs published and whom each could reach, seeded with the newest jid the job cache holds. */
  #issuedJobs(jobs: JobCache, clockSkewMs: number): IssuedJobs {
    const issued = new IssuedJobs({ jobs, now: this.#now, clockSkewMs })
    // Its own jids from before a restart count as issued even if a clock set back left them ahead of it (the index may still be building).
    void jobs.newestJid().then(
      (newest) => newest !== undefined && issued.seed(newest),
      (error: unknown) => this.#logger.warning(`job cache: could not read the newest jid: ${(error as Error).message}`),
    )
    return issued
  }

  /** The publish path: jobs sealed here or, when large, in the worker pool, fanned out over every transport's publish server. */
  #jobPublisher(parts: {
    keys: KeyPair
    store: PkiStore
    grains: GrainsCache
    jobs: JobCache
    issued: IssuedJobs
    pool: RequestPool
    fanout: FanoutPublishServer
    publishTtlMs: number
  }): JobPublisher {
    const sealer = new PublishSealer({ pool: parts.pool, signSecret: parts.keys.sign.secretKey })
    this.#sealer = sealer
    return new JobPublisher({
      store: parts.store,
      grains: parts.grains,
      jobs: parts.jobs,
      bus: this.bus,
      publisher: parts.fanout,
      seal: async (jid, load) => sealer.seal(jid, load, this.session),
      nodegroups: this.opts.nodegroups as Nodegroups,
      ...(typeof this.opts.master_id === 'string' ? { masterId: this.opts.master_id } : {}),
      issued: parts.issued,
      publishTtlMs: parts.publishTtlMs,
      now: this.#now,
      logger: this.#logger,
    })
  }

  #createService(parts: ServiceParts): MasterService {
    const opts = this.opts
    const { timeouts } = parts
    return new MasterService({
      audit: this.audit,
      minionEventGate: new MinionEventGate({ maxBytes: opts.minion_event_max_bytes, ratePerSecond: opts.minion_event_rate, burst: opts.minion_event_burst }),
      authorizer: new Authorizer({ rootKey: this.rootKey, externalAuth: parts.externalAuth }),
      publisher: parts.publisher,
      store: parts.store,
      jobs: parts.jobs,
      bus: this.bus,
      grains: parts.grains,
      crypto: parts.pool,
      session: { current: () => this.session, rotate: (reason) => this.rotateSession(reason), handedTo: (id) => this.sessionStore.handedTo(id) },
      masterPub: publicKeysOf(parts.keys),
      settings: {
        autoAccept: opts.auto_accept,
        openMode: opts.open_mode,
        timeoutMs: timeouts.timeoutMs,
        gatherJobTimeoutMs: timeouts.gatherJobTimeoutMs,
        version: masterVersion(),
        sessionTtlMs: timeouts.publishSessionMs,
        orderMasters: opts.order_masters === true,
        uniqueJid: opts.unique_jid === true,
        syndicWaitMs: timeouts.syndicWaitMs,
      },
      issued: parts.issued,
      now: this.#now,
      syndics: parts.syndics,
      files: parts.files,
      pkiDir: opts.pki_dir,
      configValues: opts,
      logger: this.#logger,
    })
  }

  /** The request port's adapter, with the replay guard its sealed requests pass. */
  #wireAdapter(parts: {
    service: MasterService
    intake: SyndicIntake
    tokens: TokenCommands
    keys: KeyPair
    store: PkiStore
    pool: RequestPool
    files: FileServer
    requestWindowMs: number
    startedAt: number
  }): MasterWireAdapter {
    const opts = this.opts
    this.#replayGuard = new ReplayGuard({
      windowMs: parts.requestWindowMs,
      perMinion: positiveInteger(opts.request_nonces_per_minion, 'request_nonces_per_minion'),
      total: positiveInteger(opts.request_nonces_total, 'request_nonces_total'),
      now: this.#now,
      startedAt: parts.startedAt,
    })
    return new MasterWireAdapter({
      service: parts.service,
      syndics: parts.intake,
      tokens: parts.tokens,
      store: parts.store,
      crypto: parts.pool,
      masterBoxSecret: parts.keys.box.secretKey,
      replayGuard: this.#replayGuard,
      publishPortOf: (transport) => this.#publishPortOf(transport),
      files: parts.files,
      decodeLimits: { maxEntries: opts.max_frame_entries, maxDepth: opts.max_frame_depth },
      now: this.#now,
      logger: this.#logger,
    })
  }

  /** Hands every request server the adapter and starts the servers, one line per transport. */
  async #serve(adapter: MasterWireAdapter): Promise<void> {
    for (const { name, publish, request, local } of this.#endpoints) {
      request.handle(adapter.handle)
      local?.handle(adapter.handle)
      await publish.start()
      await request.start()
      await local?.start()
      this.#logger.info(`transport ${name}: publish ${publish.address}, ret ${request.address}${local === undefined ? '' : `, local ${local.address}`}`)
    }
  }

  /** Session rotation every `publish_session`, and the maintenance round (keep_jobs, expired tokens). */
  #startTimers(timeouts: Timeouts, externalAuth: ExternalAuth): void {
    this.#publishSessionMs = timeouts.publishSessionMs
    this.#scheduleRotation()
    if (timeouts.keepJobsMs > 0 || externalAuth.configured) {
      const maintain = (): void => {
        if (timeouts.keepJobsMs > 0) void this.pruneJobs()
        if (externalAuth.configured) void this.pruneTokens()
      }
      maintain()
      this.#pruneTimer = setInterval(maintain, PRUNE_INTERVAL_MS)
      this.#pruneTimer.unref()
    }
  }

  /** The reactor (when `reactor:` has rules) and the master's schedule (when `schedule:` has entries). */
  #startAutomation(
    service: MasterService,
    rules: ReturnType<typeof reactorRules>,
    scheduled: ReturnType<typeof MasterSchedule.entriesOf>,
    externalAuth: ExternalAuth,
  ): void {
    const opts = this.opts
    if (rules.length > 0) {
      const logger = this.#logger.child('reactor')
      const caller = reactorCaller(opts.reactor_user, externalAuth, Object.keys(opts.external_auth), logger)
      this.#reactor = new Reactor({
        bus: this.bus,
        service,
        rules,
        caller,
        loopLimit: opts.reactor_loop_limit,
        workers: opts.reactor_worker_threads,
        hwm: opts.reactor_worker_hwm,
        logger,
      })
      this.#reactor.start()
    }
    if (scheduled.entries.length > 0) {
      this.#schedule = new MasterSchedule(service, scheduled.entries, this.#logger.child('schedule'))
      this.#schedule.scheduler.setEnabled(scheduled.enabled)
      this.#schedule.start()
    }
  }

  /**
   * The operator's channel for `name`: the request server's options on a unix socket under sock_dir, served by
   * `transport` (for a broker transport, the socket transport localChannelTransport names).
   * Its connections are counted apart from the network's, so its caps are the whole open-file
   * allowance, all from the one local "address"; every other bound (frames, deadlines) is the network's.
   */
  #localRequestServer(transport: Transport, name: string, options: RequestServerOptions): RequestServer | undefined {
    const path = localRequestPath(this.opts.sock_dir, name)
    if (Buffer.byteLength(path) > MAX_UNIX_SOCKET_PATH) {
      this.#logger.warning(
        `no local request channel for ${name}: ${path} is longer than unix sockets allow (${MAX_UNIX_SOCKET_PATH} bytes); local clients use ret_port`,
      )
      return undefined
    }
    const maxConnections = defaultMaxConnections()
    return transport.createRequestServer({ ...options, path, maxConnections, maxConnectionsPerAddress: maxConnections })
  }

  /** The publish port `transport` is bound to (the real one when configured as 0), once started. */
  #publishPortOf(transport: string): number | undefined {
    const endpoint = this.#endpoints.find((entry) => entry.name === transport)
    const port = endpoint === undefined ? undefined : /:(\d+)$/.exec(endpoint.publish.address)?.[1]
    return port === undefined ? undefined : Number(port)
  }

  /**
   * Removes jobs older than `keep_jobs` hours from the job cache, as Salt's maintenance loop does.
   * `now` (default: the master's clock) is injectable so a test need not wait. Returns how many jobs
   * were removed.
   *
   * A clock jump must not empty the cache: keep_jobs counts back from the master's clock, but never from
   * later than `clock_skew` after the newest jid the cache holds. A master started with its clock three
   * days fast therefore prunes as if it were `clock_skew` after its newest job (and says so once); an
   * idle master keeps its last keep_jobs of jobs until new ones arrive. Jobs dated ahead of the clock
   * are kept (and reported once) until the clock passes them.
   */
  async pruneJobs(now: Date = new Date(this.#now())): Promise<number> {
    const { keepJobsMs, clockSkewMs } = timeoutsFromConfig(this.opts)
    try {
      let reference = now.getTime()
      const newest = await this.jobs.newestJid()
      if (newest !== undefined) {
        const newestAt = jidToDate(newest).getTime()
        if (reference > newestAt + clockSkewMs) {
          reference = newestAt + clockSkewMs
          if (now.getTime() - newestAt > keepJobsMs && this.#skewWarned !== newest) {
            this.#skewWarned = newest
            this.#logger.warning(
              `job cache: the master's clock (${now.toISOString()}) is ${formatHours(now.getTime() - newestAt)} past the newest job (${newest}), more than keep_jobs (${this.opts.keep_jobs} h); ` +
                'keeping the jobs of keep_jobs before that job instead of pruning them all (a clock set forward, or a master idle that long)',
            )
          }
        } else if (newestAt > reference + clockSkewMs && this.#skewWarned !== newest) {
          this.#skewWarned = newest
          this.#logger.warning(
            `job cache: it holds jobs dated up to ${new Date(newestAt).toISOString()} (${newest}), ${formatHours(newestAt - reference)} ahead of the master's clock (${now.toISOString()}); they are kept until the clock passes them (a clock set back?)`,
          )
        }
      }
      const removed = await this.jobs.prune(new Date(reference - keepJobsMs))
      if (removed > 0) this.#logger.info(`job cache: pruned ${removed} job(s) older than keep_jobs (${this.opts.keep_jobs} h)`)
      return removed
    } catch (error) {
      this.#logger.error(`job cache: pruning failed: ${(error as Error).message}`)
      return 0
    }
  }

  /** Removes expired eauth tokens from `token_dir` (Salt's clean_expired_tokens), in the same maintenance round; returns how many. */
  async pruneTokens(now: Date = new Date()): Promise<number> {
    try {
      return (await this.#externalAuth?.tokens.prune(now.getTime())) ?? 0
    } catch (error) {
      this.#logger.warning(`eauth tokens: pruning failed: ${(error as Error).message}`)
      return 0
    }
  }

  /** What the password-hashing threads have done: checks, how many off the main thread, refusals (after start). */
  get passwordHashes(): PasswordHashStats {
    const hashes = this.#hashes
    if (hashes === undefined) throw new MasterStateError('passwordHashes is available once the master has started', this.#state)
    return hashes.stats()
  }

  /** `size` worker threads running request-worker.js (`key` names the config key), or the main thread for 0. */
  #threads(size: number, keys: KeyPair, key: string): RequestPool {
    if (size <= 0) return new InlinePool(keys)
    const script = this.#workerScript
    if (!existsSync(fileURLToPath(script))) {
      // Running from TypeScript sources (tests): there is no built worker script to start.
      this.#logger.warning(`${key}: ${size} ignored: ${fileURLToPath(script)} does not exist (not built?); working on the main thread`)
      return new InlinePool(keys)
    }
    const threads = new ThreadPool({
      size,
      script,
      masterKeys: keys,
      logger: this.#logger.child(key === 'worker_threads' ? 'workers' : 'hash-workers'),
    })
    if (key !== 'worker_threads') {
      this.#logger.info(`${key}: ${size} worker threads`)
      return threads
    }
    // A password hash is worth a thread from the first login; the request crypto only once a herd comes (demand-pool.ts).
    this.#logger.info(`${key}: ${size} worker threads, started once ${this.#workerStartTasks} tasks come within ${WORKER_START_WINDOW_MS} ms`)
    return new DemandPool({ inline: new InlinePool(keys), threads, startTasks: this.#workerStartTasks })
  }

  /**
   * What the worker threads did, said once at stop: the operator's evidence that `worker_threads` carried the
   * crypto rather than the main thread (each count is of tasks a worker thread reported it ran itself).
   */
  #logPoolWork(): void {
    const pool = this.#pool
    if (!(pool instanceof DemandPool)) return
    const { size, offThread, threads, inline } = pool.stats()
    const counted = (ran: typeof offThread): { total: number; detail: string } => {
      const kinds = Object.entries(ran).sort(([a], [b]) => a.localeCompare(b))
      const detail = kinds.length === 0 ? '' : ` (${kinds.map(([op, count]) => `${op} ${count}`).join(', ')})`
      return { total: kinds.reduce((sum, [, count]) => sum + count, 0), detail }
    }
    const off = counted(offThread)
    const on = counted(inline)
    const sealed = this.#sealer?.stats()
    const seals = sealed === undefined ? '' : `; publishes sealed: ${sealed.inline} on the main thread, ${sealed.pooled} handed to worker threads`
    // One line, the master's last words before it stops, where operators and daemon-ops.test.ts look for it.
    this.#logger.info(
      `worker_threads: ${off.total} task(s) ran on ${threads} of ${size} worker threads${off.detail}; ${on.total} on the main thread before they were warranted${on.detail}${seals}`,
    )
  }

  /** Closes servers, workers, the bus, the timers and the job cache. Idempotent; safe after a failed start. */
  stop(): Promise<void> {
    this.#stopped ??= this.#stop()
    return this.#stopped
  }

  async #stop(): Promise<void> {
    this.#state = 'stopping'
    if (this.#timer !== undefined) clearTimeout(this.#timer)
    if (this.#pruneTimer !== undefined) clearInterval(this.#pruneTimer)
    this.#timer = undefined
    this.#pruneTimer = undefined
    this.#schedule?.stop()
    this.#reactor?.stop()
    this.#logPoolWork()
    const results = await Promise.allSettled([
      ...this.#endpoints.flatMap(({ publish, request, local }) => [request.close(), publish.close(), local?.close() ?? Promise.resolve()]),
      this.#pool?.close() ?? Promise.resolve(),
      this.#hashes?.close() ?? Promise.resolve(),
      this.bus.close(),
      this.#syndics?.flush() ?? Promise.resolve(),
      this.#session?.flush() ?? Promise.resolve(),
    ])
    // The job cache goes last: requests still being handled above may be writing returns and job records to it.
    results.push(
      ...(await Promise.allSettled([
        (this.#service?.settle() ?? Promise.resolve()).then(() => this.#jobs?.close()),
        this.#audit?.close() ?? Promise.resolve(),
      ])),
    )
    this.#state = 'stopped'
    for (const result of results) {
      if (result.status === 'rejected') this.#logger.warning(`master stop: ${String(result.reason)}`)
    }
  }
}
