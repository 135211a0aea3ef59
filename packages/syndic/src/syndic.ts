/**
 * The syndic daemon (DESIGN §6, Salt's `salt-syndic`): beside a master, it hears one or more upper
 * masters as a minion does (a {@link MasterLink} each), passes every job they publish down into its own
 * master with the same jid, and forwards what comes back — announcements of the minions that will
 * answer, then their returns — upward in sealed `_syndic_return` batches.
 *
 * Returns are read from its master's event bus and, whenever that reader may have missed some (the bus
 * dropped events for it, the bus reconnected, the syndic restarted), read back from its master's job
 * cache for every job still open (`jobs.list_job`), so none is lost; the upper master stores each once.
 */
import { join } from 'node:path'
import {
  backoffFromConfig,
  BUS_DROPPED_TAG,
  endpointLimitsFromConfig,
  tagProblem,
  checkSyndicMasters,
  loadTransport,
  masterAddressOf,
  mastersOf,
  parseJobReturnTag,
  parseListJob,
  parsePublishReply,
  parseSyndicAnnouncement,
  returnRetryDelayMs,
  syndicReturnOf,
  tags,
  timeoutsFromConfig,
  JOB_TAG_PREFIX,
  type BusEvent,
  type EventLoad,
  type JobLoad,
  type MasterConfig,
  type PublishReply,
  type SyndicAnnouncementParts,
  type SyndicConfig,
} from '@brine/common'
import { ClearRequester, MasterEvent, MasterRequestError } from '@brine/client'
import { CryptCache, loadOrCreateKeys, masterAddressStem, masterPinFile, type KeyPair } from '@brine/crypt'
import { AllMastersPolicy, authIdOf, encodedBytes, failoverOrder, LifecycleEvents, MasterLink, minionStartEvents, NotAcknowledgedError, RETURN_FRAME_RESERVE_BYTES, sleep, type MasterLinkEvent } from '@brine/minion'
import { ClosedError, createLogger, InvalidOperationError, LruMap, type Logger, type Transport } from '@brine/transport'
import { BatchSpool } from './batch-spool.js'
import { LowerMasterError } from './errors.js'
import { UpperForwarder, type ForwarderEvent } from './forwarder.js'
import { OpenJobs, type OpenJob } from './open-jobs.js'

/** What the syndic reports: its upper links' events, and what it does with jobs and returns. */
export type SyndicEvent =
  | MasterLinkEvent
  | ForwarderEvent
  /** A job from an upper master was published into this syndic's master. */
  | { type: 'relayed'; master: string; jid: string; fun: string; minions: string[]; syndics: string[] }
  /** A job was not passed down (its master_id is this master's: it started here). */
  | { type: 'relay-skipped'; master: string; jid: string; reason: string }
  /** This syndic's master refused or did not take a job. */
  | { type: 'relay-failed'; master: string; jid: string; message: string }
  /** Open jobs were read back from the master's job cache. */
  | { type: 'reconciled'; reason: string; jobs: number; returns: number }
  | { type: 'stopped' }

export interface SyndicOptions {
  /** Default: a stderr logger at `opts.log_level`. */
  logger?: Logger
}

/** Events kept for a late reader of {@link Syndic.events}. */
const EVENT_HISTORY = 1000
/** Events of the master's bus buffered for the syndic's reader before the newest are dropped (and the cache read back). */
const BUS_READER_HWM = 1_000_000
/** Other events held for forwarding at most; past it the oldest are dropped (they are best effort, as in Salt). */
const RAW_EVENTS_LIMIT = 10_000
/** Events per `_syndic_event` request. */
const RAW_EVENTS_PER_SEND = 1000
/** Jids remembered with the upper master they came from, for returns that come after the job closed. */
const ROUTES = 50_000
/**
 * Jobs watched for returns at most (each holds its expected minions); past it the oldest is no longer read
 * back after a drop or a restart (its late returns still go up as the bus shows them).
 */
const OPEN_JOBS = 1000
/** How often jobs open too long are closed. */
const EXPIRE_EVERY_MS = 60_000
/** How long one request to its own master may take (a publish passed down, a job read back), ms. */
const LOWER_REQUEST_MS = 30_000
/** Bound on waiting for the own master's root key and bus at start, between attempts. */
const LOWER_RETRY_MS = 500

