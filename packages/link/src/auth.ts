/**
 * The minion's `_auth` loop (Salt's `SAuth`): sends the signed request in the clear, pins the
 * master's keys on first contact, and waits `acceptance_wait_time` (growing to
 * `acceptance_wait_time_max`) while the key is pending; after a timeout or a busy refusal, and
 * before re-authenticating for a changed master key, it waits as {@link AuthPacing} says, so a
 * fleet spreads its attempts. One authentication runs at a time; every caller that needs a
 * session key while it runs shares it. One MinionAuth per master: each {@link MasterLink} owns
 * one, with a pin file of its own when a minion has several masters.
 */
import {
  acceptAuthReply,
  buildAuthRequest,
  MasterKeyMismatchError,
  masterPinPath,
  PeerBox,
  type CryptCache,
  type KeyPair,
  type PublicKeys,
  type SessionKey,
} from '@brine/crypt'
import { secondsFromMs } from '@brine/config'
import { clearRequest } from '@brine/protocol'
import { type RequestClient } from '@brine/transport'
import { ClosedError, RemoteError, sleep, TimeoutError, type Logger } from '@brine/core'
import { AuthPacing } from './auth-pacing.js'
import type { MasterLinkEvent } from './lifecycle.js'
import { MasterTime, systemClock, type Clock } from './master-time.js'
import { MasterUnresolvedError } from './errors.js'

/** What a successful `_auth` gives the minion. */
export interface MasterSession {
  session: SessionKey
  masterPub: PublicKeys
  masterFinger: string
  /** Seals requests to the master and opens its replies. */
  box: PeerBox
  /** The master's clock, anchored at this auth: what requests are stamped with and publishes checked against. */
  time: MasterTime
  /** The master's time after which this session must be renewed before a job runs (`publish_session`); undefined: never. */
  expireAt: number | undefined
  /** The publish port the master named for this transport, if it did. */
  publishPort: number | undefined
}

/** How a minion paces its `_auth` attempts: Salt's keys, in ms (see AuthPacing for the waits they make). */
export interface AuthTiming {
  /** Per-attempt timeout (auth_timeout), ms. */
  authTimeoutMs: number
  /** acceptance_wait_time, ms. */
  acceptanceWaitMs: number
  /** acceptance_wait_time_max, ms; 0 keeps the wait fixed. */
  acceptanceWaitMaxMs: number
  /** random_reauth_delay, ms: the spread of re-authentication for a changed master key, and the cap of the backoff after timeouts (default 0). */
  reauthDelayMs?: number
  /** auth_tries: `_auth` timeouts (or busy refusals) in a row before the minion starts over (default 7, Salt's). */
  authTries?: number
  /** Uniform in [0, 1) for the random waits (default Math.random; tests pin it). */
  random?: () => number
}

/** The {@link AuthTiming} fields of `options` that are set, to hand on to a {@link MinionAuth}. */
export function authTimingOf(options: AuthTiming): AuthTiming {
  const { authTimeoutMs, acceptanceWaitMs, acceptanceWaitMaxMs, reauthDelayMs, authTries, random } = options
  return {
    authTimeoutMs,
    acceptanceWaitMs,
    acceptanceWaitMaxMs,
    ...(reauthDelayMs === undefined ? {} : { reauthDelayMs }),
    ...(authTries === undefined ? {} : { authTries }),
    ...(random === undefined ? {} : { random }),
  }
}

export interface MinionAuthOptions extends AuthTiming {
  id: string
  keys: KeyPair
  pkiDir: string
  /** The pin file in `pkiDir` (default Salt's `minion_master.pub`; one per master with several). */
  pinFile?: string
  /** Salt's `master_finger`; empty means "pin whatever answers first". */
  masterFinger?: string
  client: RequestClient
  /** The master's name in events (`host:port`). */
  master: string
  /** Key objects and agreed keys (the link's owner holds it). */
  cache?: CryptCache
  logger: Logger
  /** Aborted by stop(): the loop ends with ClosedError. */
  signal: AbortSignal
  emit: (event: MasterLinkEvent) => void
  /** Called after every successful auth (not awaited). */
  onAuthenticated: (session: MasterSession, first: boolean) => void
  /** This host's clocks (default the system's; tests inject one). */
  clock?: Clock
  /** Checks the master's name resolves before each attempt (a MasterUnresolvedError says it does not). */
  resolve?: () => Promise<unknown>
}

