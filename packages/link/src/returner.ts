/**
 * Sends sealed loads (`_return`, `_grains`, `_minion_event`) to the master and delivers returns:
 * cut to fit `max_frame_bytes` when too big (each cut marked, retcode kept), sealed with the
 * minion's box, retried `return_retry_tries` times, acknowledged only by the master's sealed `{ok: true}`. A return that is not acknowledged goes to the spool and is sent
 * again, oldest first, after the next auth or on a timer, and deleted only once acknowledged.
 */
import type { OpenedMessage } from '@brine/crypt'
import { SEALED_REFUSALS, type ReturnLoad } from '@brine/protocol'
import { type RequestClient } from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES, type Logger, type WireValue } from '@brine/core'
import { returnTryTimeoutMs } from '@brine/config'
import type { MinionAuth, MasterSession } from './auth.js'
import type { MasterLinkEvent } from './lifecycle.js'
import { NotAcknowledgedError, SpoolFileError } from './errors.js'
import type { ReturnSpool } from './spool.js'
import { fitReturn, mayNeedFitting } from './truncate-return.js'

export interface SealedSendOptions {
  /** Per-try timeout, ms; or how to compute it from the sealed frame's size (a return's: {@link returnTryTimeoutMs}). */
  timeout: number | ((sealedBytes: number) => number)
  tries: number
  /** Tries the master may hand back as still in hand (SendOptions.patience); default none. */
  patience?: number
  signal?: AbortSignal
}

/**
 * Tries of a return the master may hand back as still in hand (a Pending notice: the return waits or is being
 * stored there, behind a burst). Waiting for its answer costs a notice per try; giving up costs the spool write here
 * and, at the master, the whole return again once it is sent from the spool.
 */
export const RETURN_PATIENCE = 6

/** A stale request re-sealed after a refresh younger than this needs no other `_auth` first. */
export const RESEAL_REFRESH_MS = 1000

/**
 * Seals `load` to the master (stamped with the master's time as this minion knows it), sends it, and
 * checks the sealed acknowledgement, which it returns (a file server answer carries its data there). The
 * transport's tries re-send these very bytes, which the master applies once.
 */
export async function sendSealed(
  client: RequestClient,
  session: MasterSession,
  load: { readonly cmd: string },
  options: SealedSendOptions,
): Promise<Record<string, unknown>> {
  const sealed = session.box.seal(load, session.time.now())
  const timeout = typeof options.timeout === 'number' ? options.timeout : options.timeout(sealed.box.length)
  // The transport's options named one by one: a rest-and-spread copy of them cost every return more than the choice of timeout.
  const reply: WireValue = await client.send(sealed, { timeout, tries: options.tries, patience: options.patience, signal: options.signal })
  let opened: OpenedMessage
  try {
    opened = session.box.openDetailed(reply)
  } catch (error) {
    throw new NotAcknowledgedError(load.cmd, `the reply does not open as the master's sealed answer (${(error as Error).message})`, { cause: error })
  }
  // The master sealed its answer at its own time, which its clock has reached: an anchor that lags (its auth reply
  // was slow to arrive, a thousand minions authenticating at once) catches up here, so what this minion seals next
  // is not refused as sealed before a master restarted since (a refusal and a second round trip each).
  session.time.atLeast(opened.timestamp)
  const inner = opened.load
  const ack = inner as { ok?: unknown; error?: unknown } | null
  if (typeof ack !== 'object' || ack === null || ack.ok !== true) {
    const error = typeof ack === 'object' && ack !== null ? (ack.error as { name?: unknown; message?: unknown } | undefined) : undefined
    const why = error !== undefined ? JSON.stringify(error).slice(0, 300) : 'no ok: true'
    throw new NotAcknowledgedError(load.cmd, why, typeof error?.name === 'string' ? { refusal: error.name, error } : {})
  }
  return ack as Record<string, unknown>
}

/**
 * {@link sendSealed} with the master's freshness rule handled: a request the master finds stale (outside
 * its `request_window`, e.g. a spooled return, or a clock anchor gone wrong) is sealed again with a fresh
 * timestamp and nonce, after re-reading the master's clock with one `_auth` if the anchor is older than a
 * second, and sent once more.
 */
