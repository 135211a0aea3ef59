/**
 * One master, as a minion (or a syndic, hearing its upper master) sees it: the façade over the request
 * client, `_auth` with the master's key pinned in a file of its own ({@link MinionAuth}), the sealed
 * sender and the return spool ({@link Returner}), re-authentication on a reconnected request link, the
 * publish client ({@link PublishSubscription}: on the port the master names in its auth reply unless
 * `publishPort` overrides it) and the opening of what it carries ({@link PublishOpener}: verified,
 * validated, fresh job loads). Nothing here knows about grains or execution modules: what to send after
 * each auth is the owner's `afterAuth`.
 */
import type { JobLoad, ReturnLoad } from '@brine/protocol'
import { CryptCache, type KeyPair } from '@brine/crypt'
import { type ClientOptions, type RequestClient, type Transport } from '@brine/transport'
import { ClosedError, InvalidOperationError, LifecycleEvents, settleWithin, silentLogger, sleep, TimeoutError, type Logger } from '@brine/core'
import { authTimingOf, isBusy, MinionAuth, type AuthTiming, type MasterSession } from './auth.js'
import { AuthPacing } from './auth-pacing.js'
import type { MasterLinkEvent } from './lifecycle.js'
import { systemClock, type Clock } from './master-time.js'
import { Returner, sendSealedFresh, type SealedSendOptions } from './returner.js'
import { PublishOpener } from './publish-opener.js'
import { PublishSubscription } from './publish-subscription.js'
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

/** `authTimeoutMs` (auth_timeout) is also the default timeout of {@link MasterLink.send}. */
export interface MasterLinkOptions extends AuthTiming {
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
  /** Only requests, no publishes (`brine-call` asking the master for files and firing events, as Salt's `salt-call`). */
  requestsOnly?: boolean
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

/** How long close() waits for returns in flight to be acknowledged or spooled before closing the clients anyway. */
const CLOSE_DRAIN_MS = 10_000
/** Events a late {@link MasterLink.events} reader still gets. */
const EVENT_HISTORY = 64
/** How long the first auth's messages (the start event) wait for the publish link to connect. */
const PUBLISH_CONNECT_WAIT_MS = 2000
/** The shortest wait between the tries of {@link MasterLink.sendPersistently}, so a zero acceptance_wait_time cannot make it spin. */
const PERSIST_MIN_WAIT_MS = 50

/** Check-in tries with a master that timed out or said it was busy, before authenticating again instead. */
const CHECK_IN_TRIES = 5

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
  readonly #subscription: PublishSubscription
  readonly #opener: PublishOpener
  readonly #auth: MinionAuth
  readonly #returner: Returner
  readonly #tasks = new Set<Promise<unknown>>()
  #resolveAuthenticated!: () => void
  #rejectAuthenticated!: (error: Error) => void
  #connected = false
  #starting: Promise<void> | undefined
  #closing: Promise<void> | undefined

