import type { PkiStore } from '@brine/crypt'
import { isValidMinionId } from '@brine/crypt'
import { type JobCache } from '@brine/common'
import {
  JOB_TAG_PREFIX,
  parseSyndicTag,
  tags,
  type EventLoad,
  type ReturnLoad,
  type SyndicJobEntry,
  type SyndicReturnLoad,
  returnEventData,
} from '@brine/protocol'
import { expectedMinions, type Nodegroups } from '@brine/targeting'
import { LogLimiter, LruMap, silentLogger, type Logger } from '@brine/core'
import { PermissionDeniedError, ReturnRefusedError, SyndicLimitError, SyndicNotAcceptedError } from '@brine/protocol'
import type { EventBus } from './event-bus.js'
import type { IssuedJobs, PublishedJob } from './issued-jobs.js'
import { saveReturn } from './job-returns.js'
import { Announcements, type SyndicRegistry } from './syndics.js'

/** A syndic's announcement or return this master refused, and why (sent back in the sealed reply). */
export interface SyndicRefusal {
  jid: string
  id: string
  reason: string
}

/** `syndic_max_minions`' default, as in the config schema. */
export const DEFAULT_SYNDIC_MAX_MINIONS = 10_000

/** Refusals logged one by one per syndic batch; the rest are counted in one line. */
const LOGGED_REFUSALS = 5

export interface SyndicIntakeOptions {
  /** Whose keys are accepted, and which of them are syndics'. */
  store: PkiStore
  jobs: JobCache
  bus: EventBus
  /** The jobs this master published: a syndic answers only for those. */
  issued: IssuedJobs
  /** The syndics attached to this master and the minions each is pinned to. */
  syndics: SyndicRegistry
  /** The master's nodegroups, for checking an announced minion against a job's target. */
  nodegroups: Nodegroups
  /** Config `syndic_max_minions`: distinct minions one syndic may name in one batch, and answer for in all (default 10,000). */
  maxMinions?: number
  /**
   * The job cache is shared with other masters (PostgreSQL): a syndic's return may already be stored by
   * the lower master, so whether this master has fired its event is remembered here instead.
   */
  sharedJobCache?: boolean
  logger?: Logger
}

type Refuse = (ids: Iterable<string>, reason: string) => void

/**
 * What this master takes from its syndics (Salt's `_syndic_return` and syndic event forwarding): the
 * minions each announces for a job, their returns, and the syndic's other events. Only from a key an
 * operator accepted as a syndic's; each announced minion is pinned to the syndic that announced it.
 */
export class SyndicIntake {
  readonly #o: SyndicIntakeOptions
  readonly #logger: Logger
  readonly #announcements = new Announcements()
  /** With a shared job cache: the (jid, minion) returns whose event this master fired. */
  readonly #fired = new LruMap<string, true>(200_000)
  /** Syndic commands from keys that are not syndics' are a peer's doing: 10 lines a minute, then a count. */
  readonly #notSyndicLog = new LogLimiter()
  /** Batches over `syndic_max_minions` are logged the same way, counted apart. */
  readonly #oversizeLog = new LogLimiter()

