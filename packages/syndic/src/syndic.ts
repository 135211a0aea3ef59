/**
 * The syndic daemon (DESIGN §6, Salt's `salt-syndic`): beside a master, it hears one or more upper
 * masters as a minion does (a {@link MasterLink} each), passes every job they publish down into its own
 * master with the same jid, and forwards what comes back — announcements of the minions that will
 * answer, then their returns — upward in sealed `_syndic_return` batches.
 *
 * Returns are read from its master's event bus and, whenever that reader may have missed some (the bus
 * dropped events for it, the bus reconnected, the syndic restarted), read back from its master's job
 * cache for every job still open (`jobs.list_job`), so none is lost; the upper master stores each once.
 *
 * This class composes the parts and runs their clock: {@link LowerMaster} (its own master), an
 * {@link UpperMaster} per upper master, the {@link Relay} (jobs down), the {@link ReturnFollower}
 * (returns and announcements up, the open-jobs journal, read-backs) and the {@link EventForwarder}
 * (the master's other events up).
 */
import { join } from 'node:path'
import { loadTransport } from '@brine/common'
import { checkSyndicMasters, endpointLimitsFromConfig, mastersOf, timeoutsFromConfig, type SyndicConfig } from '@brine/config'
import { type BusEvent } from '@brine/protocol'
import { CryptCache, loadOrCreateKeys } from '@brine/crypt'
import { AllMastersPolicy, authIdOf, failoverOrder, type MasterLink, type MasterLinkEvent } from '@brine/link'
import { ClosedError, createLogger, InvalidOperationError, LifecycleEvents, type Logger } from '@brine/core'
import { EventForwarder } from './event-forwarder.js'
import type { ForwarderEvent } from './forwarder.js'
import { LowerMaster } from './lower-master.js'
import { Relay, type RelayEvent } from './relay.js'
import { ReturnFollower, type ReturnFollowerEvent } from './return-follower.js'
import { UpperMaster } from './upper-master.js'

/** What the syndic reports: its upper links' events, and what it does with jobs and returns. */
export type SyndicEvent = MasterLinkEvent | ForwarderEvent | RelayEvent | ReturnFollowerEvent | { type: 'stopped' }

export interface SyndicOptions {
  /** Default: a stderr logger at `opts.log_level`. */
  logger?: Logger
}

/** Events kept for a late reader of {@link Syndic.events}. */
const EVENT_HISTORY = 1000
/** Events of the master's bus buffered for the syndic's reader before the newest are dropped (and the cache read back). */
const BUS_READER_HWM = 1_000_000

/** What exists once start() has read the config: built together, used together. */
interface Parts {
  follower: ReturnFollower
  relay: Relay
  events: EventForwarder
}

