/**
 * Lifecycle events of a master link and of the minion daemon: what a test, the CLI, a supervisor
 * or a multi-master policy can wait for instead of sleeping or scraping logs, each stream kept by
 * a `LifecycleEvents` of `@brine/transport`.
 */

/** What one master link reports; every event names its master (`host:port` of its ret port). */
export type MasterLinkEvent =
  /** The request link reached the master (first connect or a reconnect). */
  | { type: 'master-connect'; master: string }
  /** The request link lost the master; the transport reconnects in the background. */
  | { type: 'master-disconnect'; master: string; reason?: string }
  /** The master has our key in `minions_pre`; the link waits `waitMs` and asks again. */
  | { type: 'auth-pending'; master: string; message: string; waitMs: number }
  /** The master refused us (`rejected`, `denied`, …); the link keeps asking, slowly. */
  | { type: 'auth-rejected'; master: string; reason: string; message: string; waitMs: number }
  /** No usable answer: timeout, a master key that does not match the pin, a bad reply. */
  | { type: 'auth-failed'; master: string; error: string; message: string; waitMs: number }
  | { type: 'authenticated'; master: string; gen: number; firstContact: boolean; masterFinger: string }
  /** A publish failed to verify, decrypt or validate, or was stale (expired, from the future, under an expired session), and was dropped. */
  | { type: 'publish-dropped'; master: string; reason: string; jid?: string }
  /** The master acknowledged a return; `fromSpool` when it had been spooled first. */
  | { type: 'returned'; master: string; jid: string; fromSpool: boolean }
  /** A return the master did not acknowledge was written to the spool. */
  | { type: 'spooled'; master: string; jid: string; file: string }
  /** The master refused a return for good (a job this minion was not sent, an unknown or future jid): dropped, not spooled. */
  | { type: 'return-refused'; master: string; jid: string; reason: string }

/** The minion daemon's events: its links' events, what its job runner decides, and `stopped`. */
export type MinionEvent =
  | MasterLinkEvent
  /** A valid publish that is not for this minion (or a repeated jid). */
  | { type: 'publish-ignored'; master: string; jid: string; fun: string; reason: string }
  | { type: 'job-received'; master: string; jid: string; fun: string }
  /**
   * Another master published a jid this minion runs or ran already (same function and arguments): it
   * does not run again, and its return goes to this master too (`returned`: it was sent at once).
   */
  | { type: 'job-joined'; master: string; jid: string; fun: string; returned: boolean }
  /** master_type failover: the master whose jobs run from now on, and why it was chosen. */
  | { type: 'master-selected'; master: string; previous?: string; reason: 'start' | 'master-dead' | 'failback' }
  /** master_type failover: a master that was tried did not answer its auth, or refused or kept this minion pending. */
  | { type: 'master-unavailable'; master: string; reason: string }
  /** master_type failover: at a master_alive_interval check, the master in use was not connected. */
  | { type: 'master-dead'; master: string }
  /** master_type failover: a link no longer in use was closed, nothing being owed to its master any more. */
  | { type: 'master-released'; master: string }
  /** The job was killed (saltutil.kill_job) or aborted by stop(): like Salt, it does not return. */
  | { type: 'job-killed'; jid: string; fun: string }
  | { type: 'stopped' }

export type MinionEventType = MinionEvent['type']

/**
 * Logs the first few occurrences of a kind of problem, then one summary line per interval, so a
 * peer sending garbage cannot flood the log.
 */
export class RateLimitedLog {
  readonly #intervalMs: number
  readonly #burst: number
  readonly #state = new Map<string, { count: number; windowStart: number; suppressed: number }>()

  constructor(intervalMs = 10_000, burst = 5) {
    this.#intervalMs = intervalMs
    this.#burst = burst
  }

  /** Calls `log` unless this key already logged `burst` times in the current interval. */
  log(key: string, log: (suppressedBefore: number) => void, now: number = Date.now()): void {
    let state = this.#state.get(key)
    if (state === undefined || now - state.windowStart >= this.#intervalMs) {
      const suppressed = state?.suppressed ?? 0
      state = { count: 0, windowStart: now, suppressed: 0 }
      this.#state.set(key, state)
      if (this.#state.size > 100) this.#state.delete(this.#state.keys().next().value as string)
      state.count++
      log(suppressed)
      return
    }
    if (state.count < this.#burst) {
      state.count++
      log(0)
    } else {
      state.suppressed++
    }
  }
}
