import type { PkiStore } from '@brine/crypt'
import { type JobCache } from '@brine/common'
import { tags, type PublishLoad, type PublishReply, type Target } from '@brine/protocol'
import { expectedMinions, resolveNodegroups, type MinionInfo, type Nodegroups } from '@brine/targeting'
import { type PublishServer } from '@brine/transport'
import { silentLogger, type Logger, type WireValue } from '@brine/core'
import type { EventBus } from './event-bus.js'
import type { GrainsCache } from './grains-cache.js'
import { MalformedRequestError } from '@brine/protocol'
import type { IssuedJobs, PublishedJob } from './issued-jobs.js'

/** A job to publish, as the master's own publish path takes it (a publish load without cmd and key). */
export type JobRequest = Omit<PublishLoad, 'cmd' | 'key' | 'token' | 'eauth' | 'username' | 'password'>

/** A job with its jid: the caller's, or the one {@link MasterService} allocated (the master's one jid allocator). */
export type NamedJob = JobRequest & { jid: string }

export interface JobPublisherOptions {
  /** Accepted minions (targets resolve against them). */
  store: PkiStore
  grains: GrainsCache
  jobs: JobCache
  bus: EventBus
  publisher: PublishServer
  /** Seals and signs a job load under the current session key (in the crypto pool). */
  seal: (jid: string, load: Record<string, unknown>) => Promise<WireValue>
  nodegroups: Nodegroups
  masterId?: string
  /** Where each published job's audience is recorded, for the returns that come back. */
  issued: IssuedJobs
  /** How long a published job stays valid for minions (`publish_ttl`), ms. */
  publishTtlMs: number
  /** The master's clock, ms since the epoch (default Date.now): the issue time and expiry a publish carries. */
  now?: () => number
  logger?: Logger
}

/**
 * The master's publish path: resolves a target against the accepted minions and their cached
 * grains, stores the job, records whom it can reach ({@link IssuedJobs}), fires `salt/job/<jid>/new` and
 * publishes the sealed load, stamped with its issue time and expiry (to the listed minions only, for a
 * list target). It does not check permissions: {@link MasterService.publish} does.
 */
export class JobPublisher {
  readonly #o: JobPublisherOptions
  readonly #logger: Logger
  /** Job records still being written; {@link settle} waits for them before the cache is closed. */
  readonly #pendingJobSaves = new Set<Promise<void>>()

