/**
 * Follows the returns of the jobs a syndic passed down until each has gone up to the upper master the job
 * came from: from its master's event bus as they come, and, whenever that reader may have missed some (the
 * bus dropped events for it, the bus reconnected, the syndic restarted), read back from its master's job
 * cache (`jobs.list_job`) for every job still open in the journal ({@link OpenJobs}). Lower syndics'
 * announcements of their minions go further up the same way. Whatever is heard of a job before this syndic's own
 * announcement of it went up waits for that announcement ({@link EarlyNews}).
 */
import {
  BUS_DROPPED_TAG,
  parseJobReturnTag,
  parseListJob,
  parseSyndicAnnouncement,
  syndicReturnOf,
  type BusEvent,
  type SyndicAnnouncementParts,
} from '@brine/protocol'
import { LruMap, type Logger } from '@brine/core'
import { EarlyNews, type HeldJob } from './early-news.js'
import type { UpperForwarder } from './forwarder.js'
import { LOWER_REQUEST_MS } from './lower-master.js'
import { OpenJobs, type OpenJob } from './open-jobs.js'

/** What the follower reports. */
export type ReturnFollowerEvent =
  /** Open jobs were read back from the master's job cache. */
  { type: 'reconciled'; reason: string; jobs: number; returns: number }

/** Jids remembered with the upper master they came from, for returns that come after the job closed. */
const ROUTES = 50_000
/**
 * Jobs watched for returns at most (each holds its expected minions); past it the oldest is no longer read
 * back after a drop or a restart (its late returns still go up as the bus shows them).
 */
const OPEN_JOBS = 1000
/** How often jobs open too long are closed. */
const EXPIRE_EVERY_MS = 60_000
/**
 * Jobs whose early announcements and returns are held at most ({@link EarlyNews}): jobs are passed down one at a
 * time per upper master, so a few are held at once unless a relay failed in a way that let none go.
 */
const EARLY_JOBS = 64
/** How long a job passed down is held at most: longer than its publish to the own master may take (two tries). */
const EARLY_MAX_AGE_MS = 2 * LOWER_REQUEST_MS + 10_000
/** Returns held per job at most (past it, they go up as they come). */
const EARLY_RETURNS = 10_000

export interface ReturnFollowerOptions {
  /** The open-jobs journal. */
  journal: string
  /** How long a job stays open at most (keep_jobs, at least a minute). */
  ttlMs: number
  /** The forwarder to one upper master (`host:port`), if that master is configured. */
  upper: (master: string) => UpperForwarder | undefined
  /** A clear request to the syndic's own master. */
  request: (load: Record<string, unknown>) => Promise<unknown>
  emit: (event: ReturnFollowerEvent) => void
  logger: Logger
  signal: AbortSignal
  /** Background work the syndic waits for as it stops. */
  track: (task: Promise<unknown>) => void
}

/** What the bus reader's counters were at the last check. */
interface BusCounters {
  readonly reconnects: number
  readonly dropped: number
}

export class ReturnFollower {
  readonly #o: ReturnFollowerOptions
  readonly #jobs: OpenJobs
  readonly #routes = new LruMap<string, string>(ROUTES)
  /** What is heard of a job between passing it down and its announcement upward. */
  readonly #early: EarlyNews
  #lastExpire = Date.now()
  #bus: BusCounters = { reconnects: 0, dropped: 0 }
  #reconciling: Promise<void> | undefined
  #reconcileAgain: string | undefined

