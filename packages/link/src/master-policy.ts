/**
 * How a minion uses its masters (Salt's `master_type`). A policy opens the links it wants through
 * the minion's factory, hands each one's publishes to the minion, says whose jobs run, and closes
 * the links on stop. `str` (the default) uses every master at once; with one master it is simply
 * that master. `failover` uses one master at a time, checks it every `master_alive_interval`, moves
 * on to the next when it is gone, and with `master_failback` returns to the first once it answers.
 *
 * Policies read time through an injected {@link PolicyClock} and links through the narrow
 * {@link PolicyLink}, so their decisions are tested without sockets or waiting.
 */
import { silentLogger, sleep, type Logger } from '@brine/core'
import type { MasterLinkEvent, MinionEvent } from './lifecycle.js'
import type { MasterLink, MasterLinkStatus } from './master-link.js'
import { secondsFromMs } from '@brine/config'

/** What a policy needs of a link ({@link MasterLink} is one). */
export interface PolicyLink {
  /** The master's name, `host:port` of its ret port. */
  readonly master: string
  readonly status: MasterLinkStatus
  /** Whether its publishes can reach the minion now (see {@link MasterLink.subscribed}); absent, taken as yes. */
  readonly subscribed?: boolean
  start(): Promise<void>
  close(): Promise<void>
  /** Recent history, then live events. */
  events(): AsyncIterable<MasterLinkEvent>
  /**
   * Whether the master answers now (see {@link MasterLink.alive}); absent, a connected, authenticated link is
   * taken as a live master.
   */
  alive?(timeoutMs: number): Promise<boolean>
}

/** Time as a policy sees it: the system's in the daemon, a hand-driven one in tests. */
export interface PolicyClock {
  now(): number
  /** Resolves true after `ms`, or false as soon as `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<boolean>
}

export const systemPolicyClock: PolicyClock = { now: () => Date.now(), sleep }

export interface MasterPolicyContext<L extends PolicyLink = MasterLink> {
  /** The masters from config (`master`), in order. */
  readonly masters: readonly string[]
  /** Builds (does not start) the link to one master. */
  open(host: string): L
  /** Reads a started link's publishes until it closes, running those {@link MasterPolicy.serves} allows. */
  serve(link: L): void
  /** Whether returns are still owed to this link's master: jobs it published still running, returns in flight or spooled. */
  owes(link: L): Promise<boolean>
  /** The policy's own events, into the minion's stream. */
  emit(event: MinionEvent): void
}

export interface MasterPolicy<L extends PolicyLink = MasterLink> {
  /** Salt's `master_type` this policy implements. */
  readonly type: string
  /** The links open now (what `Minion.links` shows), including ones kept only to deliver returns. */
  readonly links: readonly L[]
  /** Whether the jobs published through `link` run now. */
  serves(link: L): boolean
  /** Opens and starts the links it uses; resolves once connecting has begun (not authenticated). */
  start(context: MasterPolicyContext<L>): Promise<void>
  /** Closes every link it opened. Idempotent. */
  close(): Promise<void>
}

/**
 * `master_type: str`: connected to every master at once; every link's jobs run. A job published by
 * several runs once (the job runner remembers jids) and its return goes to each master that published it.
 */
export class AllMastersPolicy<L extends PolicyLink = MasterLink> implements MasterPolicy<L> {
  readonly type = 'str'
  readonly #links: L[] = []

  get links(): readonly L[] {
    return this.#links
  }

  serves(): boolean {
    return true
  }