  constructor(options: JobPublisherOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  /** The accepted minions, with the grains each last reported. */
  async known(): Promise<MinionInfo[]> {
    await this.#o.grains.whenLoaded()
    const accepted = await this.#o.store.acceptedIds()
    return accepted.map((id) => {
      const grains = this.#o.grains.get(id)
      return grains === undefined ? { id } : { id, grains }
    })
  }

  /** The master's nodegroups (targets are resolved with them). */
  get nodegroups(): Nodegroups {
    return this.#o.nodegroups
  }

  /** The minions of `known` that `target` selects (Salt's `check_minions`, greedy on unknown grains). */
  expected(target: Target, known: readonly MinionInfo[]): Promise<string[]> {
    return expectedMinions(target, known, this.#o.nodegroups)
  }

  /** `-N name` and `N@name` replaced by the compound expression the master's nodegroups define. */
  resolveNodegroups(target: Target): Target {
    return resolveNodegroups(target, this.#o.nodegroups)
  }

  /**
   * Publishes `job` to `minions` (what {@link expected} resolved) under `job.jid`. When no minion is expected (and no syndic may announce any) nothing is stored, fired or
   * published: the reply carries the jid and no minions. `syndics` (with `order_masters`): the syndics
   * that may announce minions for it, with their candidates; the job is published to them too, even when
   * no direct minion matches, and the reply names them.
   */
  async publish(
    job: NamedJob,
    minions: readonly string[],
    syndics?: Readonly<Record<string, string[]>>,
    missing: readonly string[] = [],
  ): Promise<PublishReply> {
    const now = this.#o.now?.() ?? Date.now()
    const { jid } = job
    // A jid the caller chose (a syndic passing its upper master's) may not open a day far in the future.
    this.#o.issued.checkNotFuture(jid, (detail) => new MalformedRequestError('publish load', `jid ${jid} is ${detail}`))
    const syndicIds = syndics === undefined ? [] : Object.keys(syndics)
    if (minions.length === 0 && syndicIds.length === 0) return syndics === undefined ? { jid, minions: [] } : { jid, minions: [], syndics: {} }
    const load: Record<string, unknown> = {
      jid,
      fun: job.fun,
      arg: job.arg,
      kwarg: job.kwarg,
      tgt: job.tgt,
      tgt_type: job.tgt_type,
      ret: job.ret,
      user: job.user,
    }
    if (job.to !== undefined) load['to'] = job.to
    // A job a syndic passes down keeps the master_id of the master that started it (Salt's syndic does the same).
    const masterId = job.master_id ?? this.#o.masterId
    if (masterId !== undefined) load['master_id'] = masterId
    if (job.metadata !== undefined) load['metadata'] = job.metadata
    // The job record is written before the publish goes out (Salt saves the load first too): a master killed
    // right after it, and started again, finds the job its minions return for (else it refuses them as an
    // unknown jid). Written is enough, a kill -9 cannot lose it; nobody waits for its sync (lazy), which may
    // share its first return's. A save that fails is logged and the job published all the same, as Salt does.
    await this.#savedJob(jid, load, minions)
    // Before the publish goes out: a return can only come back after it.
    // Its target too: a syndic's announcement for it is checked against it.
    this.#o.issued.record(jid, { publishedAt: now, broadcast: job.tgt_type !== 'list', minions, job: publishedJob(job) })
    // Salt's new-job event; `missing`: the ids a list target names that are not accepted minions.
    this.#o.bus.fire(tags.jobNew(jid), {
      jid,
      tgt_type: job.tgt_type,
      tgt: job.tgt,
      user: job.user,
      fun: job.fun,
      arg: job.arg,
      minions: [...minions],
      missing: [...missing],
    })
    // Freshness travels inside the signed, sealed load only (the job cache keeps Salt's load): a minion
    // (or a syndic) refuses the publish once `expire` has passed in the master's clock, so a recording replays nothing.
    const envelope = await this.#o.seal(jid, { ...load, issued: now, expire: now + this.#o.publishTtlMs })
    // A list target reaches the listed minions and every syndic (which passes it down to its own master).
    await this.#o.publisher.publish(envelope, job.tgt_type === 'list' ? { topics: [...minions, ...syndicIds] } : undefined)
    const reply: PublishReply = syndics === undefined ? { jid, minions: [...minions] } : { jid, minions: [...minions], syndics: { ...syndics } }
    if (missing.length > 0) reply.missing = [...missing]
    return reply
  }

  /** Hands the job record to the cache; resolves once it is written (or the save failed, logged). */
  #savedJob(jid: string, load: Record<string, unknown>, minions: readonly string[]): Promise<void> {
    return new Promise<void>((written) => {
      const saving = this.#o.jobs.saveJob(jid, load, minions, { lazy: true, onWritten: written }).catch((error: unknown) => {
        this.#logger.error(`job cache: could not save job ${jid}: ${(error as Error).message}`)
      })
      // A cache that does not say when it wrote (or a save that failed) lets the publish go once the save settles.
      void saving.finally(written)
      this.#pendingJobSaves.add(saving)
      void saving.finally(() => this.#pendingJobSaves.delete(saving))
    })
  }

  /** Resolves once every job record handed to the cache has been written (or failed and been logged). */
  async settle(): Promise<void> {
    await Promise.all([...this.#pendingJobSaves])
  }
}

/** What {@link IssuedJobs} keeps of a job: its target and function, and its metadata when it has some. */
function publishedJob(job: NamedJob): PublishedJob {
  const published: PublishedJob = { tgt: job.tgt, tgt_type: job.tgt_type, fun: job.fun }
  if (job.metadata !== undefined) published.metadata = job.metadata
  return published
}
