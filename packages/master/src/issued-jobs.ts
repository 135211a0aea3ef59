import { type JobCache } from '@brine/common'
import { jidMillis, type Target } from '@brine/protocol'
import { ReturnRefusedError } from '@brine/protocol'

/**
 * Which jobs this master issued and which minions each could reach, so that it stores a return only
 * from a minion its job was sent to: one minion must not plant returns for jobs it never got. "Sent to" is what the publish could reach:
 *
 * - a list target: the minions listed (and accepted), the only ones the publish went to;
 * - any other target: every minion accepted when it was published, since each matches the target
 *   itself — the master's copy of its grains may be stale — plus the minions it expected.
 *
 * Jobs published since this master started are kept in memory (bounded by the minion ids they hold;
 * the oldest are dropped first); any other jid is looked up once in the job cache, which holds every
 * job for `keep_jobs` (also jobs from before a restart, and from other masters sharing a PostgreSQL
 * cache). A jid this master does not hold in memory and dated more than `clock_skew` ahead of its clock
 * (or of the newest jid it issued, which runs ahead of a clock set back: jids never repeat) is refused
 * before any lookup.
 */
export interface IssuedJobsOptions {
  jobs: JobCache
  /** The master's clock, ms since the epoch. */
  now: () => number
  clockSkewMs: number
  /** Minion ids kept in memory across the recent jobs (default 1,000,000): the bound is on ids, not jobs, since one broadcast can name a whole fleet. */
  maxMinions?: number
  /** Jobs kept in memory (default 100,000). */
  maxJobs?: number
}

/** What a job was published as: its target and function (a syndic's announcement is checked against it), and its metadata. */
export interface PublishedJob extends Target {
  fun?: string
  /** Echoed in the returns a syndic delivers, as a minion echoes it in its own. */
  metadata?: Record<string, unknown>
}

export interface IssuedJob {
  /** When it was published (the master's clock), ms since the epoch. */
  publishedAt: number
  /** A list target reaches only the minions listed; anything else reaches every accepted minion. */
  broadcast: boolean
  /** The minions the master expected to answer. */
  minions: readonly string[]
  /** Its target and function, when known (every job this master publishes; a cached one whose load names a target). */
  job?: PublishedJob
}

interface Entry extends IssuedJob {
  members?: Set<string>
}

/** Above this many expected minions, membership is checked through a Set built once. */
const SET_ABOVE = 32

export class IssuedJobs {
  readonly #o: IssuedJobsOptions
  readonly #recent = new Map<string, Entry>()
  #minionsHeld = 0
  /** When each minion was last accepted while this master ran; absent: accepted before it started (or never). */
  readonly #acceptedAt = new Map<string, number>()
  /** The time of the newest jid issued (or found in the cache at start): jids keep increasing when a clock is set back. */
  #latest = Number.NEGATIVE_INFINITY

  constructor(options: IssuedJobsOptions) {
    this.#o = options
  }

  /** The newest jid the job cache held when the master started (so its own jids count as issued after a restart). */
  seed(newestJid: string): void {
    this.#latest = Math.max(this.#latest, jidMillis(newestJid))
  }

