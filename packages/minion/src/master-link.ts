/**
 * One master, as a minion (or a syndic, hearing its upper master) sees it: the request and publish
 * clients, `_auth` with the master's key pinned in a file of its own, the sealed sender, the
 * return spool, re-authentication (on a publish under a newer session key, on a reconnected
 * request link), and the stream of opened, validated, fresh job loads. The publish port is the one
 * the master names in its auth reply unless `publishPort` overrides it. Nothing here knows about
 * grains or execution modules: what to send after each auth is the owner's `afterAuth`.
 *
 * Freshness (docs/protocol.md): every job load carries its issue time and expiry in the master's
 * clock, which the link knows from its last `_auth`. A publish that has expired, is issued beyond
 * `clock_skew` in the future, or arrives when the session has outlived its lifetime is checked once
 * more against the master's clock through one bounded `_auth`, and dropped if it still fails: a
 * recorded publish replayed later — after any number of other jobs, or once the master is gone —
 * runs nothing.
 */
import { validateJobLoad, type JobLoad, type ReturnLoad } from '@brine/common'
import { CryptCache, isPublishEnvelope, openPublish, StaleSessionKeyError, type KeyPair, type PublishEnvelope } from '@brine/crypt'
import {
  ClosedError,
  InvalidOperationError,
  silentLogger,
  type ClientOptions,
  type Logger,
  type PublishClient,
  type RequestClient,
  type Transport,
  type WireValue,
} from '@brine/transport'
import { MinionAuth, type MasterSession } from './auth.js'
import { LifecycleEvents, RateLimitedLog, settleWithin, type MasterLinkEvent } from './lifecycle.js'
import { systemClock, type Clock } from './master-time.js'
import { Returner, sendSealedFresh, type SealedSendOptions } from './returner.js'
import { resolveMaster } from './resolve-master.js'
import { ReturnSpool } from './spool.js'

/** Where a job came from, and how its return goes back there. */
export interface ReturnRoute {
  /** The master's name (`host:port` of its ret port). */
  readonly master: string
  /** Sends a return to this master: acknowledged, or spooled and retried. Never rejects. */
  deliver(load: ReturnLoad): Promise<void>
  /**
   * This master's clock as the link knows it (ms since the epoch), which a job's `expire` is in; it
   * keeps running after the link closes (another link to the same master may still be handed a copy
   * that is valid in it). -Infinity before the master was first heard; +Infinity for a link closed
   * without ever hearing it (nothing came from it).
   */
  masterNow(): number
}

/** One job load from one master, opened and validated. The load is shared (frozen); copy what you change. */
export interface LinkPublish {
  readonly job: Readonly<JobLoad>
  /** The link the job came from: its return goes back through `link.deliver`. */
  readonly link: ReturnRoute
}

export interface MasterLinkOptions {
  /** The id this side authenticates as (a minion's id; a syndic's own id). */
  id: string
  keys: KeyPair
  /** The loaded transport both clients use. */
  transport: Transport
  /** The master's host and request (ret) port. */
  host: string
  port: number
  /**
   * The master's publish port, to override the one its auth reply names (a minion's explicit
   * `publish_port`). Absent: subscribe once the first auth says where (Salt's minions do the same).
   */
  publishPort?: number
  /** Reconnect backoff and endpoint limits of both clients. */
  client?: Omit<ClientOptions, 'host' | 'port' | 'logger'>
  /** Where the master's keys are pinned: `pkiDir`/`pinFile` (default Salt's `minion_master.pub`). */
  pkiDir: string
  pinFile?: string
  /** Salt's `master_finger`: this master's fingerprint, pinned up front. */
  masterFinger?: string
  /** auth_timeout: per-attempt `_auth` timeout, and the default timeout of {@link MasterLink.send}, ms. */
  authTimeoutMs: number
  /** acceptance_wait_time and acceptance_wait_time_max, ms. */
  acceptanceWaitMs: number
  acceptanceWaitMaxMs: number
  /** This master's return spool directory. */
  spoolDir: string
  /** return_retry_timer..return_retry_timer_max: per-try timeout of a return and the wait before a spool retry, ms. */
  returnRetryDelayMs: () => number
  /** return_retry_tries. */
  returnRetryTries: number
  /** Opened publishes, verified signatures and key objects (default: one of the link's own). A swarm shares one. */
  cache?: CryptCache
  logger?: Logger
  /** Aborting it aborts the link's work at once (auth waits, sends in flight), as {@link MasterLink.close} does first. */
  signal?: AbortSignal
  /**
   * Called after every successful auth, before the spool is flushed: what the owner sends then
   * (a minion sends its grains, and after the first auth its start event). Errors are logged.
   */
  afterAuth?: (link: MasterLink, first: boolean) => Promise<void>
  /** Every event of this link, synchronously as it happens (a minion forwards them to its own stream). */
  onEvent?: (event: MasterLinkEvent) => void
  /** This host's clocks (default the system's); tests inject one to move time. */
  clock?: Clock
  /** How far ahead of the master's clock (as last heard) a publish may be issued, ms (`clock_skew`, default 300 s). */
  clockSkewMs?: number
}

