/**
 * Turns a master's sealed publish into a job load a minion may run: verified, decrypted, validated and
 * fresh, or dropped (a `publish-dropped` event and a rate-limited log line).
 *
 * Freshness (docs/protocol.md): every job load carries its issue time and expiry in the master's
 * clock, which the link knows from its last `_auth`. A publish that has expired, is issued beyond
 * `clock_skew` in the future, or arrives when the session has outlived its lifetime is checked once
 * more against the master's clock through one bounded `_auth`, and dropped if it still fails: a
 * recorded publish replayed later — after any number of other jobs, or once the master is gone —
 * runs nothing.
 */
import { validateJobLoad, type JobLoad } from '@brine/protocol'
import { isPublishEnvelope, openPublish, StaleSessionKeyError, type CryptCache, type PublishEnvelope } from '@brine/crypt'
import type { Logger, WireValue } from '@brine/core'
import type { MasterSession, MinionAuth } from './auth.js'
import { RateLimitedLog, type MasterLinkEvent } from './lifecycle.js'

/** Generations found stale right after a fresh auth (replays of old publishes, not a rotation) are not re-authenticated for again for this long. */
const STALE_HOLD_MS = 10_000
const STALE_MEMORY = 16
/** A publish that looks stale makes the link ask the master's clock again, at most once per this. */
const REFRESH_AFTER_MS = 10_000
const DEFAULT_CLOCK_SKEW_MS = 300_000

/** Why a publish is not run as it is: it needs a fresher look at the master's clock, or it is refused. */
type Staleness = 'session expired' | 'expired' | 'issued in the future'

export interface PublishOpenerOptions {
  /** The master's name (`host:port` of its ret port), for events and log lines. */
  master: string
  /** The link's auth: its sessions open publishes; a newer session key or a clock check is asked of it. */
  auth: MinionAuth
  /** Opened publishes, verified signatures and key objects, shared by whoever shares the cache. */
  cache: CryptCache
  logger: Logger
  emit: (event: MasterLinkEvent) => void
  /** How far ahead of the master's clock (as last heard) a publish may be issued, ms (default 300 s). */
  clockSkewMs?: number
}

export class PublishOpener {
  readonly #o: PublishOpenerOptions
  readonly #dropLog = new RateLimitedLog()
  readonly #staleGens = new Map<number, number>()

  constructor(options: PublishOpenerOptions) {
    this.#o = options
  }

  /**
   * Verifies, decrypts and validates; undefined when dropped. Synchronous while a session is held
   * and the publish is under it (the hot path); re-authenticates once for a newer session key.
   */
  open(envelope: WireValue): JobLoad | undefined | Promise<JobLoad | undefined> {
    if (!isPublishEnvelope(envelope)) {
      this.#drop('malformed', 'not a sealed publish envelope')
      return undefined
    }
    const current = this.#o.auth.current
    const opened = current === undefined ? 'authenticate' : this.#openWith(envelope, current, true)
    return opened === 'authenticate' ? this.#openAfterAuth(envelope, current === undefined) : opened
  }

  #drop(reason: string, detail: string, jid?: string): void {
    const { master, logger } = this.#o
    this.#dropLog.log(reason, (suppressed) =>
      logger.warning(`dropped a publish from ${master}: ${detail}${suppressed > 0 ? ` (${suppressed} similar drops not logged)` : ''}`),
    )
    this.#o.emit(jid === undefined ? { type: 'publish-dropped', master, reason: detail } : { type: 'publish-dropped', master, reason: detail, jid })
  }

  async #openAfterAuth(envelope: PublishEnvelope, firstAuth: boolean): Promise<JobLoad | undefined> {
    const auth = this.#o.auth
    let master = await auth.ready()
    if (!firstAuth) {
      // Signed by our master under a key we do not hold: the key rotated (or the master restarted), and every
      // minion it published to finds that out now. Fetch it, spread over random_reauth_delay, then open this publish.
      this.#o.logger.info(
        `publish under session key generation ${envelope.gen} (this side holds ${master.session.gen}); re-authenticating with ${this.#o.master}`,
      )
      master = await auth.reauthenticate()
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
    this.#o.logger.info(`job ${job.jid} from ${this.#o.master} looks ${staleness}; checking the master's clock again before running it`)
    const master = await this.#o.auth.refresh(REFRESH_AFTER_MS)
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
    const session = typeof gen === 'number' ? (this.#o.auth.sessionFor(gen) ?? master.session) : master.session
    let load: WireValue
    try {
      load = openPublish(envelope, session, master.masterPub.sign, this.#o.cache)
    } catch (error) {
      if (error instanceof StaleSessionKeyError && mayAuthenticate && !this.#recentlyStale(error.gen)) return 'authenticate'
      if (error instanceof StaleSessionKeyError) this.#rememberStale(error.gen)
      const name = error instanceof Error ? error.name : 'Error'
      this.#drop(name, `${name}: ${error instanceof Error ? error.message : String(error)}`)
      return undefined
    }
    const job = this.#validate(load)
    if (job === undefined) return undefined
    const staleness = this.#staleness(job, master)
    if (staleness === undefined) return job
    return this.#openAfterRefresh(job, staleness)
  }

  #validate(load: WireValue): JobLoad | undefined {
    try {
      // Every minion sharing the cache reads the same opened load: it is validated once for all.
      return typeof load === 'object' && load !== null ? this.#o.cache.derived(load, 'job', () => validateJobLoad(load)) : validateJobLoad(load)
    } catch (error) {
      this.#drop('invalid', `not a valid job load: ${(error as Error).message}`)
      return undefined
    }
  }

  #rememberStale(gen: number): void {
    this.#staleGens.delete(gen)
    this.#staleGens.set(gen, Date.now())
    if (this.#staleGens.size > STALE_MEMORY) this.#staleGens.delete(this.#staleGens.keys().next().value as number)
  }

  #recentlyStale(gen: number): boolean {
    const at = this.#staleGens.get(gen)
    return at !== undefined && Date.now() - at < STALE_HOLD_MS
  }
}