  constructor(options: ReturnFollowerOptions) {
    this.#o = options
    this.#jobs = new OpenJobs({ file: options.journal, ttlMs: options.ttlMs, limit: OPEN_JOBS, logger: options.logger.child('jobs') })
    this.#early = new EarlyNews({
      limit: EARLY_JOBS,
      maxAgeMs: EARLY_MAX_AGE_MS,
      maxReturns: EARLY_RETURNS,
      release: (jid, held) => this.#forwardHeld(jid, held),
    })
  }

  /** Jobs passed down whose returns are still being forwarded. */
  get size(): number {
    return this.#jobs.size
  }

  /** Reads the journal: the jobs still open when the syndic last stopped, read back at once if there are any. */
  async load(): Promise<number> {
    const carried = await this.#jobs.load()
    return carried.length
  }

  /**
   * A job about to be passed down: its returns go to `master`, even those that come after it closes. What is heard
   * of it until {@link opened} (a lower syndic may announce before this syndic's master replied) is held till then.
   */
  route(jid: string, master: string): void {
    this.#routes.set(jid, master)
    this.#early.begin(jid)
  }

  /**
   * A job passed down, with the minions its master expects and the lower syndics still to announce theirs; the
   * announcements lower syndics made before it opened are applied, so the job it gives back is what to announce.
   */
  async open(jid: string, master: string, minions: readonly string[], syndics: readonly string[]): Promise<OpenJob> {
    const job = await this.#jobs.open(jid, master, minions, syndics)
    for (const [syndic, held] of this.#early.takeAnnouncements(jid)) this.#apply(job, syndic, [...held.minions], held.pending)
    return job
  }

  /** The job's announcement went up: what was held for it follows, and it closes if every return it expects has gone up. */
  opened(job: OpenJob): void {
    const held = this.#early.take(job.jid)
    if (held !== undefined) this.#forwardHeld(job.jid, held)
    this.#jobs.closeIfComplete(job)
  }

  /** A job not passed down after all (its master did not take it): what was held for it goes up as it was heard. */
  abandon(jid: string): void {
    this.#early.letGo(jid)
  }

  /** Returns that went up (acknowledged or spooled) to an upper master, per jid. */
  settle(settled: Iterable<[string, readonly string[]]>): void {
    for (const [jid, minions] of settled) this.#jobs.settle(jid, minions)
  }

  /** Takes a bus event that is about the jobs (a return, a drop marker, an announcement); false for any other. */
  take(event: BusEvent): boolean {
    const ret = parseJobReturnTag(event.tag)
    if (ret !== undefined) {
      this.#onReturn(ret.jid, ret.id, event.data)
      return true
    }
    if (event.tag === BUS_DROPPED_TAG) {
      // A reconnect's notice is left to the tick, which reads back on the bus's reconnect count (once per reconnect).
      if (event.data['reason'] !== 'reconnect') this.reconcile(`the master's bus dropped ${String(event.data['count'] ?? 'some')} event(s) for this syndic`)
      return true
    }
    const announcement = parseSyndicAnnouncement(event)
    if (announcement === undefined) return false
    this.#onAnnouncement(announcement)
    return true
  }

  #onReturn(jid: string, minion: string, data: Record<string, unknown>): void {
    if (this.#early.addReturn(jid, minion, data)) return
    this.#returnUp(jid, minion, data)
  }

  #returnUp(jid: string, minion: string, data: Record<string, unknown>): void {
    const route = this.#routes.get(jid) ?? this.#jobs.get(jid)?.master
    if (route === undefined) return // not a job from above: it stays here
    const upper = this.#o.upper(route)
    if (upper === undefined) return
    // The job's last expected return goes up at once; the others wait for the batch (syndic_event_forward_timeout).
    const last = this.#jobs.see(jid, minion)
    upper.addReturn(jid, minion, syndicReturnOf(data), jobMetaOfEvent(data), last)
  }

  /** A lower syndic announced minions for a job passed down: they are announced further up, as this syndic's. */
  #onAnnouncement(announcement: SyndicAnnouncementParts): void {
    if (this.#early.announce(announcement)) return
    this.#announceUp(announcement.jid, announcement.syndic, announcement.minions, announcement.pending)
  }

  #announceUp(jid: string, syndic: string, minions: readonly string[], pending: readonly string[]): void {
    const job = this.#jobs.get(jid)
    const route = this.#routes.get(jid) ?? job?.master
    const upper = route === undefined ? undefined : this.#o.upper(route)
    if (upper === undefined) return
    if (job !== undefined) this.#apply(job, syndic, minions, pending)
    upper.announce(jid, minions, job === undefined ? undefined : [...job.pendingSyndics])
    if (job !== undefined) this.#jobs.closeIfComplete(job)
  }

  /** A lower syndic's announcement, applied to the open job: its minions expected, and no longer pending once its subtree is complete. */
  #apply(job: OpenJob, syndic: string, minions: readonly string[], pending: readonly string[]): void {
    this.#jobs.expect(job.jid, minions)
    if (pending.length === 0) job.pendingSyndics.delete(syndic)
  }

  /** What was held for a job, sent on as it would have gone had it come after the job's announcement. */
  #forwardHeld(jid: string, held: HeldJob): void {
    for (const [syndic, share] of held.announcements) this.#announceUp(jid, syndic, [...share.minions], share.pending)
    for (const [minion, data] of held.returns) this.#returnUp(jid, minion, data)
  }

  /** At every tick: a bus that reconnected or fell behind means a read-back; jobs open too long close. */
  check(bus: BusCounters): void {
    if (bus.reconnects !== this.#bus.reconnects) this.reconcile("the master's bus reconnected")
    if (bus.dropped !== this.#bus.dropped) this.reconcile("this syndic's bus reader fell behind")
    this.#bus = { reconnects: bus.reconnects, dropped: bus.dropped }
    const stale = this.#early.expire()
    if (stale > 0)
      this.#o.logger.warning(`${stale} job(s) passed down were not announced upward in time; what their lower syndics said goes up as it was heard`)
    if (Date.now() - this.#lastExpire > EXPIRE_EVERY_MS) {
      this.#lastExpire = Date.now()
      const expired = this.#jobs.expire()
      if (expired > 0) this.#o.logger.info(`stopped watching ${expired} job(s) open longer than keep_jobs`)
    }
  }

  /**
   * Reads every open job back from the master's job cache (`jobs.list_job`) and forwards the returns not
   * yet gone up. Single-flight: a request while one runs makes it run once more after.
   */
  reconcile(reason: string): void {
    const { signal, logger } = this.#o
    if (signal.aborted) return
    if (this.#reconciling !== undefined) {
      this.#reconcileAgain = reason
      return
    }
    this.#reconciling = this.#reconcileAll(reason)
      .catch((error: unknown) => {
        if (!signal.aborted) logger.error(`reading open jobs back from the master's job cache failed (${reason})`, error)
      })
      .finally(() => {
        this.#reconciling = undefined
        const again = this.#reconcileAgain
        this.#reconcileAgain = undefined
        if (again !== undefined) this.reconcile(again)
      })
    this.#o.track(this.#reconciling)
  }

  async #reconcileAll(reason: string): Promise<void> {
    const jobs = this.#jobs.all()
    if (jobs.length === 0) return
    this.#o.logger.info(`${reason}: reading ${jobs.length} open job(s) back from the master's job cache`)
    let returns = 0
    for (const job of jobs) {
      if (this.#o.signal.aborted) return
      returns += await this.#reconcileJob(job)
    }
    this.#o.emit({ type: 'reconciled', reason, jobs: jobs.length, returns })
  }

  /** One job's stored returns that have not gone up, queued for its upper master; how many. */
  async #reconcileJob(job: OpenJob): Promise<number> {
    const upper = this.#o.upper(job.master)
    if (upper === undefined) {
      this.#jobs.close(job.jid) // its upper master is no longer configured
      return 0
    }
    const reply = (await this.#o.request({ cmd: 'runner', fun: 'jobs.list_job', arg: [job.jid], kwarg: {} })) as {
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
      upper.addReturn(job.jid, minion, syndicReturnOf(stored as unknown as Record<string, unknown>, listed.funArgs), fun === undefined ? {} : { fun })
      count++
    }
    if (count === 0) this.#jobs.closeIfComplete(job)
    return count
  }

  /** Closes the journal (once nothing writes to it any more). */
  async close(): Promise<void> {
    await this.#jobs.closeJournal()
  }
}

/** What a return event says of its job beyond the return: its function and the master it came from. */
function jobMetaOfEvent(data: Record<string, unknown>): { fun?: string; master_id?: string } {
  return {
    ...(typeof data['fun'] === 'string' ? { fun: data['fun'] } : {}),
    ...(typeof data['master_id'] === 'string' ? { master_id: data['master_id'] } : {}),
  }
}