/** The shortest wait between attempts, so a zero acceptance_wait_time cannot make the loop spin. */
const MIN_WAIT_MS = 50
/** A refused (rejected/denied) or untrusted master is asked this many times less often than a pending one. */
const SLOW_FACTOR = 6
/** Old session keys kept, so publishes sealed just before a rotation still open. */
const KEPT_SESSIONS = 2
/** Salt's default auth_tries. */
const DEFAULT_AUTH_TRIES = 7

/** What one `_auth` attempt came to: a session, or how long to wait before the next. */
type Attempt = { session: MasterSession; delay?: undefined } | { session?: undefined; delay: number }

export class MinionAuth {
  readonly #options: MinionAuthOptions
  readonly #clock: Clock
  #current: MasterSession | undefined
  readonly #sessions = new Map<number, SessionKey>()
  #inFlight: Promise<MasterSession> | undefined
  #refreshing: Promise<MasterSession | undefined> | undefined
  /** When (monotonic) the last refresh was tried: at most one per interval asked. */
  #lastRefresh = Number.NEGATIVE_INFINITY
  /** The master's clock as last heard (a signed acceptance, or a refusal's hint): what `_auth` requests are stamped with. */
  #heard: MasterTime | undefined
  #count = 0
  /** The growing wait between attempts of the current loop. */
  #wait = 0
  readonly #pacing: AuthPacing