  async start(context: MasterPolicyContext<L>): Promise<void> {
    for (const host of context.masters) this.#links.push(context.open(host))
    await Promise.all(this.#links.map((link) => link.start()))
    for (const link of this.#links) context.serve(link)
  }

  async close(): Promise<void> {
    await Promise.all(this.#links.map((link) => link.close()))
  }
}

export interface FailoverOptions {
  /** master_alive_interval, ms: how often the master in use is checked; 0 never (Salt's default). */
  aliveIntervalMs: number
  /** master_failback: go back to the first master once it answers again. */
  failback: boolean
  /** master_failback_interval (master_alive_interval when that is 0), ms: how often the first master is tried. */
  failbackIntervalMs: number
  /** random_master: shuffle the masters once at start (all of them; only those after the first with failback). */
  randomMaster: boolean
  /** How long a master newly tried gets to answer its first `_auth` before the next is tried, ms. */
  answerTimeoutMs: number
  /** acceptance_wait_time, ms: the pause before trying the whole list again when no master answered. */
  retryWaitMs: number
  /** How often links kept for returns owed to their master are looked at when nothing else wakes the policy, ms (default 5000). */
  releaseCheckMs?: number
  clock?: PolicyClock
  /** For random_master (default Math.random). */
  random?: () => number
  logger?: Logger
}

/** Why a candidate master was not taken: its answer to the first `_auth`, or none. */
type Answer = { up: true } | { up: false; reason: string }
type SelectReason = 'start' | 'master-dead' | 'failback'

const RELEASE_CHECK_MS = 5000

/** Salt's random_master order: a Fisher–Yates shuffle of all masters, or of all but the first when failing back. */
export function failoverOrder(masters: readonly string[], options: { randomMaster: boolean; failback: boolean }, random: () => number = Math.random): string[] {
  const order = [...masters]
  if (!options.randomMaster) return order
  const from = options.failback ? 1 : 0
  for (let index = order.length - 1; index > from; index--) {
    const other = from + Math.floor(random() * (index - from + 1))
    ;[order[index], order[other]] = [order[other] as string, order[index] as string]
  }
  return order
}

/**
 * `master_type: failover`: one master at a time, as Salt's `eval_master`. At start the masters are
 * tried in order (shuffled once with `random_master`); the first whose `_auth` is accepted within
 * `answerTimeoutMs` is used, and a round in which none is waits `retryWaitMs` and starts again.
 * Every `aliveIntervalMs` the master in use must still be connected; if it is not, the others are
 * tried in order, the dead one last. With `failback`, every `failbackIntervalMs` the first master
 * is tried while another is in use, and used again once it answers (the other stays in use until
 * then, so no moment is without a master).
 *
 * Beyond Salt: the link to a master left behind stays open while returns are owed to it (its jobs
 * still running, returns in flight or spooled), only to deliver them once it is back; its new
 * publishes are not run. It closes once nothing is owed.
 */
export class FailoverPolicy<L extends PolicyLink = MasterLink> implements MasterPolicy<L> {
  readonly type = 'failover'
  readonly #o: FailoverOptions
  readonly #clock: PolicyClock
  readonly #logger: Logger
  readonly #controller = new AbortController()
  /**
   * Open links and the host (entry of `master`) each was opened for, oldest first. One per master: a
   * link kept for returns owed to its master is the one used when that master is chosen again.
   */
  readonly #hosts = new Map<L, string>()
  #context: MasterPolicyContext<L> | undefined
  /** The order masters are tried in (config order, or shuffled once). */
  #order: string[] = []
  #active: L | undefined
  /** The master in use before the one that died, until the next is chosen (for the event). */
  #previous: L | undefined
  /** A master being tried: its jobs run as soon as it answers, so none published right after its auth is lost. */
  #trying: L | undefined
  #loop: Promise<void> | undefined
  #closing: Promise<void> | undefined

  constructor(options: FailoverOptions) {
    this.#o = options
    this.#clock = options.clock ?? systemPolicyClock
    this.#logger = options.logger ?? silentLogger
  }

  get links(): readonly L[] {
    return [...this.#hosts.keys()]
  }

  /** The link whose jobs run now, if a master answered. */
  get active(): L | undefined {
    return this.#active
  }

  serves(link: L): boolean {
    return link === this.#active || link === this.#trying
  }

  start(context: MasterPolicyContext<L>): Promise<void> {
    this.#context = context
    this.#order = failoverOrder(context.masters, this.#o, this.#o.random)
    const o = this.#o
    if (o.aliveIntervalMs === 0) {
      this.#logger.warning(
        'master_type failover with master_alive_interval 0: a master that goes away is not noticed and this minion will not fail over (set master_alive_interval)',
      )
    }
    if (o.failback && o.failbackIntervalMs === 0) {
      this.#logger.warning('master_failback needs master_failback_interval or master_alive_interval above 0; this minion will not fail back')
    }
    this.#logger.info(`master_type failover: trying ${this.#order.join(', ')} in this order`)
    let started!: () => void
    const connecting = new Promise<void>((resolve) => (started = resolve))
    this.#loop = this.#run(started).catch((error: unknown) => {
      if (!this.#controller.signal.aborted) this.#logger.error('the failover loop stopped unexpectedly; no master will be chosen again', error)
    })
    // Resolves once the first link is connecting, or at once if the loop ends first (closed).
    return Promise.race([connecting, this.#loop])
  }

  async #run(started: () => void): Promise<void> {
    const signal = this.#controller.signal
    let candidates = [...this.#order]
    let reason: SelectReason = 'start'
    let opened: (() => void) | undefined = started
    while (!signal.aborted) {
      if (this.#active === undefined) {
        const chosen = await this.#choose(candidates, () => {
          opened?.()
          opened = undefined
        })
        if (chosen === undefined) return
        this.#select(chosen, reason)
      }
      const next = await this.#watch()
      if (next === undefined) return
      if (next.reason === 'failback') {
        this.#select(next.link, 'failback')
      } else {
        // Its jobs stop running now; its link stays while returns are owed to it.
        this.#previous = this.#active
        this.#active = undefined
        candidates = next.candidates
        reason = 'master-dead'
      }
    }
  }

  /** Makes `link` the master in use; the one before is kept while returns are owed to it. */
  #select(link: L, reason: SelectReason): void {
    const previous = this.#active ?? this.#previous
    this.#active = link
    this.#previous = undefined
    if (this.#trying === link) this.#trying = undefined
    const host = this.#hosts.get(link)
    const changed = previous !== undefined && previous !== link
    const why = reason === 'start' ? '' : reason === 'failback' ? '; failing back to the first master' : '; the one before is gone'
    this.#logger.info(
      `master_type failover: using the master ${link.master}${host === undefined ? '' : ` (${host})`}${changed ? ` instead of ${previous.master}` : ''}${why}`,
    )
    this.#context?.emit({ type: 'master-selected', master: link.master, ...(changed ? { previous: previous.master } : {}), reason })
  }

  /**
   * Tries `candidates` in order until one answers; a round with no answer waits `retryWaitMs` and
   * starts again. Undefined once closed.
   */
  async #choose(candidates: readonly string[], onOpen: () => void): Promise<L | undefined> {
    const signal = this.#controller.signal
    for (let round = 1; !signal.aborted; round++) {
      for (const host of candidates) {
        if (signal.aborted) return undefined
        const link = await this.#linkTo(host)
        onOpen()
        if (link === undefined) continue
        const answer = await this.#answer(link.link, link.fresh)
        if (answer.up) return link.link
        this.#trying = undefined
        if (signal.aborted) return undefined
        this.#logger.warning(`master ${link.link.master} (${host}) is unavailable: ${answer.reason}; trying the next master`)
        this.#context?.emit({ type: 'master-unavailable', master: link.link.master, reason: answer.reason })
        await this.#releaseIfIdle(link.link)
      }
      if (signal.aborted) return undefined
      this.#logger.error(`no master answered (${candidates.join(', ')}, round ${round}); trying them again in ${secondsFromMs(this.#o.retryWaitMs)} seconds`)
      await this.#releaseRetired()
      if (!(await this.#clock.sleep(this.#o.retryWaitMs, signal))) return undefined
    }
    return undefined
  }

  /** The open link to `host`, or a new one, started and served (its jobs run only once it is chosen or tried). */
  async #linkTo(host: string): Promise<{ link: L; fresh: boolean } | undefined> {
    const context = this.#context
    if (context === undefined) return undefined
    const existing = this.#linkOf(host)
    if (existing !== undefined) {
      this.#trying = existing
      return { link: existing, fresh: false }
    }
    const link = context.open(host)
    this.#hosts.set(link, host)
    this.#trying = link
    try {
      await link.start()
    } catch (error) {
      this.#trying = undefined
      this.#hosts.delete(link)
      if (!this.#controller.signal.aborted) this.#logger.error(`could not start the link to ${link.master} (${host})`, error)
      await link.close().catch(() => {})
      return undefined
    }
    context.serve(link)
    return { link, fresh: true }
  }

  #linkOf(host: string): L | undefined {
    for (const [link, name] of this.#hosts) if (name === host && !link.status.closed) return link
    return undefined
  }

  /** A link's master is up: asked where the link cannot tell by its connection (a broker's), else connected. */
  async #alive(link: L): Promise<boolean> {
    if (link.alive !== undefined) return link.alive(this.#o.answerTimeoutMs)
    return link.status.connected
  }

  /**
   * Whether a master tried answers: a new link waits for the outcome of its first `_auth` (accepted;
   * timed out or refused; key pending), at most `answerTimeoutMs`. A link kept open answers if it is
   * connected and holds a session key.
   */
  async #answer(link: L, fresh: boolean): Promise<Answer> {
    if (link.status.closed) return { up: false, reason: 'the link is closed' }
    // A kept link answers when it holds a session, its publishes can reach the minion again, and the master answers.
    if (!fresh) {
      if (link.subscribed === false) return { up: false, reason: 'its publish connection is not back yet' }
      return link.status.authenticated && (await this.#alive(link))
        ? { up: true }
        : { up: false, reason: link.status.connected ? 'no answer' : 'not connected' }
    }
    const waiting = new AbortController()
    const stop = (): void => waiting.abort()
    this.#controller.signal.addEventListener('abort', stop, { once: true })
    const timeout = this.#clock
      .sleep(this.#o.answerTimeoutMs, waiting.signal)
      .then((elapsed): Answer => ({ up: false, reason: elapsed ? `no answer to _auth within ${this.#o.answerTimeoutMs} ms` : 'closing' }))
    const outcome = (async (): Promise<Answer> => {
      const events = link.events()[Symbol.asyncIterator]()
      try {
        while (!waiting.signal.aborted) {
          const next = await Promise.race([events.next(), timeout.then(() => undefined)])
          if (next === undefined || next.done === true) return { up: false, reason: 'the link closed' }
          const event = next.value
          if (event.type === 'authenticated') return { up: true }
          if (event.type === 'auth-failed') return { up: false, reason: `${event.error}: ${event.message}` }
          if (event.type === 'auth-rejected') return { up: false, reason: `this minion's key is ${event.reason} there` }
          if (event.type === 'auth-pending') return { up: false, reason: "this minion's key is pending there (not accepted yet)" }
        }
        return { up: false, reason: 'closing' }
      } finally {
        void events.return?.()
      }
    })()
    try {
      return await Promise.race([outcome, timeout])
    } finally {
      waiting.abort()
      this.#controller.signal.removeEventListener('abort', stop)
    }
  }

  /**
   * Watches the master in use: every `aliveIntervalMs` it must be connected; with failback, every
   * `failbackIntervalMs` the first master is tried while another is in use. Links left behind are
   * closed once nothing is owed to their master. Resolves with what changed, undefined once closed.
   */
  async #watch(): Promise<{ reason: 'master-dead'; candidates: string[] } | { reason: 'failback'; link: L } | undefined> {
    const o = this.#o
    const signal = this.#controller.signal
    const clock = this.#clock
    const failbackEvery = o.failback ? o.failbackIntervalMs : 0
    let nextAlive = o.aliveIntervalMs > 0 ? clock.now() + o.aliveIntervalMs : Number.POSITIVE_INFINITY
    let nextFailback = failbackEvery > 0 ? clock.now() + failbackEvery : Number.POSITIVE_INFINITY
    await this.#releaseRetired()
    while (!signal.aborted) {
      const active = this.#active
      if (active === undefined) return undefined
      const retired = this.links.some((link) => link !== active && link !== this.#trying)
      const nextRelease = retired ? clock.now() + (o.releaseCheckMs ?? RELEASE_CHECK_MS) : Number.POSITIVE_INFINITY
      const due = Math.min(nextAlive, nextFailback, nextRelease)
      if (due === Number.POSITIVE_INFINITY) {
        // Nothing to check, ever: wait for close.
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
        return undefined
      }
      if (!(await clock.sleep(Math.max(0, due - clock.now()), signal))) return undefined
      const now = clock.now()
      if (now >= nextAlive) {
        nextAlive = now + o.aliveIntervalMs
        if (!(await this.#alive(active))) {
          if (signal.aborted) return undefined
          const why = active.status.connected ? 'does not answer' : 'is not connected'
          this.#logger.warning(`master ${active.master} ${why} at the master_alive_interval check; failing over to the next master`)
          this.#context?.emit({ type: 'master-dead', master: active.master })
          const host = this.#hosts.get(active)
          // Salt's eval_master(failed=True): the others in their current order, the dead one last.
          return { reason: 'master-dead', candidates: host === undefined ? [...this.#order] : [...this.#order.filter((name) => name !== host), host] }
        }
      }
      if (now >= nextFailback) {
        nextFailback = now + failbackEvery
        const first = this.#order[0] as string
        if (this.#hosts.get(active) !== first) {
          const tried = await this.#linkTo(first)
          if (tried !== undefined) {
            const answer = await this.#answer(tried.link, tried.fresh)
            if (answer.up) return { reason: 'failback', link: tried.link }
            this.#trying = undefined
            if (signal.aborted) return undefined
            this.#logger.info(
              `master_failback: the first master ${tried.link.master} (${first}) is still unavailable (${answer.reason}); staying with ${active.master}`,
            )
            this.#context?.emit({ type: 'master-unavailable', master: tried.link.master, reason: answer.reason })
            await this.#releaseIfIdle(tried.link)
          }
        }
      }
      await this.#releaseRetired()
    }
    return undefined
  }

  /** Closes every link left behind that is owed nothing. */
  async #releaseRetired(): Promise<void> {
    for (const link of this.links) await this.#releaseIfIdle(link)
  }

  /** Closes `link` unless it is in use, being tried, or owed returns. */
  async #releaseIfIdle(link: L): Promise<void> {
    const context = this.#context
    if (context === undefined || link === this.#active || link === this.#trying || this.#controller.signal.aborted) return
    if (!link.status.closed && (await context.owes(link))) return
    if (link === this.#active || link === this.#trying || !this.#hosts.has(link)) return
    this.#hosts.delete(link)
    await link.close()
    this.#logger.info(`closed the link to ${link.master}: it is not in use and nothing is owed to it`)
    context.emit({ type: 'master-released', master: link.master })
  }

  close(): Promise<void> {
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    this.#controller.abort()
    await this.#loop
    await Promise.all(this.links.map((link) => link.close()))
  }
}
