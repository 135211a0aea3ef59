/**
 * What a syndic hears of a job between passing it down and announcing it upward. A lower syndic that got the job
 * from this syndic's master before that master's publish reply came back here announces its minions (and may even
 * return) first. Sent up at once, that announcement would reach the upper master before this syndic's own, without
 * the lower syndics it still waits for: read there as "nothing pending", then contradicted by the publish reply's
 * announcement naming that lower syndic as pending, whose announcement had already gone by — the upper client
 * would wait out `timeout` + `syndic_wait` for it. So it is held here and applied once the job is open.
 *
 * Bounded: at most `limit` jobs, and a job is let go — what it held forwarded as it was heard — when it is the
 * oldest past that limit, is held longer than `maxAgeMs`, or would hold more than `maxReturns` returns.
 */
import type { SyndicAnnouncementParts } from '@brine/protocol'

/** One lower syndic's announcements for a held job, merged. */
export interface HeldAnnouncement {
  minions: Set<string>
  /** Its latest `syndic_pending`. */
  pending: readonly string[]
}

/** What is held for one job. */
export interface HeldJob {
  since: number
  /** Per lower syndic. */
  announcements: Map<string, HeldAnnouncement>
  /** Return events' data per minion, as heard. */
  returns: Map<string, Record<string, unknown>>
}

export interface EarlyNewsOptions {
  /** Jobs held at once at most. */
  limit: number
  /** How long a job is held at most, ms. */
  maxAgeMs: number
  /** Returns held per job at most. */
  maxReturns: number
  /** Forwards what was held for a job let go before it opened. */
  release: (jid: string, held: HeldJob) => void
}

export class EarlyNews {
  readonly #o: EarlyNewsOptions
  readonly #jobs = new Map<string, HeldJob>()

  constructor(options: EarlyNewsOptions) {
    this.#o = options
  }

  /** Jobs held now. */
  get size(): number {
    return this.#jobs.size
  }

  /** A job about to be passed down: what is heard of it is held from now until {@link take}. */
  begin(jid: string, now = Date.now()): void {
    if (this.#jobs.has(jid)) return
    this.#jobs.set(jid, { since: now, announcements: new Map(), returns: new Map() })
    while (this.#jobs.size > Math.max(1, this.#o.limit)) this.letGo(this.#jobs.keys().next().value as string)
  }

  /** Holds a lower syndic's announcement; false when its job is not held. */
  announce(announcement: SyndicAnnouncementParts): boolean {
    const held = this.#jobs.get(announcement.jid)
    if (held === undefined) return false
    let share = held.announcements.get(announcement.syndic)
    if (share === undefined) {
      share = { minions: new Set(), pending: [] }
      held.announcements.set(announcement.syndic, share)
    }
    for (const id of announcement.minions) share.minions.add(id)
    share.pending = announcement.pending
    return true
  }

  /** Holds a return event's data; false when its job is not held (or was let go, being full: then it goes up as it comes). */
  addReturn(jid: string, minion: string, data: Record<string, unknown>): boolean {
    const held = this.#jobs.get(jid)
    if (held === undefined) return false
    if (held.returns.size >= this.#o.maxReturns && !held.returns.has(minion)) {
      this.letGo(jid)
      return false
    }
    held.returns.set(minion, data)
    return true
  }

  /** The announcements held for `jid`, no longer held (the job stays held). */
  takeAnnouncements(jid: string): Array<[string, HeldAnnouncement]> {
    const held = this.#jobs.get(jid)
    if (held === undefined) return []
    const taken = [...held.announcements]
    held.announcements.clear()
    return taken
  }

  /** Stops holding `jid`: what was held, for the caller to apply. */
  take(jid: string): HeldJob | undefined {
    const held = this.#jobs.get(jid)
    this.#jobs.delete(jid)
    return held
  }

  /** Stops holding `jid` and forwards what it held as it was heard. */
  letGo(jid: string): void {
    const held = this.take(jid)
    if (held !== undefined) this.#o.release(jid, held)
  }

  /** Lets go of the jobs held longer than `maxAgeMs`; how many. */
  expire(now = Date.now()): number {
    let count = 0
    for (const [jid, held] of [...this.#jobs]) {
      if (now - held.since <= this.#o.maxAgeMs) continue
      this.letGo(jid)
      count++
    }
    return count
  }
}