export async function sendSealedFresh(
  client: RequestClient,
  auth: MinionAuth,
  load: { readonly cmd: string },
  options: SealedSendOptions,
): Promise<Record<string, unknown>> {
  const session = auth.current ?? (await auth.ready())
  try {
    return await sendSealed(client, session, load, options)
  } catch (error) {
    if (!(error instanceof NotAcknowledgedError) || error.refusal !== SEALED_REFUSALS.stale) throw error
    const started = masterStartOf(error)
    if (started !== undefined) {
      // Sealed before the master's start by this minion's reckoning: an anchor that lags (its auth reply was slow to
      // arrive) behind a master that restarted since. Its sealed refusal names when it started: no `_auth` needed.
      session.time.atLeast(started + 1)
      return await sendSealed(client, session, load, options)
    }
    const refreshed = (await auth.refresh(RESEAL_REFRESH_MS)) ?? auth.current ?? session
    return await sendSealed(client, refreshed, load, options)
  }
}

/** When the master started, from its sealed refusal of a request sealed before then (a StaleRequestError of reason `start`). */
function masterStartOf(error: NotAcknowledgedError): number | undefined {
  const context = error.remote?.context as { reason?: unknown; limit?: unknown } | undefined
  return context?.reason === 'start' && typeof context.limit === 'number' && Number.isFinite(context.limit) ? context.limit : undefined
}

/** True for the master's refusal that no retry can change (a return for a job this minion was not sent, or one over its decode bounds). */
export const isFinalRefusal = (error: unknown): error is NotAcknowledgedError =>
  error instanceof NotAcknowledgedError && (error.refusal === SEALED_REFUSALS.refused || error.refusal === SEALED_REFUSALS.overBound)

export interface ReturnerOptions {
  client: RequestClient
  /** The master's name in events (`host:port`). */
  master: string
  auth: MinionAuth
  spool: ReturnSpool
  logger: Logger
  emit: (event: MasterLinkEvent) => void
  /**
   * The wait before a spool retry, ms (return_retry_timer..max), and a return's per-try timeout before it grows with the
   * return's sealed size ({@link returnTryTimeoutMs}).
   */
  retryDelayMs: () => number
  /** return_retry_tries. */
  tries: number
  /** Aborted when the link closes: sends in flight give up and their returns are spooled. */
  signal: AbortSignal
  /**
   * max_frame_bytes of the request client (default 64 MiB): a return whose sealed frame would not
   * fit is cut to fit (truncate-return.ts) before it is sent or spooled, instead of being lost.
   */
  maxFrameBytes?: number
}

export class Returner {
  readonly #o: ReturnerOptions
  readonly #inFlight = new Set<Promise<void>>()
  #flushing: Promise<void> | undefined
  #flushAgain = false
  #timer: NodeJS.Timeout | undefined

  constructor(options: ReturnerOptions) {
    this.#o = options
  }

  /** Deliveries not yet acknowledged or spooled. */
  get inFlight(): number {
    return this.#inFlight.size
  }

  /** Delivers a return, or spools it. Never rejects; stop() waits for it through {@link drain}. */
  deliver(load: ReturnLoad): Promise<void> {
    const task = this.#deliver(load).finally(() => this.#inFlight.delete(task))
    this.#inFlight.add(task)
    return task
  }

