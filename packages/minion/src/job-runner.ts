/**
 * From a publish envelope to a return: open it (re-authenticating when the session key rotated),
 * validate the job, match the target, run the function and hand the result to the returner.
 * Nothing a peer sends can throw out of here: bad publishes are dropped and logged (rate-limited).
 */
import { matchMinion, validateJobLoad, type JobLoad, type Nodegroups, type ReturnLoad } from '@brine/common'
import { isPublishEnvelope, openPublish, StaleSessionKeyError } from '@brine/crypt'
import type { Logger, WireValue } from '@brine/transport'
import type { MinionAuth } from './auth.js'
import { executeJob } from './executor.js'
import { RateLimitedLog, type MinionEvent } from './lifecycle.js'
import type { Grains, ModuleRegistry } from './modules/types.js'
import type { Returner } from './returner.js'

export interface JobRunnerOptions {
  id: string
  grains: Grains
  nodegroups: Nodegroups
  registry: ModuleRegistry
  auth: MinionAuth
  returner: Returner
  logger: Logger
  emit: (event: MinionEvent) => void
  signal: AbortSignal
}

/**
 * Job loads already validated, by load object: openPublish hands every minion of a process the
 * same frozen load for the same publish, so a swarm validates each publish once.
 */
const validatedLoads = new WeakMap<object, JobLoad>()

function validatedJobLoad(load: WireValue): JobLoad {
  if (typeof load === 'object' && load !== null) {
    const known = validatedLoads.get(load)
    if (known !== undefined) return known
  }
  const job = validateJobLoad(load)
  if (typeof load === 'object' && load !== null) validatedLoads.set(load, job)
  return job
}

/** Salt's minion_jid_queue_hwm: jids remembered so a publish delivered twice runs once. */
const JID_MEMORY = 100
/** Generations found stale right after a fresh auth (replays of old publishes, not a rotation) are not re-authenticated for again for this long. */
const STALE_HOLD_MS = 10_000
const STALE_MEMORY = 16

export class JobRunner {
  readonly #o: JobRunnerOptions
  readonly #recentJids: string[] = []
  readonly #staleGens = new Map<number, number>()
  readonly #dropLog = new RateLimitedLog()
  readonly #running = new Set<Promise<void>>()

  constructor(options: JobRunnerOptions) {
    this.#o = options
  }

  /** Jobs started and not yet returned or spooled. */
  get running(): number {
    return this.#running.size
  }

  #drop(reason: string, detail: string): void {
    this.#dropLog.log(reason, (suppressed) =>
      this.#o.logger.warning(`dropped a publish: ${detail}${suppressed > 0 ? ` (${suppressed} similar drops not logged)` : ''}`),
    )
    this.#o.emit({ type: 'publish-dropped', reason: detail })
  }

  /**
   * Handles one publish. Resolves once the job has been started (or the publish dropped), so the
   * publish loop keeps publishes in order while jobs run concurrently.
   */
  async handle(envelope: WireValue): Promise<void> {
    const load = await this.#open(envelope)
    if (load === undefined) return
    let job: JobLoad
    try {
      job = validatedJobLoad(load)
    } catch (error) {
      this.#drop('invalid', `not a valid job load: ${(error as Error).message}`)
      return
    }
    const o = this.#o
    let targeted: boolean
    try {
      targeted = await matchMinion({ tgt: job.tgt, tgt_type: job.tgt_type }, { id: o.id, grains: o.grains }, o.nodegroups)
    } catch (error) {
      o.logger.debug(`job ${job.jid}: target cannot be evaluated here (${(error as Error).message}); ignored`)
      targeted = false
    }
    if (!targeted) {
      o.emit({ type: 'publish-ignored', jid: job.jid, fun: job.fun, reason: 'not targeted' })
      return
    }
    if (this.#recentJids.includes(job.jid)) {
      o.logger.debug(`job ${job.jid} was already received; ignoring the repeat`)
      o.emit({ type: 'publish-ignored', jid: job.jid, fun: job.fun, reason: 'duplicate jid' })
      return
    }
    this.#recentJids.push(job.jid)
    if (this.#recentJids.length > JID_MEMORY) this.#recentJids.shift()
    o.logger.info(`User ${job.user} Executing command ${job.fun} with jid ${job.jid}`)
    o.emit({ type: 'job-received', jid: job.jid, fun: job.fun })
    const task = this.#run(job).finally(() => this.#running.delete(task))
    this.#running.add(task)
  }

  /** Verifies and decrypts; undefined when dropped. Re-authenticates once for a newer session key. */
  async #open(envelope: WireValue): Promise<WireValue | undefined> {
    const o = this.#o
    if (!isPublishEnvelope(envelope)) {
      this.#drop('malformed', 'not a sealed publish envelope')
      return undefined
    }
    let master = await o.auth.ready()
    const gen = envelope.gen
    for (let attempt = 0; ; attempt++) {
      const session = typeof gen === 'number' ? (o.auth.sessionFor(gen) ?? master.session) : master.session
      try {
        return openPublish(envelope, session, master.masterPub.sign)
      } catch (error) {
        if (error instanceof StaleSessionKeyError && attempt === 0 && !this.#recentlyStale(error.gen)) {
          // Signed by our master under a key we do not hold: the key rotated. Fetch it, then open this publish.
          o.logger.info(`publish under session key generation ${error.gen} (this minion holds ${error.expected}); re-authenticating`)
          master = await o.auth.authenticate()
          continue
        }
        if (error instanceof StaleSessionKeyError) {
          this.#staleGens.delete(error.gen)
          this.#staleGens.set(error.gen, Date.now())
          if (this.#staleGens.size > STALE_MEMORY) this.#staleGens.delete(this.#staleGens.keys().next().value as number)
        }
        const name = error instanceof Error ? error.name : 'Error'
        this.#drop(name, `${name}: ${error instanceof Error ? error.message : String(error)}`)
        return undefined
      }
    }
  }

  #recentlyStale(gen: number): boolean {
    const at = this.#staleGens.get(gen)
    return at !== undefined && Date.now() - at < STALE_HOLD_MS
  }

  async #run(job: JobLoad): Promise<void> {
    const o = this.#o
    const result = await executeJob(o.registry, { ...job }, { signal: o.signal })
    if (result.killed === true) {
      // Salt's killed job never returns; the client reports it from find_job or as "did not return".
      o.emit({ type: 'job-killed', jid: job.jid, fun: job.fun })
      return
    }
    const ret: ReturnLoad = {
      cmd: '_return',
      id: o.id,
      jid: job.jid,
      fun: job.fun,
      fun_args: job.arg,
      return: result.return,
      retcode: result.retcode,
      success: result.success,
    }
    if (result.out !== undefined) ret.out = result.out
    if (job.master_id !== undefined) ret.master_id = job.master_id
    await o.returner.deliver(ret)
  }

  /** Waits for every started job to return, spool or be killed. */
  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running])
  }
}