  constructor(options: MinionAuthOptions) {
    this.#options = options
    this.#clock = options.clock ?? systemClock
    this.#pacing = new AuthPacing({
      reauthDelayMs: options.reauthDelayMs ?? 0,
      authTries: options.authTries ?? DEFAULT_AUTH_TRIES,
      ...(options.random === undefined ? {} : { random: options.random }),
    })
  }

  /** The session of the last successful auth, if any. */
  get current(): MasterSession | undefined {
    return this.#current
  }

  /** The session key of generation `gen`, when this minion holds it (the current one or one just before). */
  sessionFor(gen: number): SessionKey | undefined {
    return this.#sessions.get(gen)
  }

  /** The current session, authenticating first when there is none yet. */
  ready(): Promise<MasterSession> {
    return this.#current !== undefined ? Promise.resolve(this.#current) : this.authenticate()
  }

  /**
   * Authenticates (again). Single-flight: while one auth runs every caller gets its promise.
   * Loops until accepted; rejects only with ClosedError once the minion stops.
   */
  authenticate(): Promise<MasterSession> {
    return this.#single(() => this.#loop())
  }

  /**
   * Authenticates again because the master's key changed (a publish under a session key this side does
   * not hold): after a random wait up to `random_reauth_delay`, so a fleet that received the same publish
   * does not ask all at once. Shares an authentication already running, as {@link authenticate} does.
   */
  reauthenticate(): Promise<MasterSession> {
    return this.#single(async () => {
      const delay = this.#pacing.beforeReauth()
      if (delay > 0) {
        this.#options.logger.info(`waiting ${secondsFromMs(delay)} seconds (random_reauth_delay) before re-authenticating with ${this.#options.client.address}`)
        if (!(await sleep(delay, this.#options.signal))) throw new ClosedError('minion auth', this.#options.client.address)
      }
      return this.#loop()
    })
  }

  #single(run: () => Promise<MasterSession>): Promise<MasterSession> {
    if (this.#inFlight !== undefined) return this.#inFlight
    const started = run().finally(() => {
      if (this.#inFlight === started) this.#inFlight = undefined
    })
    this.#inFlight = started
    return started
  }

  /**
   * One bounded `_auth` to hear the master's clock again (and the current session): what a minion does
   * before trusting a publish that looks expired, issued in the future or sent under an expired session,
   * and before re-sealing a request the master found stale. At most one attempt per `minIntervalMs` (a
   * replay flood costs one, not one each): within it, the current session is returned as it is.
   * Undefined when the attempt failed (the master could not be reached, or refused). Never loops.
   */
  refresh(minIntervalMs: number): Promise<MasterSession | undefined> {
    if (this.#refreshing !== undefined) return this.#refreshing
    if (this.#clock.monotonic() - this.#lastRefresh < minIntervalMs) return Promise.resolve(this.#current)
    this.#lastRefresh = this.#clock.monotonic()
    const run = (this.#inFlight ?? this.#attempt().then((attempt) => attempt.session)).catch(() => undefined)
    const bounded = this.#inFlight === undefined ? run : withTimeout(run, this.#options.authTimeoutMs)
    this.#refreshing = bounded.finally(() => {
      this.#refreshing = undefined
    })
    return this.#refreshing
  }

  async #loop(): Promise<MasterSession> {
    const o = this.#options
    const base = Math.max(o.acceptanceWaitMs, MIN_WAIT_MS)
    this.#wait = base
    for (;;) {
      if (o.signal.aborted) throw new ClosedError('minion auth', o.client.address)
      const attempt = await this.#attempt()
      if (attempt.session !== undefined) return attempt.session
      if (!(await sleep(attempt.delay, o.signal))) throw new ClosedError('minion auth', o.client.address)
      if (o.acceptanceWaitMaxMs > 0 && this.#wait < o.acceptanceWaitMaxMs) this.#wait = Math.min(this.#wait + base, o.acceptanceWaitMaxMs)
    }
  }

  /** One request and its reply: a session, or the wait before the next attempt (logged and reported as an event). */
  async #attempt(): Promise<Attempt> {
    const o = this.#options
    const address = o.client.address
    const wait = Math.max(this.#wait, Math.max(o.acceptanceWaitMs, MIN_WAIT_MS))
    let delay = wait
    if (o.signal.aborted) throw new ClosedError('minion auth', address)
    // Stamped in the master's clock as last heard: after `brine-key -d`, only a request signed after the
    // deletion is auto-accepted again, so this minion's own is told apart from a recording replayed.
    const request = buildAuthRequest(o.id, o.keys, this.#heard?.now() ?? this.#clock.wall(), o.cache)
    try {
      await o.resolve?.()
      const reply = await o.client.send(clearRequest(request), { timeout: o.authTimeoutMs, tries: 1, signal: o.signal })
      const result = await acceptAuthReply(reply, request, o.keys, {
        pkiDir: o.pkiDir,
        ...(o.pinFile === undefined ? {} : { pinFile: o.pinFile }),
        ...(o.masterFinger === undefined || o.masterFinger === '' ? {} : { masterFinger: o.masterFinger }),
        ...(o.cache === undefined ? {} : { cache: o.cache }),
      })
      this.#pacing.answered()
      if (result.ok) {
        const time = new MasterTime(result.masterTime, this.#clock)
        this.#heard = time
        const expireAt = result.sessionTtlMs > 0 ? result.masterTime + result.sessionTtlMs : undefined
        return { session: this.#accepted(result.session, result.masterPub, result.masterFinger, result.firstContact, time, expireAt, result.publishPort) }
      }
      // Unsigned, but harmless: it only sets the time the next request is stamped with.
      if (result.masterTime !== undefined) this.#heard = new MasterTime(result.masterTime, this.#clock)
      if (result.reason === 'pending') {
        o.logger.info(
          `The Brine master at ${address} has cached the public key for this node (${result.message}); ` +
            `this minion will wait for ${secondsFromMs(delay)} seconds before attempting to re-authenticate`,
        )
        o.emit({ type: 'auth-pending', master: o.master, message: result.message, waitMs: delay })
      } else {
        delay = this.#slow(wait)
        // Salt exits here; a daemon that stays up lets an operator accept the key later without a restart.
        o.logger.error(
          `The Brine master at ${address} refused this minion (${result.reason}: ${result.message}). ` +
            `If the key was rejected, delete it on the master (brine-key -d ${o.id}) so it can be submitted again; ` +
            `asking again in ${secondsFromMs(delay)} seconds`,
        )
        o.emit({ type: 'auth-rejected', master: o.master, reason: result.reason, message: result.message, waitMs: delay })
      }
    } catch (error) {
      if (o.signal.aborted) throw new ClosedError('minion auth', address)
      delay = this.#failed(error, wait)
    }
    return { delay }
  }

  /** An attempt that got no answer: logged, reported, and the wait before the next. */
  #failed(error: unknown, wait: number): number {
    const o = this.#options
    const address = o.client.address
    const message = error instanceof Error ? error.message : String(error)
    const name = error instanceof Error ? error.name : 'Error'
    let delay = wait
    if (error instanceof MasterKeyMismatchError) {
      delay = this.#slow(wait)
      o.logger.error(`MASTER KEY MISMATCH: ${message} Not trusting ${address}; asking again in ${secondsFromMs(delay)} seconds`)
    } else if (error instanceof MasterUnresolvedError) {
      o.logger.error(
        `Attempt to authenticate with the master at ${address} failed: ${message}; check the master setting. Retrying in ${secondsFromMs(delay)} seconds`,
      )
    } else if (error instanceof TimeoutError || isBusy(error)) {
      const paced = this.#pacing.afterOverload(wait)
      delay = paced.delay
      const why = error instanceof TimeoutError ? `timed out (${message})` : 'was refused: the master is busy'
      const next = paced.restart
        ? `${this.#options.authTries ?? DEFAULT_AUTH_TRIES} attempts in a row got no answer (auth_tries); starting over in ${secondsFromMs(delay)} seconds (random_reauth_delay)`
        : `retrying in ${secondsFromMs(delay)} seconds`
      o.logger.warning(`Attempt to authenticate with the master at ${address} ${why}; ${next}`)
    } else {
      o.logger.warning(`Attempt to authenticate with the master at ${address} failed: ${name}: ${message}; retrying in ${secondsFromMs(delay)} seconds`)
    }
    o.emit({ type: 'auth-failed', master: o.master, error: name, message, waitMs: delay })
    return delay
  }

  #slow(wait: number): number {
    return Math.max(this.#options.acceptanceWaitMaxMs, wait * SLOW_FACTOR)
  }

  #accepted(
    session: SessionKey,
    masterPub: PublicKeys,
    masterFinger: string,
    firstContact: boolean,
    time: MasterTime,
    expireAt: number | undefined,
    publishPort: number | undefined,
  ): MasterSession {
    const o = this.#options
    const box =
      this.#current !== undefined && Buffer.compare(this.#current.box.peerPublicKey, masterPub.box) === 0
        ? this.#current.box
        : new PeerBox({
            id: o.id,
            role: 'minion',
            secretKey: o.keys.box.secretKey,
            peerPublicKey: masterPub.box,
            ...(o.cache === undefined ? {} : { cache: o.cache }),
          })
    const current: MasterSession = { session, masterPub, masterFinger, box, time, expireAt, publishPort }
    this.#current = current
    this.#sessions.delete(session.gen)
    this.#sessions.set(session.gen, session)
    while (this.#sessions.size > KEPT_SESSIONS) this.#sessions.delete(this.#sessions.keys().next().value as number)
    const first = this.#count === 0
    this.#count++
    if (firstContact) o.logger.info(`pinned the master's public key (fingerprint ${masterFinger}) in ${masterPinPath(o.pkiDir, o.pinFile)} on first contact`)
    o.logger.info(`authenticated with the master at ${o.client.address} (session key generation ${session.gen})`)
    o.emit({ type: 'authenticated', master: o.master, gen: session.gen, firstContact, masterFinger })
    o.onAuthenticated(current, first)
    return current
  }
}

/** Names of the master's refusals for its load: its request server's concurrency and backlog were full, or its workers were behind. */
const BUSY_REFUSALS = new Set(['ServerBusyError', 'WorkerPoolBusyError'])

/** The master refused the request unrun, for its load: to be asked again after a backoff, as after a timeout. */
export function isBusy(error: unknown): boolean {
  return error instanceof RemoteError && BUSY_REFUSALS.has(error.remoteName)
}

/** `promise`, or undefined once `ms` have passed (the promise is left to finish on its own). */
function withTimeout<T>(promise: Promise<T | undefined>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