  /**
   * How a return is sent: `tries` tries, each given the drawn return_retry_timer delay plus time for the return's size,
   * so a master merely slow to take a large return in answers the first try instead of receiving it again.
   */
  #sendOptions(): SealedSendOptions {
    const o = this.#o
    const delayMs = o.retryDelayMs()
    return { timeout: (sealedBytes) => returnTryTimeoutMs(delayMs, sealedBytes), tries: Math.max(1, o.tries), patience: RETURN_PATIENCE, signal: o.signal }
  }

  /** `load`, cut to fit one frame if it is too big to travel (logged). */
  #fit(load: ReturnLoad): ReturnLoad {
    const limit = this.#o.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    if (!mayNeedFitting(load, limit)) return load
    const fitted = fitReturn(load, limit)
    if (fitted.truncated) {
      this.#o.logger.warning(
        `return of job ${load.jid} (${load.fun}) is ${fitted.originalBytes} bytes, more than fits in max_frame_bytes (${limit}); ` +
          `sending it truncated to ${fitted.bytes} bytes, each cut marked, retcode ${load.retcode} kept`,
      )
    }
    return fitted.load
  }

  async #deliver(original: ReturnLoad): Promise<void> {
    const o = this.#o
    const load = this.#fit(original)
    const session = o.auth.current
    let problem = 'the link to the master is closing'
    if (session !== undefined && !o.signal.aborted) {
      try {
        await sendSealedFresh(o.client, o.auth, load, this.#sendOptions())
        if (o.logger.isEnabled('debug')) o.logger.debug(`return of job ${load.jid} (${load.fun}) acknowledged by the master`)
        o.emit({ type: 'returned', master: o.master, jid: load.jid, fromSpool: false })
        return
      } catch (error) {
        if (isFinalRefusal(error)) {
          this.#refused(load, error)
          return
        }
        problem = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
      }
    } else if (session === undefined) {
      problem = 'not authenticated with the master'
    }
    try {
      const file = await o.spool.write(load)
      o.logger.warning(`return of job ${load.jid} (${load.fun}) not acknowledged (${problem}); spooled to ${file}`)
      o.emit({ type: 'spooled', master: o.master, jid: load.jid, file })
    } catch (error) {
      o.logger.error(`return of job ${load.jid} (${load.fun}) not acknowledged (${problem}) and could not be spooled; it is lost`, error)
      return
    }
    if (!o.signal.aborted) this.#schedule()
  }

  /** Sends spooled returns, oldest first, until the spool is empty or one is not acknowledged. Single-flight. */
  flush(): Promise<void> {
    if (this.#flushing !== undefined) {
      this.#flushAgain = true
      return this.#flushing
    }
    const run = this.#flushLoop()
      .catch((error: unknown) => {
        this.#o.logger.error('flushing the return spool failed', error)
        this.#schedule()
      })
      .finally(() => {
        this.#flushing = undefined
        if (this.#flushAgain && !this.#o.signal.aborted) {
          this.#flushAgain = false
          void this.flush()
        }
      })
    this.#flushing = run
    return run
  }

  async #flushLoop(): Promise<void> {
    const o = this.#o
    for (;;) {
      this.#flushAgain = false
      const session = o.auth.current
      if (o.signal.aborted || session === undefined) return // the next auth flushes
      const [file] = await o.spool.list()
      if (file === undefined) return
      let load: ReturnLoad
      try {
        load = await o.spool.read(file)
      } catch (error) {
        if (!(error instanceof SpoolFileError)) throw error
        o.logger.error(error.message)
        await o.spool.quarantine(file)
        continue
      }
      try {
        await sendSealedFresh(o.client, o.auth, load, this.#sendOptions())
      } catch (error) {
        if (o.signal.aborted) return
        if (isFinalRefusal(error)) {
          this.#refused(load, error)
          await o.spool.remove(file)
          continue
        }
        o.logger.info(`spooled return of job ${load.jid} still not acknowledged (${(error as Error).message}); will retry`)
        this.#flushAgain = false
        this.#schedule()
        return
      }
      await o.spool.remove(file)
      o.logger.info(`spooled return of job ${load.jid} (${load.fun}) delivered`)
      o.emit({ type: 'returned', master: o.master, jid: load.jid, fromSpool: true })
    }
  }

  /** A return the master will never take (not sent this job, unknown or future jid): said once, dropped. */
  #refused(load: ReturnLoad, error: NotAcknowledgedError): void {
    const o = this.#o
    o.logger.error(`return of job ${load.jid} (${load.fun}) refused by the master for good; dropped: ${error.message}`)
    o.emit({ type: 'return-refused', master: o.master, jid: load.jid, reason: error.message })
  }

  /** One pending retry of the spool at a time, return_retry_timer from now. */
  #schedule(): void {
    if (this.#timer !== undefined || this.#o.signal.aborted) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.flush()
    }, this.#o.retryDelayMs())
  }

  /** Waits until every delivery in progress has been acknowledged or spooled, and a running flush ended. */
  async drain(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight])
    await this.#flushing
  }

  /** Cancels the retry timer (the link is closing). */
  close(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
  }
}