/** What a policy reads to choose among links. */
export interface MasterLinkStatus {
  /** The request link is connected to the master. */
  connected: boolean
  /** A session key is held (authenticated at least once and not closed). */
  authenticated: boolean
  /** Session key generation held, if any. */
  gen?: number
  closed: boolean
}

/** Generations found stale right after a fresh auth (replays of old publishes, not a rotation) are not re-authenticated for again for this long. */
const STALE_HOLD_MS = 10_000
const STALE_MEMORY = 16
/** How long close() waits for returns in flight to be acknowledged or spooled before closing the clients anyway. */
const CLOSE_DRAIN_MS = 10_000
/** Events a late {@link MasterLink.events} reader still gets. */
const EVENT_HISTORY = 64
/** A publish that looks stale makes the link ask the master's clock again, at most once per this. */
const REFRESH_AFTER_MS = 10_000
/** The publish port when neither config nor the master says (Salt's default). */
const DEFAULT_PUBLISH_PORT = 4505
/** How long the first auth's messages (the start event) wait for the publish link to connect. */
const PUBLISH_CONNECT_WAIT_MS = 2000
const DEFAULT_CLOCK_SKEW_MS = 300_000

/** Why a publish is not run as it is: it needs a fresher look at the master's clock, or it is refused. */
type Staleness = 'session expired' | 'expired' | 'issued in the future'

export class MasterLink implements ReturnRoute {
  /** `host:port` of the master's ret port: the name every event and log line uses. */
  readonly master: string
  /** Resolves after the first successful `_auth`; rejects with ClosedError if close() comes first. */
  readonly authenticated: Promise<void>
  readonly #o: MasterLinkOptions
  readonly #logger: Logger
  readonly #controller = new AbortController()
  readonly #events = new LifecycleEvents<MasterLinkEvent>(EVENT_HISTORY)
  readonly #request: RequestClient
  /** The publish client; created once its port is known (the override, else the first auth reply's). */
  #publish: PublishClient | undefined
  #publishPort: number | undefined
  /** Resolves with the first publish client (undefined if the link closes first). */
  readonly #publishReady: Promise<PublishClient | undefined>
  #resolvePublishReady!: (client: PublishClient | undefined) => void
  /** Resolves when the current publish client first connects (or the link closes). */
  #publishConnected: Promise<void> = Promise.resolve()
  readonly #clientOptions: Omit<ClientOptions, 'port' | 'logger'>
  readonly #clock: Clock
  readonly #auth: MinionAuth
  readonly #returner: Returner
  readonly #cache: CryptCache
  readonly #dropLog = new RateLimitedLog()
  readonly #staleGens = new Map<number, number>()
  readonly #tasks = new Set<Promise<unknown>>()
  #resolveAuthenticated!: () => void
  #rejectAuthenticated!: (error: Error) => void
  #connected = false
  #publishesTaken = false
  #starting: Promise<void> | undefined
  #closing: Promise<void> | undefined