interface Upper {
  link: MasterLink
  forwarder: UpperForwarder
}

export class Syndic {
  readonly id: string
  readonly opts: SyndicConfig
  readonly #logger: Logger
  readonly #events = new LifecycleEvents<SyndicEvent>(EVENT_HISTORY)
  readonly #controller = new AbortController()
  readonly #uppers = new Map<string, Upper>()
  /** The links to the upper masters: every one at once, each one's jobs relayed (a multi-master minion's `str` policy). */
  readonly #policy = new AllMastersPolicy<MasterLink>()
  readonly #routes = new LruMap<string, string>(ROUTES)
  readonly #tasks = new Set<Promise<unknown>>()
  readonly #rawEvents: EventLoad[] = []
  #rawDropped = 0
  #lower: ClearRequester | undefined
  #bus: MasterEvent | undefined
  #jobs: OpenJobs | undefined
  #timer: NodeJS.Timeout | undefined
  #lastExpire = Date.now()
  #busReconnects = 0
  #busDropped = 0
  #reconciling: Promise<void> | undefined
  #reconcileAgain: string | undefined
  #starting: Promise<void> | undefined
  #stopping: Promise<void> | undefined

  constructor(opts: SyndicConfig, options: SyndicOptions = {}) {
    // The master's id rule, as a minion checks it: a bad id stops the start instead of retrying `_auth` forever.
    const id = authIdOf(opts)
    const [problem] = checkSyndicMasters(opts)
    if (problem !== undefined) throw problem
    this.id = id
    this.opts = opts
    this.#logger = options.logger ?? createLogger({ level: opts.log_level ?? 'warning', name: 'syndic' })
  }

  /** Lifecycle events: the recent history, then live ones until stop(). Any number of consumers. */
  events(): AsyncIterable<SyndicEvent> {
    return this.#events.events()
  }

  /** The links to the upper masters (empty before start()). */
  get links(): readonly MasterLink[] {
    return [...this.#uppers.values()].map((upper) => upper.link)
  }

  /** Jobs passed down whose returns are still being forwarded. */
  get openJobs(): number {
    return this.#jobs?.size ?? 0
  }

  /** Batches spooled for the upper masters now. */
  get spooledBatches(): number {
    let count = 0
    for (const upper of this.#uppers.values()) count += upper.forwarder.spooled
    return count
  }

  /**
   * Loads (or creates) the syndic's keys, waits for its own master (root key and bus), reads back the
   * jobs it was forwarding before a restart, connects to the upper masters and starts authenticating
   * in the background. Resolves once connecting has begun, not when an upper master accepts the key.
   */
  start(): Promise<void> {
    if (this.#stopping !== undefined) return Promise.reject(new ClosedError('syndic', this.id))
    if (this.#starting !== undefined) return Promise.reject(new InvalidOperationError(`syndic ${this.id} is already started`))
    this.#starting = this.#start().catch(async (error: unknown) => {
      this.#controller.abort(new ClosedError('syndic', this.id))
      await this.#closeAll()
      throw error
    })
    return this.#starting
  }

  async #start(): Promise<void> {
    const opts = this.opts
    const logger = this.#logger
    // syndic_failover: the order the upper masters are connected in (every return goes to the master that published its job),
    // shuffled as a multi-master minion's random_master shuffles its list.
    const masters = failoverOrder(mastersOf(opts, 'syndic_master'), { randomMaster: opts.syndic_failover !== 'ordered', failback: false })
    const transport = await loadTransport(opts.syndic_transport ?? opts.transport)
    const { keys } = await loadOrCreateKeys(opts.pki_dir, 'syndic', { logger })
    const dir = join(opts.cachedir, 'syndic')
    await this.#connectLower()
    const timeouts = timeoutsFromConfig(opts)
    this.#jobs = new OpenJobs({ file: join(dir, 'jobs.journal'), ttlMs: Math.max(timeouts.keepJobsMs, 60_000), limit: OPEN_JOBS, logger: logger.child('jobs') })
    const carried = await this.#jobs.load()
    if (this.#controller.signal.aborted) throw new ClosedError('syndic', this.id)
    const cache = new CryptCache({ publicKeys: 4, sharedKeys: 4, openedPublishes: 16, verifiedSignatures: 16 })
    const several = masters.length > 1
    await this.#policy.start({
      masters,
      open: (host) => {
        const upper = this.#upper(host, keys, transport, several, cache, dir)
        this.#uppers.set(upper.link.master, upper)
        return upper.link
      },
      serve: (link) => {
        this.#uppers.get(link.master)!.forwarder.start()
        this.#track(this.#serve(link))
      },
      // Batches owed to an upper master wait in its spool, not in the link.
      owes: () => Promise.resolve(false),
      emit: () => {},
    })
    this.#track(this.#readBus())
    this.#timer = setInterval(() => this.#tick(), Math.max(10, timeouts.syndicEventForwardTimeoutMs))
    this.#timer.unref()
    logger.info(`syndic ${this.id}: transport ${transport.name} to ${[...this.#uppers.keys()].join(', ')}; master ${this.#lowerAddress()}`)
    if (carried.length > 0) this.#reconcile(`${carried.length} job(s) still open when the syndic last stopped`)
  }