export class Syndic {
  readonly id: string
  readonly opts: SyndicConfig
  readonly #logger: Logger
  readonly #events = new LifecycleEvents<SyndicEvent>(EVENT_HISTORY)
  readonly #controller = new AbortController()
  readonly #uppers = new Map<string, UpperMaster>()
  /** The links to the upper masters: every one at once, each one's jobs relayed (a multi-master minion's `str` policy). */
  readonly #policy = new AllMastersPolicy<MasterLink>()
  readonly #tasks = new Set<Promise<unknown>>()
  readonly #lower: LowerMaster
  #parts: Parts | undefined
  #timer: NodeJS.Timeout | undefined
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
    this.#lower = new LowerMaster({ opts, id, logger: this.#logger, signal: this.#controller.signal })
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
    return this.#parts?.follower.size ?? 0
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
    const cache = new CryptCache({ publicKeys: 4, sharedKeys: 4, openedPublishes: 16, verifiedSignatures: 16 })
    const { keys } = await loadOrCreateKeys(opts.pki_dir, 'syndic', { logger, cache })
    const dir = join(opts.cachedir, 'syndic')
    await this.#lower.connect()
    const timeouts = timeoutsFromConfig(opts)
    const parts = this.#createParts(dir, timeouts.keepJobsMs)
    this.#parts = parts
    const carried = await parts.follower.load()
    if (this.#controller.signal.aborted) throw new ClosedError('syndic', this.id)
    const several = masters.length > 1
    const signal = this.#controller.signal
    const track = (task: Promise<unknown>): void => this.#track(task)
    await this.#policy.start({
      masters,
      open: (entry) => {
        const upper = new UpperMaster({
          id: this.id,
          opts,
          entry,
          keys,
          transport,
          several,
          cache,
          dir,
          logger,
          signal,
          track,
          onSettled: (settled) => parts.follower.settle(settled),
          onEvent: (event) => this.#events.emit(event),
        })
        this.#uppers.set(upper.link.master, upper)
        return upper.link
      },
      serve: (link) => {
        this.#uppers.get(link.master)!.forwarder.start()
        this.#track(parts.relay.serve(link))
      },
      // Batches owed to an upper master wait in its spool, not in the link.
      owes: () => Promise.resolve(false),
      emit: () => {},
    })
    this.#track(this.#readBus(parts))
    this.#timer = setInterval(() => this.#tick(), Math.max(10, timeouts.syndicEventForwardTimeoutMs))
    this.#timer.unref()
    logger.info(`syndic ${this.id}: transport ${transport.name} to ${[...this.#uppers.keys()].join(', ')}; master ${this.#lower.address}`)
    if (carried > 0) parts.follower.reconcile(`${carried} job(s) still open when the syndic last stopped`)
  }

  #createParts(dir: string, keepJobsMs: number): Parts {
    const signal = this.#controller.signal
    const logger = this.#logger
    const emit = (event: SyndicEvent): void => this.#events.emit(event)
    const track = (task: Promise<unknown>): void => this.#track(task)
    const request = (load: Record<string, unknown>): Promise<unknown> => this.#lower.request(load)
    const follower = new ReturnFollower({
      journal: join(dir, 'jobs.journal'),
      ttlMs: Math.max(keepJobsMs, 60_000),
      upper: (master) => this.#uppers.get(master)?.forwarder,
      request,
      emit,
      logger,
      signal,
      track,
    })
    const relay = new Relay({ opts: this.opts, request, upper: (master) => this.#uppers.get(master)!.forwarder, follower, emit, logger, signal })
    const events = new EventForwarder({
      id: this.id,
      maxFrameBytes: endpointLimitsFromConfig(this.opts).maxFrameBytes,
      links: () => this.links,
      logger,
      signal,
      track,
    })
    return { follower, relay, events }
  }

  #track(task: Promise<unknown>): void {
    this.#tasks.add(task)
    void task.finally(() => this.#tasks.delete(task))
  }

  /** The master's bus: returns of the jobs passed down and lower syndics' announcements, and the rest (forwarded as events). */
  async #readBus(parts: Parts): Promise<void> {
    for await (const event of this.#lower.bus.iter({ hwm: BUS_READER_HWM, signal: this.#controller.signal })) {
      try {
        this.#onBusEvent(parts, event)
      } catch (error) {
        this.#logger.error(`unexpected error on bus event ${event.tag}; continuing`, error)
      }
    }
  }

  #onBusEvent(parts: Parts, event: BusEvent): void {
    if (!parts.follower.take(event)) parts.events.add(event)
  }

  /** Every `syndic_event_forward_timeout`: other events go up; a bus that reconnected or dropped means a read-back. */
  #tick(): void {
    const parts = this.#parts
    if (this.#controller.signal.aborted || parts === undefined) return
    parts.follower.check(this.#lower.bus)
    parts.events.forward()
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
    await this.#lower.closeBus()
    // Closing the links ends their publish streams (and the loops reading them); a batch in flight is spooled.
    await this.#policy.close().catch(() => {})
    await Promise.allSettled([...this.#tasks])
    for (const { forwarder } of this.#uppers.values()) await forwarder.close()
    await this.#parts?.follower.close()
    await this.#lower.close()
  }
}