  constructor(options: MasterLinkOptions) {
    this.#o = options
    this.master = `${options.host}:${options.port}`
    this.#logger = options.logger ?? silentLogger
    const cache = options.cache ?? new CryptCache({ publicKeys: 4, sharedKeys: 4, openedPublishes: 16, verifiedSignatures: 16 })
    this.authenticated = new Promise<void>((resolve, reject) => {
      this.#resolveAuthenticated = resolve
      this.#rejectAuthenticated = reject
    })
    this.authenticated.catch(() => {}) // nobody has to listen
    followAbort(options.signal, this.#controller)
    const signal = this.#controller.signal
    const emit = (event: MasterLinkEvent): void => this.#emit(event)
    // One scope for both clients: on a broker transport they ride one connection (half the connections per minion).
    const common = { host: options.host, connectionScope: {}, ...options.client }
    // Factories are synchronous and do no I/O: the clients exist from here on, and connect in start().
    this.#request = options.transport.createRequestClient({
      ...common,
      port: options.port,
      timeout: options.authTimeoutMs,
      logger: this.#logger.child('request'),
    })
    this.#subscription = new PublishSubscription({
      id: options.id,
      transport: options.transport,
      master: this.master,
      client: common,
      ...(options.publishPort === undefined ? {} : { publishPort: options.publishPort }),
      logger: this.#logger,
      signal,
      closing: () => this.#closing !== undefined,
      track: (task) => this.#track(task),
      // The master is back: the request link need not wait out the rest of its reconnect interval.
      onReconnect: () => this.#request.reconnectNow(),
      ...(options.requestsOnly === true ? { requestsOnly: true } : {}),
    })
    this.#auth = this.#createAuth(cache, signal, emit)
    this.#opener = new PublishOpener({
      master: this.master,
      auth: this.#auth,
      cache,
      logger: this.#logger,
      emit,
      ...(options.clockSkewMs === undefined ? {} : { clockSkewMs: options.clockSkewMs }),
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

  #createAuth(cache: CryptCache, signal: AbortSignal, emit: (event: MasterLinkEvent) => void): MinionAuth {
    const options = this.#o
    return new MinionAuth({
      id: options.id,
      keys: options.keys,
      pkiDir: options.pkiDir,
      ...(options.pinFile === undefined ? {} : { pinFile: options.pinFile }),
      ...(options.masterFinger === undefined ? {} : { masterFinger: options.masterFinger }),
      client: this.#request,
      master: this.master,
      cache,
      ...authTimingOf(options),
      logger: this.#logger.child('auth'),
      signal,
      emit,
      clock: options.clock ?? systemClock,
      resolve: () => resolveMaster(options.host, signal),
      onAuthenticated: (session, first) => {
        this.#subscription.subscribeAt(session)
        if (first) this.#resolveAuthenticated()
        this.#track(this.#afterAuth(first))
      },
    })
  }

  #emit(event: MasterLinkEvent): void {
    this.#events.emit(event)
    this.#o.onEvent?.(event)
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

  /** The publish client is connected now, so the master's jobs can reach this minion. */
  get subscribed(): boolean {
    return this.#subscription.isConnected && this.#closing === undefined
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
    await this.#subscription.start()
    this.#logger.info(
      `master ${this.master}: transport ${this.#o.transport.name}, requests ${this.#request.address}, ` +
        `publishes ${this.#subscription.address ?? "on the port the master's auth reply names"}`,
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
    if (first && !(await settleWithin(this.#subscription.connected, PUBLISH_CONNECT_WAIT_MS)) && !signal.aborted) {
      this.#logger.info(
        `publishes from ${this.#subscription.address ?? this.master}: not connected after ${PUBLISH_CONNECT_WAIT_MS} ms; announcing this minion all the same`,
      )
    }
    try {
      await this.#o.afterAuth?.(this, first)
    } catch (error) {
      if (!signal.aborted) this.#logger.warning(`after authenticating with ${this.master}: ${(error as Error).message}`)
    }
    if (!signal.aborted) await this.#returner.flush()
  }

  /** Connection state for {@link status}; a reconnected request link may mean a restarted master: check in with it ({@link #checkIn}). */
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
      if (connects === 1) continue
      // The master is back: the publish link need not wait out the rest of its reconnect interval either.
      this.#subscription.reconnectNow()
      if (this.#auth.current !== undefined) this.#track(this.#checkIn())
    }
  }

  /**
   * After the request link reconnected (a restarted master, or the network), once the publish link is back too
   * (or a bounded wait is over): an empty `_minion_event`, sealed,
   * whose answer names the master's session key generation and publish port. A master that kept its session key
   * across a restart (docs/security.md) answers with the generation this link holds: nothing to do but send
   * the spooled returns. A new generation (the master rotated while this link was away) is met as a publish
   * under it would be, after a random wait up to `random_reauth_delay`; a moved publish port, a refusal, or a
   * master that does not say, are met by authenticating again at once, which flushes the spool.
   */
  async #checkIn(): Promise<void> {
    // Checked in means reachable again (what the master's manage.present then says): the publish link first, within a bound.
    if (!(await settleWithin(this.#subscription.whenConnected(), PUBLISH_CONNECT_WAIT_MS)) && !this.#controller.signal.aborted) {
      this.#logger.info(
        `publishes from ${this.#subscription.address ?? this.master}: not connected again after ${PUBLISH_CONNECT_WAIT_MS} ms; checking in all the same`,
      )
    }
    if (this.#controller.signal.aborted) return
    const held = this.#auth.current
    const answer = await this.#checkInAnswer()
    if (this.#controller.signal.aborted) return
    const gen = answer?.['gen']
    const port = answer?.['publish_port']
    const portHolds = this.#o.publishPort !== undefined || port === undefined || port === held?.publishPort
    if (held !== undefined && gen === held.session.gen && portHolds) {
      this.#logger.info(`reconnected to the master at ${this.#request.address}; its session key (generation ${held.session.gen}) still holds`)
      await this.#returner.flush()
      return
    }
    if (typeof gen === 'number' && portHolds) {
      this.#logger.info(`reconnected to the master at ${this.#request.address}; its session key is now generation ${gen}: re-authenticating`)
      await this.#auth.reauthenticate().catch(() => {})
      return
    }
    this.#logger.info(`reconnected to the master at ${this.#request.address}; re-authenticating`)
    await this.#auth.authenticate().catch(() => {})
  }

  /**
   * The master's answer to a check-in, or undefined when it refused it or never answered. A master that is only slow
   * or busy (a timeout, a busy refusal: a thousand minions checking in with a master just restarted) is asked again
   * after a return's retry wait, a few times: authenticating instead would cost it far more than the check-in.
   */
  async #checkInAnswer(): Promise<Record<string, unknown> | undefined> {
    for (let attempt = 1; attempt <= CHECK_IN_TRIES; attempt++) {
      try {
        return await this.#sendSealed({ cmd: '_minion_event', id: this.#o.id, events: [] }, { tries: 1 })
      } catch (error) {
        if (this.#controller.signal.aborted) return undefined
        this.#logger.debug(`checking in with ${this.master} after a reconnect (try ${attempt} of ${CHECK_IN_TRIES}): ${(error as Error).message}`)
        if (!(error instanceof TimeoutError || isBusy(error)) || attempt === CHECK_IN_TRIES) return undefined
        await sleep(this.#o.returnRetryDelayMs(), this.#controller.signal)
      }
    }
    return undefined
  }

  /**
   * The master's job loads, opened (re-authenticating once when the session key rotated) and
   * validated, in the order they were published. Forged, tampered, stale or malformed publishes
   * are dropped (a `publish-dropped` event, a rate-limited log line) and never end the stream; it
   * ends when the link closes. A single consumer: a second call throws InvalidOperationError.
   */
  publishes(): AsyncIterable<LinkPublish> {
    return this.#subscription.stream(
      (envelope) => this.#opener.open(envelope),
      (job) => ({ job, link: this }),
    )
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
    await this.#sendSealed(load, options)
  }

  /**
   * {@link send}, asked again while the master is overloaded: a try that timed out or that the master refused as
   * busy (a herd of minions authenticating fills its request workers, and it refuses what it cannot take) is
   * sent again after the `_auth` backoff ({@link AuthPacing}), from half of random_reauth_delay (so the herd's
   * minions that got in do not ask again as fast as those still authenticating) up to all of it, the top half
   * drawn at random, at most `tries` times in all. What an owner sends once after an auth (a minion's grains and
   * start event) is then not lost to the herd the auth was part of.
   * Rejects as {@link send} does with the last try's error (ClosedError once the link closes).
   */
  async sendPersistently(load: { readonly cmd: string; readonly [field: string]: unknown }, tries: number): Promise<void> {
    const o = this.#o
    const pacing = new AuthPacing({ reauthDelayMs: o.reauthDelayMs ?? 0, authTries: tries, ...(o.random === undefined ? {} : { random: o.random }) })
    const signal = this.#controller.signal
    for (let attempt = 1; ; attempt++) {
      try {
        await this.send(load)
        return
      } catch (error) {
        if (signal.aborted || attempt >= tries || !(error instanceof TimeoutError || isBusy(error))) throw error
        const { delay } = pacing.afterOverload(Math.max(PERSIST_MIN_WAIT_MS, o.acceptanceWaitMs, (o.reauthDelayMs ?? 0) / 2))
        this.#logger.debug(`${load.cmd} to ${this.master} not answered (${(error as Error).message}); sending it again in ${delay} ms`)
        await sleep(delay, signal)
      }
    }
  }

  /**
   * {@link send} for a request that asks something (the file server's): resolves with the master's sealed
   * answer, its data beside `ok`. An answer marked `duplicate` (the master had applied these very bytes
   * already, after a transport retry) carries no data, so the request is sealed afresh and sent once more.
   */
  async request(load: { readonly cmd: string; readonly [field: string]: unknown }, options: Partial<SealedSendOptions> = {}): Promise<Record<string, unknown>> {
    const answer = await this.#sendSealed(load, options)
    return answer['duplicate'] === true ? this.#sendSealed(load, options) : answer
  }

  async #sendSealed(load: { readonly cmd: string; readonly [field: string]: unknown }, options: Partial<SealedSendOptions>): Promise<Record<string, unknown>> {
    // close() closes the request client too, so a send in flight ends with ClosedError whichever signal it was given.
    if (this.#auth.current === undefined) await this.#auth.ready()
    const signal = options.signal ?? this.#controller.signal
    return sendSealedFresh(this.#request, this.#auth, load, { timeout: options.timeout ?? this.#o.authTimeoutMs, tries: options.tries ?? 1, signal })
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
    await Promise.all([this.#request.close(), this.#subscription.close()])
    await settleWithin(Promise.allSettled([...this.#tasks]), CLOSE_DRAIN_MS)
    this.#returner.close()
    this.#connected = false
    this.#events.close()
  }
}

/** Aborts `controller` when `parent` aborts (at once if it has), until the controller aborts on its own. */
function followAbort(parent: AbortSignal | undefined, controller: AbortController): void {
  if (parent === undefined) return
  if (parent.aborted) controller.abort(parent.reason)
  else parent.addEventListener('abort', () => controller.abort(parent.reason), { once: true, signal: controller.signal })
}