  /** Records a job as it is published; a jid published again (by another upper master, say) reaches both audiences. */
  record(jid: string, job: IssuedJob): void {
    this.#latest = Math.max(this.#latest, jidMillis(jid))
    const earlier = this.#recent.get(jid)
    if (earlier === undefined) {
      this.#remember(jid, { ...job })
      return
    }
    const target = earlier.job ?? job.job
    this.#remember(jid, {
      publishedAt: Math.max(earlier.publishedAt, job.publishedAt),
      broadcast: earlier.broadcast || job.broadcast,
      minions: [...new Set([...earlier.minions, ...job.minions])],
      ...(target === undefined ? {} : { job: target }),
    })
  }

  /** A minion's key was accepted (again) at `at`: it could not have received what was published before. */
  accepted(id: string, at: number): void {
    this.#acceptedAt.set(id, at)
  }

  /** A minion's key left `accepted` (deleted, rejected): nothing it sends opens any more; forget its time. */
  removed(id: string): void {
    this.#acceptedAt.set(id, Number.POSITIVE_INFINITY)
  }

  /** Jobs held in memory now (for tests and figures). */
  get size(): number {
    return this.#recent.size
  }

  /**
   * Whether minion `id` may return for `jid`: undefined at once when a job held in memory was sent to it
   * (every return on the hot path); otherwise a promise that resolves when it may, or rejects with
   * ReturnRefusedError.
   */
  check(jid: string, id: string): Promise<void> | undefined {
    const recent = this.#recent.get(jid)
    if (recent !== undefined && this.#sentTo(recent, id)) return undefined
    return this.#checkSlowly(jid, id)
  }

  async #checkSlowly(jid: string, id: string): Promise<void> {
    const job = await this.find(jid, (detail) => new ReturnRefusedError(jid, id, 'future jid', detail))
    if (job === undefined) throw new ReturnRefusedError(jid, id, 'unknown jid', 'this master never issued that job (nor holds it in its job cache)')
    if (this.#sentTo(job, id)) return
    throw new ReturnRefusedError(
      jid,
      id,
      'not sent to this minion',
      job.broadcast ? 'the minion was neither expected nor accepted when the job was published' : 'the job was published to a list of minions without it',
    )
  }

  /**
   * The job `jid` as this master issued it: held in memory, else read once from the job cache; undefined
   * when it never issued it. A jid not in memory and dated beyond `clock_skew` ahead throws what `refuse`
   * makes of it, before any lookup. Minions' returns ({@link check}) and syndics' announcements both ask here.
   */
  async find(jid: string, refuse: (detail: string) => Error): Promise<IssuedJob | undefined> {
    const job = this.#recent.get(jid)
    if (job !== undefined) return job
    this.checkNotFuture(jid, refuse)
    return this.#fromCache(jid)
  }

  /**
   * Throws what `refuse` makes of it when `jid` is dated more than `clock_skew` ahead of the master's clock
   * (or of the newest jid it issued): for a return, or a job a client names its own jid for.
   */
  checkNotFuture(jid: string, refuse: (detail: string) => Error): void {
    const at = jidMillis(jid)
    const now = this.#o.now()
    const reference = Math.max(now, this.#latest)
    if (at > reference + this.#o.clockSkewMs) {
      throw refuse(
        `dated ${new Date(at).toISOString()}, more than ${this.#o.clockSkewMs} ms (clock_skew) ahead of the master's clock (${new Date(now).toISOString()})`,
      )
    }
  }

  #sentTo(job: Entry, id: string): boolean {
    if (job.broadcast && (this.#acceptedAt.get(id) ?? Number.NEGATIVE_INFINITY) <= job.publishedAt) return true
    if (job.minions.length <= SET_ABOVE) return job.minions.includes(id)
    job.members ??= new Set(job.minions)
    return job.members.has(id)
  }

  async #fromCache(jid: string): Promise<Entry | undefined> {
    const record = await this.#o.jobs.getJob(jid)
    // A record without a load holds returns only: nobody recorded publishing that job.
    if (record === undefined || Object.keys(record.load).length === 0) return undefined
    const entry: Entry = { publishedAt: jidMillis(jid), broadcast: record.load['tgt_type'] !== 'list', minions: record.minions }
    const job = publishedJobOf(record.load)
    if (job !== undefined) entry.job = job
    this.#remember(jid, entry)
    return entry
  }

  #remember(jid: string, entry: Entry): void {
    const old = this.#recent.get(jid)
    if (old !== undefined) {
      this.#recent.delete(jid)
      this.#minionsHeld -= old.minions.length
    }
    this.#recent.set(jid, entry)
    this.#minionsHeld += entry.minions.length
    const maxMinions = this.#o.maxMinions ?? 1_000_000
    const maxJobs = this.#o.maxJobs ?? 100_000
    while ((this.#minionsHeld > maxMinions || this.#recent.size > maxJobs) && this.#recent.size > 1) {
      const [oldest, dropped] = this.#recent.entries().next().value as [string, Entry]
      this.#recent.delete(oldest)
      this.#minionsHeld -= dropped.minions.length
    }
  }
}

/** The target and function a job cache load names, if it names a target. */
function publishedJobOf(load: Record<string, unknown>): PublishedJob | undefined {
  const tgt = load['tgt']
  if (typeof tgt !== 'string' && !Array.isArray(tgt)) return undefined
  const job: PublishedJob = { tgt: tgt as Target['tgt'] }
  if (typeof load['tgt_type'] === 'string') job.tgt_type = load['tgt_type'] as Target['tgt_type']
  if (typeof load['fun'] === 'string') job.fun = load['fun']
  const metadata = load['metadata']
  if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) job.metadata = metadata as Record<string, unknown>
  return job
}