  constructor(options: SyndicIntakeOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  /**
   * Throws SyndicNotAcceptedError (logged, rate-limited) unless `id`'s accepted key is marked as a syndic's:
   * only a syndic an operator accepted as one may announce minions and forward their returns and events.
   */
  async requireSyndic(id: string, command: string): Promise<void> {
    if (await this.#o.store.isSyndic(id)) return
    const error = new SyndicNotAcceptedError(id, command)
    this.#notSyndicLog.warning(this.#logger, error.message, 'syndic commands from keys that are not syndics')
    throw error
  }

  /**
   * A syndic's batch (Salt's `_syndic_return`): per job, the minions it announces (checked: not this
   * master's own minions or syndics, and selected by the job's target as far as ids tell), then their
   * returns, each stored and fired as `salt/job/<jid>/ret/<minion>` exactly once. A return for a minion
   * the syndic did not announce for that job, or for a job this master did not publish, is refused and
   * logged. Returns the refusals (the syndic logs them and does not send them again). Only from a key
   * accepted as a syndic's (SyndicNotAcceptedError), and a batch naming more than `syndic_max_minions`
   * distinct minions is refused whole (SyndicLimitError); each announced minion is pinned to this syndic.
   */
  async syndicReturn(id: string, load: SyndicReturnLoad): Promise<SyndicRefusal[]> {
    if (load.id !== id)
      throw new PermissionDeniedError('_syndic_return', `the load names syndic ${JSON.stringify(load.id.slice(0, 80))}, but it came from ${JSON.stringify(id)}`)
    await this.requireSyndic(id, '_syndic_return')
    this.#checkBatchSize(id, load)
    if (this.#o.syndics.register(id)) this.#logger.info(`syndic ${id} is attached to this master`)
    const refused: SyndicRefusal[] = []
    for (const entry of load.jobs) refused.push(...(await this.#syndicJob(id, entry)))
    // One line per refusal, at most a few per batch: a misbehaving syndic cannot flood the log.
    for (const refusal of refused.slice(0, LOGGED_REFUSALS)) {
      this.#logger.warning(`refused a return from syndic ${id} for minion ${JSON.stringify(refusal.id.slice(0, 80))} of job ${refusal.jid}: ${refusal.reason}`)
    }
    if (refused.length > LOGGED_REFUSALS)
      this.#logger.warning(`refused ${refused.length - LOGGED_REFUSALS} more announcement(s) or return(s) from syndic ${id} in the same batch`)
    return refused
  }

  /**
   * A syndic's other events (Salt's syndic event forwarding): `salt/syndic/<id>/start` as it is (and the
   * syndic is registered), an event that already came up from a lower syndic (`syndic/<lower>/…`) as it
   * is, anything else as `syndic/<id>/<tag>`: once, never prefixed again at every level. Job events are
   * refused: a syndic's jobs travel in `_syndic_return`, where they are checked.
   */
  async syndicEvents(id: string, events: readonly EventLoad[]): Promise<void> {
    await this.requireSyndic(id, '_syndic_event')
    let skipped = 0
    for (const event of events) {
      if (event.tag === tags.syndicStart(id)) {
        if (this.#o.syndics.register(id)) this.#logger.info(`syndic ${id} is attached to this master`)
        this.#o.bus.fire(event.tag, { ...event.data })
        continue
      }
      const nested = parseSyndicTag(event.tag)
      const inner = nested === undefined ? event.tag : nested.tag
      if (inner.startsWith(JOB_TAG_PREFIX)) {
        skipped++
        continue
      }
      this.#o.bus.fire(nested === undefined ? tags.syndicEvent(id, event.tag) : event.tag, { ...event.data })
    }
    if (skipped > 0) this.#logger.debug(`syndic ${id}: ${skipped} forwarded event(s) skipped (job events travel in _syndic_return)`)
  }

  #maxMinions(): number {
    return this.#o.maxMinions ?? DEFAULT_SYNDIC_MAX_MINIONS
  }

  /** A batch naming more distinct minions than `syndic_max_minions` is refused whole (SyndicLimitError). */
  #checkBatchSize(id: string, load: SyndicReturnLoad): void {
    const max = this.#maxMinions()
    const named = new Set<string>()
    for (const entry of load.jobs) {
      for (const minion of entry.minions ?? []) named.add(minion)
      for (const minion of Object.keys(entry.returns ?? {})) named.add(minion)
      if (named.size > max) break
    }
    if (named.size <= max) return
    const error = new SyndicLimitError(id, named.size, max)
    this.#oversizeLog.warning(this.#logger, error.message, 'oversized syndic batches')
    throw error
  }

  async #syndicJob(syndic: string, entry: SyndicJobEntry): Promise<SyndicRefusal[]> {
    const { jid } = entry
    const refused: SyndicRefusal[] = []
    const refuse: Refuse = (ids, reason) => {
      for (const id of ids) refused.push({ jid, id, reason })
    }
    const job = await this.#issuedJob(syndic, entry, refuse)
    if (job === undefined) return refused
    const claimed = [...new Set(entry.minions ?? [])].filter((minion) => !this.#announcements.announcedBy(jid, minion, syndic))
    const allowed = await this.#allowedAnnouncements(syndic, job, claimed, refuse)
    // Pinned (and counted) right before it is announced, with nothing awaited between: no other batch can slip in.
    const pinned = this.#o.syndics.claim(syndic, allowed, this.#maxMinions())
    for (const refusal of pinned.refused) refuse([refusal.id], refusal.reason)
    const { fresh, changed, pending } = this.#announcements.announce(jid, syndic, pinned.claimed, entry.pending)
    if (fresh.length > 0 || changed) {
      // Salt's announcement: the lower master's new-job event, forwarded as syndic/<id>/salt/job/<jid>/new.
      this.#o.bus.fire(tags.syndicJobNew(syndic, jid), {
        jid,
        tgt: job.tgt,
        tgt_type: job.tgt_type ?? 'glob',
        fun: job.fun ?? entry.fun,
        // Sorted, as the master's own job announcements are: a syndic batches them in the order returns came.
        minions: [...fresh].sort(),
        missing: [],
        syndic_pending: [...pending],
      })
    }
    await this.#storeReturns(syndic, job, entry, refuse)
    return refused
  }

  /** The job of `entry` if this master issued it (in memory, else its job cache; never a future jid); else every minion it names is refused. */
  async #issuedJob(syndic: string, entry: SyndicJobEntry, refuse: Refuse): Promise<PublishedJob | undefined> {
    const { jid } = entry
    const all = (): string[] => [...(entry.minions ?? []), ...Object.keys(entry.returns ?? {})]
    let future: string | undefined
    try {
      const job = (await this.#o.issued.find(jid, (detail) => new ReturnRefusedError(jid, syndic, 'future jid', (future = detail))))?.job
      if (job === undefined) refuse(all(), `job ${jid} was not published by this master`)
      return job
    } catch (error) {
      if (future === undefined) throw error
      refuse(all(), `job ${jid} is ${future}`)
      return undefined
    }
  }

  /** The claimed minions a syndic may announce for `job`; the rest are refused with the reason. */
  async #allowedAnnouncements(syndic: string, job: PublishedJob, claimed: readonly string[], refuse: Refuse): Promise<string[]> {
    const candidates: string[] = []
    for (const minion of claimed) {
      if (!isValidMinionId(minion)) refuse([minion], 'not a valid minion id')
      else if (minion === syndic || this.#o.syndics.isSyndic(minion))
        refuse([minion], `${JSON.stringify(minion)} is a syndic of this master, not a minion behind ${syndic}`)
      else if ((await this.#o.store.acceptedKeys(minion)) !== undefined)
        refuse([minion], `${JSON.stringify(minion)} is a minion of this master; syndic ${syndic} cannot answer for it`)
      else candidates.push(minion)
    }
    if (candidates.length === 0) return candidates
    // Ids are checked against the target; grains are the lower master's to judge (greedy here).
    const selected = new Set(
      await expectedMinions(
        job,
        candidates.map((id) => ({ id })),
        this.#o.nodegroups,
      ),
    )
    refuse(
      candidates.filter((minion) => !selected.has(minion)),
      `not selected by the target of job ${JSON.stringify(typeof job.tgt === 'string' ? job.tgt.slice(0, 80) : job.tgt.slice(0, 8))} (${job.tgt_type ?? 'glob'})`,
    )
    return candidates.filter((minion) => selected.has(minion))
  }

  /** Stores the returns of `entry` from minions this syndic announced for the job; the others are refused. */
  async #storeReturns(syndic: string, job: PublishedJob, entry: SyndicJobEntry, refuse: Refuse): Promise<void> {
    const { jid } = entry
    const fun = job.fun ?? entry.fun ?? (typeof entry.load?.['fun'] === 'string' ? entry.load['fun'] : 'unknown')
    const saves: Promise<void>[] = []
    for (const [minion, ret] of Object.entries(entry.returns ?? {})) {
      if (!this.#announcements.announcedBy(jid, minion, syndic)) {
        refuse([minion], `syndic ${syndic} did not announce minion ${JSON.stringify(minion.slice(0, 80))} for job ${jid}`)
        continue
      }
      const load: ReturnLoad = { cmd: '_return', id: minion, jid, fun, fun_args: ret.fun_args, return: ret.return, retcode: ret.retcode, success: ret.success }
      if (ret.out !== undefined) load.out = ret.out
      if (entry.master_id !== undefined) load.master_id = entry.master_id
      if (job.metadata !== undefined) load.metadata = job.metadata
      saves.push(
        this.#storeSyndicReturn(load).catch((error: unknown) => {
          // That one return is refused; the rest of the batch is stored.
          if (!(error instanceof ReturnRefusedError)) throw error
          refuse([minion], error.message)
        }),
      )
    }
    await Promise.all(saves)
  }

  /** Stores a return a syndic delivered and fires its event the first time this master sees it. */
  async #storeSyndicReturn(ret: ReturnLoad): Promise<void> {
    const stored = await saveReturn(this.#o.jobs, ret)
    let fire = stored
    if (this.#o.sharedJobCache === true) {
      // Another master (the syndic's own) may have stored it first in the shared cache.
      const key = `${ret.jid}\0${ret.id}`
      fire = !this.#fired.has(key)
      this.#fired.set(key, true)
    }
    if (fire) this.#o.bus.fire(tags.jobReturn(ret.jid, ret.id), returnEventData(ret))
  }
}