  #lowerAddress(): string {
    const opts = this.opts
    return `${opts.transport} ${opts.interface}:${String(opts.transport_opts[opts.transport]?.['ret_port'] ?? opts.ret_port)}`
  }

  #requester(): ClearRequester {
    return new ClearRequester({ opts: this.opts as unknown as MasterConfig, logger: this.#logger.child('master'), requestTimeout: LOWER_REQUEST_MS })
  }

  /**
   * One clear request to its own master with the root key. A master that restarted wrote a new root key:
   * refused for the key, the syndic reads it again and asks once more.
   */
  async #request(load: Record<string, unknown>): Promise<unknown> {
    const signal = this.#controller.signal
    try {
      return await this.#lower!.request(load, { signal })
    } catch (error) {
      if (!(error instanceof MasterRequestError) || error.context['remoteName'] !== 'PermissionDeniedError' || signal.aborted) throw error
      this.#logger.info(`this syndic's master refused its root key (${error.message}); reading the key again`)
      const stale = this.#lower!
      this.#lower = this.#requester()
      await stale.close()
      return this.#lower.request(load, { signal })
    }
  }

  /** Connects to its own master: the root key and request port (clear `publish`, `runner`), and the event bus. Waits for them. */
  async #connectLower(): Promise<void> {
    const signal = this.#controller.signal
    let logged = false
    const lower = this.#requester()
    this.#lower = lower
    for (;;) {
      try {
        await lower.connect()
        const bus = new MasterEvent({ sockDir: this.opts.sock_dir, logger: this.#logger.child('bus'), reconnect: { initial: 100, max: 2000 } })
        try {
          await bus.connect()
        } catch (error) {
          await bus.close()
          throw error
        }
        this.#bus = bus
        return
      } catch (error) {
        if (signal.aborted) throw new ClosedError('syndic', this.id)
        if (!logged) this.#logger.warning(`waiting for this syndic's master (${this.#lowerAddress()}, bus in ${this.opts.sock_dir}): ${(error as Error).message}`)
        logged = true
        if (!(await sleep(LOWER_RETRY_MS, signal))) throw new ClosedError('syndic', this.id)
      }
    }
  }

  /** The link to one upper master and the forwarder of what goes up to it. */
  #upper(entry: string, keys: KeyPair, transport: Transport, several: boolean, cache: CryptCache, dir: string): Upper {
    const opts = this.opts
    const timeouts = timeoutsFromConfig(opts)
    // `host:port` as a minion's master entries are read, else syndic_master_port.
    const { host, port } = masterAddressOf(entry, opts.syndic_master_port)!
    const stem = masterAddressStem(host, port)
    const retryDelayMs = (): number => returnRetryDelayMs(opts)
    const logger = several ? this.#logger.child(`master ${host}:${port}`) : this.#logger
    let forwarder: UpperForwarder | undefined
    const link = new MasterLink({
      id: this.id,
      keys,
      transport,
      host,
      port,
      // Set in config it overrides what the upper master's auth reply names; absent, the link subscribes where that master says.
      ...(opts.syndic_master_publish_port === undefined ? {} : { publishPort: opts.syndic_master_publish_port }),
      // Its jobs are fresh by the upper master's clock; relayed, they are stamped again in this node's master's.
      clockSkewMs: timeouts.clockSkewMs,
      client: { reconnect: backoffFromConfig(opts), ...endpointLimitsFromConfig(opts) },
      pkiDir: opts.pki_dir,
      // Its own pin file: the node's minion (if any) pins its own master in minion_master.pub.
      pinFile: several ? masterPinFile(host, port, 'syndic_master') : 'syndic_master.pub',
      ...(opts.syndic_finger === '' ? {} : { masterFinger: opts.syndic_finger }),
      authTimeoutMs: timeouts.authTimeoutMs,
      acceptanceWaitMs: timeouts.acceptanceWaitTimeMs,
      acceptanceWaitMaxMs: timeouts.acceptanceWaitTimeMaxMs,
      // The link's own return spool is not used: batches have theirs.
      spoolDir: join(dir, 'link', stem),
      returnRetryDelayMs: retryDelayMs,
      returnRetryTries: opts.return_retry_tries,
      cache,
      logger,
      signal: this.#controller.signal,
      afterAuth: async (authenticated, first) => {
        if (first) await this.#sendStart(authenticated, retryDelayMs)
        await forwarder?.drain()
      },
      onEvent: (event) => this.#events.emit(event),
    })
    forwarder = new UpperForwarder({
      id: this.id,
      link,
      spool: new BatchSpool(join(dir, 'spool', stem), opts.syndic_spool_max_bytes),
      intervalMs: timeouts.syndicEventForwardTimeoutMs,
      retryDelayMs,
      loadCacheSize: opts.syndic_jid_forward_cache_hwm,
      maxFrameBytes: endpointLimitsFromConfig(opts).maxFrameBytes,
      onSettled: (settled) => {
        for (const [jid, minions] of settled) this.#jobs?.settle(jid, minions)
      },
      onEvent: (event) => this.#events.emit(event),
      logger: logger.child('forward'),
      signal: this.#controller.signal,
    })
    return { link, forwarder }
  }

  /**
   * Salt's `salt/syndic/<id>/start`, once per upper master. An upper master that has not accepted this key
   * as a syndic's yet is asked again every `retryDelayMs`, in the background, until it does (the operator's
   * `brine-key --accept-syndic`): the start event is what tells the upper master this syndic is attached.
   */
  async #sendStart(link: MasterLink, retryDelayMs: () => number): Promise<void> {
    const [start] = minionStartEvents(this.id)
    const text = String(start?.data['data'] ?? '').replace(/^Minion /, 'Syndic ')
    const tag = tags.syndicStart(this.id)
    const send = () => link.send({ cmd: '_syndic_event', id: this.id, events: [{ tag, data: { data: text, id: this.id, tag } }] }, { tries: 1 })
    const notSyndic = (error: unknown): boolean => error instanceof NotAcknowledgedError && error.refusal === 'SyndicNotAcceptedError'
    try {
      await send()
      return
    } catch (error) {
      if (this.#controller.signal.aborted) return
      if (!notSyndic(error)) return this.#logger.warning(`could not send ${tag} to ${link.master}: ${(error as Error).message}`)
      this.#logger.warning(`${link.master} has not accepted this syndic's key as a syndic's; on that master run: brine-key --accept-syndic ${this.id}`)
    }
    this.#track(
      (async () => {
        while (await sleep(retryDelayMs(), this.#controller.signal)) {
          try {
            await send()
            this.#logger.info(`${link.master} accepts this syndic: ${tag} sent`)
            return
          } catch (error) {
            if (!notSyndic(error)) return this.#logger.warning(`could not send ${tag} to ${link.master}: ${(error as Error).message}`)
          }
        }
      })(),
    )
  }

  #track(task: Promise<unknown>): void {
    this.#tasks.add(task)
    void task.finally(() => this.#tasks.delete(task))
  }

  /** One upper master's jobs, passed down in publish order until the link closes. */
  async #serve(link: MasterLink): Promise<void> {
    for await (const publish of link.publishes()) {
      if (this.#controller.signal.aborted) break
      try {
        await this.#relay(link, publish.job)
      } catch (error) {
        if (this.#controller.signal.aborted) break
        this.#logger.error(`unexpected error while passing job ${publish.job.jid} down; continuing`, error)
      }
    }
  }

  /**
   * Publishes an upper master's job into this syndic's master: same jid, `to` one less (Salt), master_id
   * kept; the lower master resolves its own targets. Then announces upward the minions it expects and
   * the lower syndics still to hear from. A job whose master_id is this master's own is not passed down.
   */
  async #relay(link: MasterLink, job: Readonly<JobLoad>): Promise<void> {
    const opts = this.opts
    const upper = this.#uppers.get(link.master)!
    if (typeof opts.master_id === 'string' && job.master_id === opts.master_id) {
      this.#events.emit({ type: 'relay-skipped', master: link.master, jid: job.jid, reason: `master_id ${job.master_id} is this master's` })
      return
    }
    const to = (typeof job.to === 'number' ? job.to : opts.timeout) - 1
    const load: Record<string, unknown> = {
      cmd: 'publish',
      tgt: job.tgt,
      tgt_type: job.tgt_type,
      fun: job.fun,
      arg: [...job.arg],
      kwarg: { ...(job.kwarg ?? {}) },
      jid: job.jid,
      ret: job.ret,
      user: job.user,
      to,
      // For the lower master's audit log: this publish was passed down by a syndic.
      origin: { client: 'syndic', address: link.master },
    }
    if (job.master_id !== undefined) load['master_id'] = job.master_id
    const meta = { fun: job.fun, load: { ...job } as Record<string, unknown>, ...(job.master_id === undefined ? {} : { master_id: job.master_id }) }
    this.#routes.set(job.jid, link.master)
    let reply: PublishReply
    try {
      reply = checkReply(await this.#request(load))
    } catch (error) {
      if (this.#controller.signal.aborted) return
      const message = (error as Error).message
      this.#logger.error(`could not pass job ${job.jid} (${job.fun}) from ${link.master} down to this syndic's master: ${message}`)
      this.#events.emit({ type: 'relay-failed', master: link.master, jid: job.jid, message })
      // Nobody here will answer: tell the upper master so its client does not wait for this syndic.
      upper.forwarder.announce(job.jid, [], [], meta)
      return
    }
    const syndics = Object.keys(reply.syndics ?? {})
    const open = await this.#jobs!.open(job.jid, link.master, reply.minions, syndics)
    upper.forwarder.announce(job.jid, reply.minions, syndics, meta)
    this.#events.emit({ type: 'relayed', master: link.master, jid: job.jid, fun: job.fun, minions: [...reply.minions], syndics })
    this.#jobs!.closeIfComplete(open)
  }

  /** The master's bus: returns of the jobs passed down, lower syndics' announcements, and the rest (forwarded as events). */
  async #readBus(): Promise<void> {
    const bus = this.#bus!
    for await (const event of bus.iter({ hwm: BUS_READER_HWM, signal: this.#controller.signal })) {
      try {
        this.#onBusEvent(event)
      } catch (error) {
        this.#logger.error(`unexpected error on bus event ${event.tag}; continuing`, error)
      }
    }
  }

  #onBusEvent(event: BusEvent): void {
    const ret = parseJobReturnTag(event.tag)
    if (ret !== undefined) return this.#onReturn(ret.jid, ret.id, event.data)
    if (event.tag === BUS_DROPPED_TAG) return this.#reconcile(`the master's bus dropped ${String(event.data['count'] ?? 'some')} event(s) for this syndic`)
    const announcement = parseSyndicAnnouncement(event)
    if (announcement !== undefined) return this.#onAnnouncement(announcement)
    // The master's own job events stay here: a job's minions go up as announcements, its returns in batches.
    if (event.tag.startsWith(JOB_TAG_PREFIX)) return
    this.#rawEvents.push({ tag: event.tag, data: event.data })
    if (this.#rawEvents.length > RAW_EVENTS_LIMIT) {
      this.#rawEvents.shift()
      this.#rawDropped++
    }
  }

  #onReturn(jid: string, minion: string, data: Record<string, unknown>): void {
    const route = this.#routes.get(jid) ?? this.#jobs?.get(jid)?.master
    if (route === undefined) return // not a job from above: it stays here
    const upper = this.#uppers.get(route)
    if (upper === undefined) return
    const ret = syndicReturnOf(data)
    // The job's last expected return goes up at once; the others wait for the batch (syndic_event_forward_timeout).
    const last = this.#jobs?.see(jid, minion) === true
    upper.forwarder.addReturn(
      jid,
      minion,
      ret,
      {
        ...(typeof data['fun'] === 'string' ? { fun: data['fun'] } : {}),
        ...(typeof data['master_id'] === 'string' ? { master_id: data['master_id'] } : {}),
      },
      last,
    )
  }

  /** A lower syndic announced minions for a job passed down: they are announced further up, as this syndic's. */
  #onAnnouncement(announcement: SyndicAnnouncementParts): void {
    const job = this.#jobs?.get(announcement.jid)
    const route = this.#routes.get(announcement.jid) ?? job?.master
    const upper = route === undefined ? undefined : this.#uppers.get(route)
    if (upper === undefined) return
    if (job !== undefined) {
      this.#jobs!.expect(job.jid, announcement.minions)
      if (announcement.pending.length === 0) job.pendingSyndics.delete(announcement.syndic)
    }
    upper.forwarder.announce(announcement.jid, announcement.minions, job === undefined ? undefined : [...job.pendingSyndics])
    if (job !== undefined) this.#jobs!.closeIfComplete(job)
  }

  /** Every `syndic_event_forward_timeout`: other events go up; a bus that reconnected or dropped means a read-back. */
  #tick(): void {
    if (this.#controller.signal.aborted) return
    const bus = this.#bus
    if (bus !== undefined) {
      if (bus.reconnects !== this.#busReconnects) {
        this.#busReconnects = bus.reconnects
        this.#reconcile("the master's bus reconnected")
      }
      if (bus.dropped !== this.#busDropped) {
        this.#busDropped = bus.dropped
        this.#reconcile("this syndic's bus reader fell behind")
      }
    }
    if (Date.now() - this.#lastExpire > EXPIRE_EVERY_MS) {
      this.#lastExpire = Date.now()
      const expired = this.#jobs?.expire() ?? 0
      if (expired > 0) this.#logger.info(`stopped watching ${expired} job(s) open longer than keep_jobs`)
    }
    this.#forwardEvents()
  }

  /** Other events of the master, once, to every upper master that is connected (best effort, as in Salt). */
  #forwardEvents(): void {
    if (this.#rawDropped > 0) {
      this.#logger.warning(`${this.#rawDropped} event(s) of this master not forwarded: more than ${RAW_EVENTS_LIMIT} were waiting`)
      this.#rawDropped = 0
    }
    if (this.#rawEvents.length === 0) return
    const events = this.#takeEvents()
    if (events.length === 0) return
    for (const { link } of this.#uppers.values()) {
      const status = link.status
      if (!status.authenticated || !status.connected) continue
      this.#track(
        link.send({ cmd: '_syndic_event', id: this.id, events }, { tries: 1 }).catch((error: unknown) => {
          if (!this.#controller.signal.aborted) this.#logger.debug(`${events.length} event(s) not forwarded to ${link.master}: ${(error as Error).message}`)
        }),
      )
    }
  }

  /**
   * The next events to forward: at most {@link RAW_EVENTS_PER_SEND}, within one frame of `max_frame_bytes`.
   * An event too big for a frame on its own, or whose tag the master above would refuse, is dropped here
   * (forwarding is best effort, as in Salt), logged.
   */
  #takeEvents(): EventLoad[] {
    const budget = Math.max(1024, endpointLimitsFromConfig(this.opts).maxFrameBytes - RETURN_FRAME_RESERVE_BYTES)
    const events: EventLoad[] = []
    let bytes = 0
    while (events.length < RAW_EVENTS_PER_SEND && this.#rawEvents.length > 0) {
      // The master above refuses a batch holding a tag that is not printable text: leave such an event here.
      const problem = tagProblem(this.#rawEvents[0]!.tag)
      if (problem !== undefined) {
        const [event] = this.#rawEvents.splice(0, 1)
        this.#logger.warning(`event ${JSON.stringify(event!.tag.slice(0, 120))} of this master not forwarded: its tag ${problem}`)
        continue
      }
      const size = encodedBytes(this.#rawEvents[0])
      if (size > budget) {
        const [event] = this.#rawEvents.splice(0, 1)
        this.#logger.warning(`event ${event!.tag.slice(0, 120)} of this master not forwarded: ${size} bytes, more than fits in max_frame_bytes (${this.opts.max_frame_bytes})`)
        continue
      }
      if (bytes + size > budget) break
      events.push(this.#rawEvents.shift()!)
      bytes += size
    }
    return events
  }

  /**
   * Reads every open job back from the master's job cache (`jobs.list_job`) and forwards the returns not
   * yet gone up. Single-flight: a request while one runs makes it run once more after.
   */
  #reconcile(reason: string): void {
    if (this.#controller.signal.aborted) return
    if (this.#reconciling !== undefined) {
      this.#reconcileAgain = reason
      return
    }
    this.#reconciling = this.#reconcileAll(reason)
      .catch((error: unknown) => {
        if (!this.#controller.signal.aborted) this.#logger.error(`reading open jobs back from the master's job cache failed (${reason})`, error)
      })
      .finally(() => {
        this.#reconciling = undefined
        const again = this.#reconcileAgain
        this.#reconcileAgain = undefined
        if (again !== undefined) this.#reconcile(again)
      })
    this.#track(this.#reconciling)
  }

  async #reconcileAll(reason: string): Promise<void> {
    const jobs = this.#jobs?.all() ?? []
    if (jobs.length === 0) return
    this.#logger.info(`${reason}: reading ${jobs.length} open job(s) back from the master's job cache`)
    let returns = 0
    for (const job of jobs) {
      if (this.#controller.signal.aborted) return
      returns += await this.#reconcileJob(job)
    }
    this.#events.emit({ type: 'reconciled', reason, jobs: jobs.length, returns })
  }

  /** One job's stored returns that have not gone up, queued for its upper master; how many. */
  async #reconcileJob(job: OpenJob): Promise<number> {
    const upper = this.#uppers.get(job.master)
    if (upper === undefined) {
      this.#jobs!.close(job.jid) // its upper master is no longer configured
      return 0
    }
    const reply = (await this.#request({ cmd: 'runner', fun: 'jobs.list_job', arg: [job.jid], kwarg: {} })) as {
      return?: unknown
      success?: unknown
    }
    if (reply?.success === false || typeof reply?.return !== 'object' || reply.return === null) return 0
    const listed = parseListJob(reply.return)
    if (!job.known) {
      job.known = true
      this.#routes.set(job.jid, job.master)
    }
    const fun = listed.fun
    let count = 0
    for (const [minion, stored] of Object.entries(listed.returns)) {
      // Only this master's minions (and those lower syndics announced): a shared job cache holds the whole tree's.
      if (!job.expected.has(minion) || job.settled.has(minion)) continue
      const ret = syndicReturnOf(stored as unknown as Record<string, unknown>, listed.funArgs)
      upper.forwarder.addReturn(job.jid, minion, ret, fun === undefined ? {} : { fun })
      count++
    }
    if (count === 0) this.#jobs!.closeIfComplete(job)
    return count
  }

  /**
   * Stops: no more jobs are taken; what waits to go up is spooled (a restart sends it); the links close.
   * Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop()
    return this.#stopping
  }

  async #stop(): Promise<void> {
    this.#controller.abort(new ClosedError('syndic', this.id))
    await this.#starting?.catch(() => {})
    await this.#closeAll()
    this.#logger.info(`syndic ${this.id} stopped`)
    this.#events.emit({ type: 'stopped' })
    this.#events.close()
  }

  async #closeAll(): Promise<void> {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#bus?.close()
    // Closing the links ends their publish streams (and the loops reading them); a batch in flight is spooled.
    await this.#policy.close().catch(() => {})
    await Promise.allSettled([...this.#tasks])
    for (const { forwarder } of this.#uppers.values()) await forwarder.close()
    await this.#jobs?.closeJournal()
    await this.#lower?.close()
  }
}

/** The lower master's publish reply, checked. */
function checkReply(reply: unknown): PublishReply {
  const checked = parsePublishReply(reply)
  if (checked === undefined) throw new LowerMasterError('publish', `it answered ${JSON.stringify(reply)?.slice(0, 200)}, not {jid, minions}`)
  return checked
}