  constructor(options: MasterLinkOptions) {
    this.#o = options
    this.master = `${options.host}:${options.port}`
    this.#logger = options.logger ?? silentLogger
    this.#cache = options.cache ?? new CryptCache({ publicKeys: 4, sharedKeys: 4, openedPublishes: 16, verifiedSignatures: 16 })
    this.authenticated = new Promise<void>((resolve, reject) => {
      this.#resolveAuthenticated = resolve
      this.#rejectAuthenticated = reject
    })
    this.authenticated.catch(() => {}) // nobody has to listen
    const parent = options.signal
    if (parent !== undefined) {
      if (parent.aborted) this.#controller.abort(parent.reason)
      else parent.addEventListener('abort', () => this.#controller.abort(parent.reason), { once: true, signal: this.#controller.signal })
    }
    const signal = this.#controller.signal
    const emit = (event: MasterLinkEvent): void => this.#emit(event)
    const common = { host: options.host, ...options.client }
    this.#clientOptions = common
    this.#clock = options.clock ?? systemClock
    this.#publishReady = new Promise((resolve) => (this.#resolvePublishReady = resolve))
    // Factories are synchronous and do no I/O: the clients exist from here on, and connect in start().
    this.#request = options.transport.createRequestClient({ ...common, port: options.port, timeout: options.authTimeoutMs, logger: this.#logger.child('request') })
    if (options.publishPort !== undefined) this.#createPublish(options.publishPort)
    this.#auth = new MinionAuth({
      id: options.id,
      keys: options.keys,
      pkiDir: options.pkiDir,
      ...(options.pinFile === undefined ? {} : { pinFile: options.pinFile }),
      ...(options.masterFinger === undefined ? {} : { masterFinger: options.masterFinger }),
      client: this.#request,
      master: this.master,
      cache: this.#cache,
      authTimeoutMs: options.authTimeoutMs,
      acceptanceWaitMs: options.acceptanceWaitMs,
      acceptanceWaitMaxMs: options.acceptanceWaitMaxMs,
      logger: this.#logger.child('auth'),
      signal,
      emit,
      clock: this.#clock,
      resolve: () => resolveMaster(options.host, signal),
      onAuthenticated: (session, first) => {
        this.#subscribeAt(session)
        if (first) this.#resolveAuthenticated()
        this.#track(this.#afterAuth(first))
      },
    })
    this.#returner = new Returner({
      client: this.#request,
      master: this.master,
      auth: this.#auth,
      spool: new ReturnSpool(options.spoolDir, this.#logger.child('spool')),
      logger: this.#logger.child('return'),
      emit,
      retryDelayMs: options.returnRetryDelayMs,
      tries: options.returnRetryTries,
      signal,
      ...(options.client?.maxFrameBytes === undefined ? {} : { maxFrameBytes: options.client.maxFrameBytes }),
    })
  }

  #emit(event: MasterLinkEvent): void {
    this.#events.emit(event)
    this.#o.onEvent?.(event)
  }

  /** Creates (does not start) the publish client for `port`. */
  #createPublish(port: number): PublishClient {
    const client = this.#o.transport.createPublishClient({ ...this.#clientOptions, port, id: this.#o.id, logger: this.#logger.child('publish') })
    this.#publish = client
    this.#publishPort = port
    this.#resolvePublishReady(client)
    let connected: () => void = () => {}
    this.#publishConnected = new Promise((resolve) => {
      connected = resolve
      this.#controller.signal.addEventListener('abort', () => resolve(), { once: true })
    })
    this.#track(this.#watchPublishLink(client, connected))
    return client
  }

  /** Says when a lost publish connection is back: until then this master's jobs cannot reach the minion. */
  async #watchPublishLink(client: PublishClient, connected: () => void): Promise<void> {
    let connects = 0
    for await (const event of client.events()) {
      if (this.#controller.signal.aborted) break
      if (event.type === 'peer-disconnect') this.#logger.info(`publishes from ${client.address}: connection lost`)
      if (event.type !== 'peer-connect') continue
      if (++connects === 1) connected()
      else this.#logger.info(`publishes from ${client.address}: connected again`)
    }
  }

  /**
   * After an auth: without an explicit publish port, subscribe where the master said (replacing the
   * client if a restarted master names another port; its stream then goes on from the new one).
   */
  #subscribeAt(session: MasterSession): void {
    if (this.#o.publishPort !== undefined || this.#closing !== undefined) return
    let port = session.publishPort
    if (port === undefined) {
      port = this.#publishPort ?? DEFAULT_PUBLISH_PORT
      if (this.#publish === undefined) this.#logger.warning(`the master at ${this.master} did not name its publish port; subscribing to ${port}`)
    }
    if (this.#publish !== undefined && port === this.#publishPort) return
    const old = this.#publish
    const client = this.#createPublish(port)
    this.#logger.info(`master ${this.master}: publishes on port ${port}${old === undefined ? '' : ` (was ${old.address})`}, as its auth reply says`)
    this.#track(
      (async () => {
        await old?.close()
        // A link closing meanwhile has closed this client too: nothing to start.
        if (this.#closing === undefined) await client.start()
      })().catch((error: unknown) => {
        if (this.#closing === undefined) this.#logger.error(`could not start the publish client for ${client.address}`, error)
      }),
    )
  }

  #track(task: Promise<unknown>): void {
    this.#tasks.add(task)
    void task.finally(() => this.#tasks.delete(task))
  }

  /** The link's events: the last few, then live ones until close(). Any number of consumers. */
  events(): AsyncIterable<MasterLinkEvent> {
    return this.#events.events()
  }

  get status(): MasterLinkStatus {
    const session = this.#closing === undefined ? this.#auth.current : undefined
    return {
      connected: this.#connected && this.#closing === undefined,
      authenticated: session !== undefined,
      ...(session === undefined ? {} : { gen: session.session.gen }),
      closed: this.#closing !== undefined,
    }
  }

  /** The session of the last successful auth, if any. */
  get session(): MasterSession | undefined {
    return this.#auth.current
  }

  /** Returns handed to {@link deliver} and not yet acknowledged or spooled. */
  get returnsInFlight(): number {
    return this.#returner.inFlight
  }

  /**
   * Connects both clients and starts authenticating in the background. Resolves once connecting
   * has begun, not when the key is accepted (that can take an operator's action): await
   * {@link authenticated} or watch {@link events} for that.
   */
  start(): Promise<void> {
    if (this.#closing !== undefined) return Promise.reject(new ClosedError('master link', this.master))
    if (this.#starting !== undefined) return Promise.reject(new InvalidOperationError(`the link to ${this.master} is already started`))
    this.#starting = this.#start()
    return this.#starting
  }

  async #start(): Promise<void> {
    // At debug, what the name resolves to before the transport connects. At every level the first auth attempt
    // looks it up itself and reports a name that does not resolve at error level, instead of as a timeout, so
    // this lookup (bounded, but a slow resolver's seconds at start) runs only when its line would be shown.
    if (this.#logger.isEnabled('debug')) {
      await resolveMaster(this.#o.host).then(
        (addresses) => this.#logger.debug(`master ${this.master}: '${this.#o.host}' resolves to ${addresses.join(', ') || '(lookup still running)'}`),
        (error: unknown) => this.#logger.debug(`master ${this.master}: ${(error as Error).message}`),
      )
    }
    await this.#request.start()
    await this.#publish?.start()
    this.#logger.info(
      `master ${this.master}: transport ${this.#o.transport.name}, requests ${this.#request.address}, ` +
        `publishes ${this.#publish?.address ?? "on the port the master's auth reply names"}`,
    )
    this.#track(this.#watchRequestLink())
    this.#track(this.#auth.authenticate().catch(() => {})) // ends with ClosedError only when closing
  }

  /**
   * After every auth: the owner's messages (grains, start event), then the spool. After the first, these
   * wait (a bounded while) for the publish link to connect, as Salt's minion fires minion_start once its
   * publish channel is up: whoever waits for the start event to send a job then finds the minion listening.
   */
  async #afterAuth(first: boolean): Promise<void> {
    const signal = this.#controller.signal
    if (first && !(await settleWithin(this.#publishConnected, PUBLISH_CONNECT_WAIT_MS)) && !signal.aborted) {
      this.#logger.info(`publishes from ${this.#publish?.address ?? this.master}: not connected after ${PUBLISH_CONNECT_WAIT_MS} ms; announcing this minion all the same`)
    }
    try {
      await this.#o.afterAuth?.(this, first)
    } catch (error) {
      if (!signal.aborted) this.#logger.warning(`after authenticating with ${this.master}: ${(error as Error).message}`)
    }
    if (!signal.aborted) await this.#returner.flush()
  }

  /** Connection state for {@link status}; a reconnected request link may mean a restarted master: authenticate again (which flushes the spool). */
  async #watchRequestLink(): Promise<void> {
    let connects = 0
    for await (const event of this.#request.events()) {
      if (this.#controller.signal.aborted) break
      if (event.type === 'peer-disconnect') {
        this.#connected = false
        this.#emit({ type: 'master-disconnect', master: this.master, ...(event.reason === undefined ? {} : { reason: event.reason }) })
        continue
      }
      if (event.type !== 'peer-connect') continue
      this.#connected = true
      connects++
      this.#emit({ type: 'master-connect', master: this.master })
      if (connects > 1 && this.#auth.current !== undefined) {
        this.#logger.info(`reconnected to the master at ${this.#request.address}; re-authenticating`)
        this.#auth.authenticate().catch(() => {})
      }
    }
  }

  /**
   * The master's job loads, opened (re-authenticating once when the session key rotated) and
   * validated, in the order they were published. Forged, tampered, stale or malformed publishes
   * are dropped (a `publish-dropped` event, a rate-limited log line) and never end the stream; it
   * ends when the link closes. A single consumer: a second call throws InvalidOperationError.
   */
  publishes(): AsyncIterable<LinkPublish> {
    if (this.#publishesTaken) throw new InvalidOperationError(`the publishes of ${this.master} have a reader already`)
    this.#publishesTaken = true
    // A plain iterator rather than an async generator: one promise per job on the hot path, where a
    // swarm runs hundreds of links in one process.
    let client: PublishClient | undefined
    let envelopes: AsyncIterator<WireValue> | undefined
    const signal = this.#controller.signal
    const ended = (): IteratorResult<LinkPublish> => ({ done: true, value: undefined })
    const iterator: AsyncIterator<LinkPublish> = {
      next: async () => {
        for (;;) {
          if (envelopes === undefined || client !== this.#publish) {
            // The first client exists once the first auth named the port; a replaced one ends and the next takes over.
            client = this.#publish ?? (await this.#publishReady)
            if (client === undefined || signal.aborted) return ended()
            envelopes = client[Symbol.asyncIterator]()
          }
          const next = await envelopes.next()
          if (signal.aborted) return ended()
          if (next.done === true) {
            if (client === this.#publish) return ended()
            continue
          }
          let job: JobLoad | undefined
          try {
            const opened = this.#open(next.value)
            job = opened instanceof Promise ? await opened : opened
          } catch (error) {
            if (signal.aborted) return ended()
            this.#logger.error(`unexpected error while opening a publish from ${this.master}; continuing`, error)
            continue
          }
          if (job !== undefined) return { done: false, value: { job, link: this } }
        }
      },
      return: async () => {
        await envelopes?.return?.()
        return ended()
      },
    }
    return { [Symbol.asyncIterator]: () => iterator }
  }

  #drop(reason: string, detail: string, jid?: string): void {
    this.#dropLog.log(reason, (suppressed) =>
      this.#logger.warning(`dropped a publish from ${this.master}: ${detail}${suppressed > 0 ? ` (${suppressed} similar drops not logged)` : ''}`),
    )
    this.#emit(jid === undefined ? { type: 'publish-dropped', master: this.master, reason: detail } : { type: 'publish-dropped', master: this.master, reason: detail, jid })
  }

  /**
   * Verifies, decrypts and validates; undefined when dropped. Synchronous while a session is held
   * and the publish is under it (the hot path); re-authenticates once for a newer session key.
   */
  #open(envelope: WireValue): JobLoad | undefined | Promise<JobLoad | undefined> {
    if (!isPublishEnvelope(envelope)) {
      this.#drop('malformed', 'not a sealed publish envelope')
      return undefined
    }
    const current = this.#auth.current
    const opened = current === undefined ? 'authenticate' : this.#openWith(envelope, current, true)
    return opened === 'authenticate' ? this.#openAfterAuth(envelope, current === undefined) : opened
  }

  async #openAfterAuth(envelope: PublishEnvelope, firstAuth: boolean): Promise<JobLoad | undefined> {
    let master = await this.#auth.ready()
    if (!firstAuth) {
      // Signed by our master under a key we do not hold: the key rotated. Fetch it, then open this publish.
      this.#logger.info(`publish under session key generation ${envelope.gen} (this side holds ${master.session.gen}); re-authenticating with ${this.master}`)
      master = await this.#auth.authenticate()
    }
    const opened = this.#openWith(envelope, master, firstAuth)
    if (opened instanceof Promise) return opened
    return opened === 'authenticate' ? this.#openAfterAuth(envelope, false) : opened
  }

  /**
   * A publish that looked stale against the master's clock as last heard: hear it again (one bounded
   * `_auth`, at most one per REFRESH_AFTER_MS; within that, the clock as last heard), then run it only if
   * it is fresh by that. A master that cannot be reached leaves it refused.
   */
  async #openAfterRefresh(job: JobLoad, staleness: Staleness): Promise<JobLoad | undefined> {
    this.#logger.info(`job ${job.jid} from ${this.master} looks ${staleness}; checking the master's clock again before running it`)
    const master = await this.#auth.refresh(REFRESH_AFTER_MS)
    const still = master === undefined ? 'the master could not be reached to check it' : this.#staleness(job, master)
    if (still === undefined) return job
    this.#drop('stale', `job ${job.jid} refused: ${still}`, job.jid)
    return undefined
  }

  /** Why `job` may not run as the master's clock stands in `master`, or undefined when it is fresh. */
  #staleness(job: JobLoad, master: MasterSession): Staleness | undefined {
    const now = master.time.now()
    if (master.expireAt !== undefined && now > master.expireAt) return 'session expired'
    if (now > job.expire) return 'expired'
    if (job.issued > now + (this.#o.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS)) return 'issued in the future'
    return undefined
  }

  /**
   * Opens with `master`'s session keys: the job, undefined when dropped, 'authenticate' when a newer
   * session key may open it (only if `mayAuthenticate`), or a promise when it looked stale and the
   * master's clock is being checked again.
   */
  #openWith(envelope: PublishEnvelope, master: MasterSession, mayAuthenticate: boolean): JobLoad | undefined | 'authenticate' | Promise<JobLoad | undefined> {
    const gen = envelope.gen
    const session = typeof gen === 'number' ? (this.#auth.sessionFor(gen) ?? master.session) : master.session
    let load: WireValue
    try {
      load = openPublish(envelope, session, master.masterPub.sign, this.#cache)
    } catch (error) {
      if (error instanceof StaleSessionKeyError && mayAuthenticate && !this.#recentlyStale(error.gen)) return 'authenticate'
      if (error instanceof StaleSessionKeyError) {
        this.#staleGens.delete(error.gen)
        this.#staleGens.set(error.gen, Date.now())
        if (this.#staleGens.size > STALE_MEMORY) this.#staleGens.delete(this.#staleGens.keys().next().value as number)
      }
      const name = error instanceof Error ? error.name : 'Error'
      this.#drop(name, `${name}: ${error instanceof Error ? error.message : String(error)}`)
      return undefined
    }
    let job: JobLoad
    try {
      // Every minion sharing the cache reads the same opened load: it is validated once for all.
      job = typeof load === 'object' && load !== null ? this.#cache.derived(load, 'job', () => validateJobLoad(load)) : validateJobLoad(load)
    } catch (error) {
      this.#drop('invalid', `not a valid job load: ${(error as Error).message}`)
      return undefined
    }
    const staleness = this.#staleness(job, master)
    if (staleness === undefined) return job
    return this.#openAfterRefresh(job, staleness)
  }

  #recentlyStale(gen: number): boolean {
    const at = this.#staleGens.get(gen)
    return at !== undefined && Date.now() - at < STALE_HOLD_MS
  }

  /**
   * Whether the master answers now. On the socket transports a connected link is a live master (the connection
   * is the master's own, and goes when it does). On a broker (`peerSockets: false`) the connection is the
   * broker's and outlives a dead master, so the master is asked: an empty `_minion_event`, sealed, which it must
   * acknowledge within `timeoutMs` (false when not connected, or on a broker not authenticated: nothing to ask with).
   */
  async alive(timeoutMs: number): Promise<boolean> {
    const { connected, authenticated } = this.status
    if (!connected) return false
    if (this.#o.transport.peerSockets !== false) return true
    if (!authenticated) return false
    try {
      await this.send({ cmd: '_minion_event', id: this.#o.id, events: [] }, { timeout: timeoutMs, tries: 1 })
      return true
    } catch {
      return false
    }
  }

  /**
   * Seals `load` to the master and waits for its sealed acknowledgement (NotAcknowledgedError
   * otherwise; TimeoutError, ClosedError from the transport). Waits for the first auth if there
   * was none yet (ClosedError if the link closes first). Default: `auth_timeout` per try, one try.
   */
  async send(load: { readonly cmd: string; readonly [field: string]: unknown }, options: Partial<SealedSendOptions> = {}): Promise<void> {
    // close() closes the request client too, so a send in flight ends with ClosedError whichever signal it was given.
    if (this.#auth.current === undefined) await this.#auth.ready()
    const signal = options.signal ?? this.#controller.signal
    await sendSealedFresh(this.#request, this.#auth, load, { timeout: options.timeout ?? this.#o.authTimeoutMs, tries: options.tries ?? 1, signal })
  }

  /**
   * {@link send} for a request that asks something (the file server's): resolves with the master's sealed
   * answer, its data beside `ok`. An answer marked `duplicate` (the master had applied these very bytes
   * already, after a transport retry) carries no data, so the request is sealed afresh and sent once more.
   */
  async request(load: { readonly cmd: string; readonly [field: string]: unknown }, options: Partial<SealedSendOptions> = {}): Promise<Record<string, unknown>> {
    if (this.#auth.current === undefined) await this.#auth.ready()
    const signal = options.signal ?? this.#controller.signal
    const send = (): Promise<Record<string, unknown>> => sendSealedFresh(this.#request, this.#auth, load, { timeout: options.timeout ?? this.#o.authTimeoutMs, tries: options.tries ?? 1, signal })
    const answer = await send()
    return answer['duplicate'] === true ? send() : answer
  }

  /** The master's clock as this link last heard it, moved on by the time since (closed or not); see {@link ReturnRoute.masterNow}. */
  masterNow(): number {
    const session = this.#auth.current
    if (session !== undefined) return session.time.now()
    return this.#closing === undefined ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY
  }

  /** Sends a return (`_return`): acknowledged by the master, or spooled and retried. Never rejects. */
  deliver(load: ReturnLoad): Promise<void> {
    return this.#returner.deliver(load)
  }

  /**
   * Stops: aborts auth waits and sends in flight (their returns are spooled), waits for returns in
   * flight to be acknowledged or spooled (at most 10 s), closes both clients and ends the
   * publishes and events. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    const reason = new ClosedError('master link', this.master)
    this.#controller.abort(reason)
    this.#rejectAuthenticated(reason)
    await this.#starting?.catch(() => {})
    this.#returner.close()
    if (!(await settleWithin(this.#returner.drain(), CLOSE_DRAIN_MS))) {
      this.#logger.error(`returns to ${this.master} still in flight after ${CLOSE_DRAIN_MS} ms; closing anyway`)
    }
    this.#resolvePublishReady(undefined)
    await Promise.all([this.#request.close(), this.#publish?.close()])
    await settleWithin(Promise.allSettled([...this.#tasks]), CLOSE_DRAIN_MS)
    this.#returner.close()
    this.#connected = false
    this.#events.close()
  }
}
