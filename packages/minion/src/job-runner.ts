/**
 * From an opened job load to a return: match the target, run each jid once, execute the function
 * with arguments of the job's own, and hand the result back to the link the job came from.
 * Opening publishes, re-authenticating and refusing stale ones are the link's ({@link MasterLink});
 * this only matches and runs, for however many links feed it.
 */
import { matchMinion, type JobLoad, type Nodegroups, type ReturnLoad } from '@brine/common'
import type { Logger } from '@brine/transport'
import { executeJob } from './executor.js'
import type { MinionEvent } from './lifecycle.js'
import type { LinkPublish, ReturnRoute } from './master-link.js'
import type { Grains, ModuleRegistry } from './modules/types.js'

export interface JobRunnerOptions {
  id: string
  grains: Grains
  nodegroups: Nodegroups
  registry: ModuleRegistry
  logger: Logger
  emit: (event: MinionEvent) => void
  /** Aborted when the minion stops: running jobs are killed (and do not return). */
  signal: AbortSignal
}

/** A jid run, and until when (each master's `expire`, in that master's clock) a publish of it can still arrive valid. */
type Ran = Array<{ route: ReturnRoute; expire: number }>

/**
 * A copy of a decoded load that the caller may change freely: lists, maps and byte arrays are
 * new, scalars are shared (they cannot change). Opened loads are frozen and shared by every
 * minion of a process that opened the same publish, so each job gets its own arguments.
 */
export function mutableCopy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value
  if (Array.isArray(value)) return (value.length === 0 ? [] : value.map((item: unknown) => mutableCopy(item))) as T
  if (Buffer.isBuffer(value)) return Buffer.from(value) as T
  const proto: unknown = Object.getPrototypeOf(value)
  if (proto === Object.prototype || proto === null) {
    const copy: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) {
      // A decoded map may carry a `__proto__` key: keep it as data, never as the copy's prototype.
      if (key === '__proto__') Object.defineProperty(copy, key, { value: mutableCopy(item), enumerable: true, writable: true, configurable: true })
      else copy[key] = mutableCopy(item)
    }
    return copy as T
  }
  return structuredClone(value) // typed arrays, dates, maps, sets: the rare extension types
}

export class JobRunner {
  readonly #o: JobRunnerOptions
  /**
   * The jids run, each kept for as long as a publish of it can still be valid (its `expire` has not
   * passed in the clock of a master it came from): a publish delivered twice, by two masters, or
   * replayed after any number of other jobs runs once. Not a count (Salt's minion_jid_queue_hwm): the
   * links refuse what has expired, so nothing older needs remembering, and only the masters' own
   * publishes can add to it.
   */
  readonly #ran = new Map<string, Ran>()
  readonly #running = new Set<Promise<void>>()

  constructor(options: JobRunnerOptions) {
    this.#o = options
  }

  /** Jobs started and not yet returned or spooled. */
  get running(): number {
    return this.#running.size
  }

  /**
   * Handles one job from a link: ignored unless it targets this minion and its jid is new (from
   * whichever link it came first), otherwise started at once. Jobs run concurrently; the caller
   * keeps publishes in order by handing them over one at a time (matching may wait for the regex guard).
   */
  async handle({ job, link }: LinkPublish): Promise<void> {
    const o = this.#o
    let targeted: boolean
    try {
      targeted = await matchMinion({ tgt: job.tgt, tgt_type: job.tgt_type }, { id: o.id, grains: o.grains }, o.nodegroups)
    } catch (error) {
      o.logger.debug(`job ${job.jid}: target cannot be evaluated here (${(error as Error).message}); ignored`)
      targeted = false
    }
    if (!targeted) {
      o.emit({ type: 'publish-ignored', master: link.master, jid: job.jid, fun: job.fun, reason: 'not targeted' })
      return
    }
    this.#forgetExpired()
    const ran = this.#ran.get(job.jid)
    if (ran !== undefined && ran.some(live)) {
      // This master's copy keeps the jid remembered for as long as it could be valid too (and moves it
      // behind the jids that will be forgotten sooner).
      if (!ran.some((entry) => entry.route === link && entry.expire >= job.expire)) {
        ran.push({ route: link, expire: job.expire })
        this.#ran.delete(job.jid)
        this.#ran.set(job.jid, ran)
      }
      o.logger.debug(`job ${job.jid} from ${link.master} was already received; ignoring the repeat`)
      o.emit({ type: 'publish-ignored', master: link.master, jid: job.jid, fun: job.fun, reason: 'duplicate jid' })
      return
    }
    this.#ran.delete(job.jid)
    this.#ran.set(job.jid, [{ route: link, expire: job.expire }])
    o.logger.info(`User ${job.user} Executing command ${job.fun} with jid ${job.jid}`)
    o.emit({ type: 'job-received', master: link.master, jid: job.jid, fun: job.fun })
    const task = this.#run(job, link).finally(() => this.#running.delete(task))
    this.#running.add(task)
  }

  async #run(job: Readonly<JobLoad>, link: LinkPublish['link']): Promise<void> {
    const o = this.#o
    // The load may be shared (and is frozen): the function gets arguments of its own to change.
    const own: JobLoad = { ...job, arg: mutableCopy(job.arg) }
    if (job.kwarg !== undefined) own.kwarg = mutableCopy(job.kwarg)
    const result = await executeJob(o.registry, { ...own }, { signal: o.signal })
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
      fun_args: job.arg, // what was sent, whatever the function did to its own copy
      return: result.return,
      retcode: result.retcode,
      success: result.success,
    }
    if (result.out !== undefined) ret.out = result.out
    if (job.master_id !== undefined) ret.master_id = job.master_id
    await link.deliver(ret)
  }

  /** Jids remembered now (for tests and figures). */
  get remembered(): number {
    return this.#ran.size
  }

  /** Forgets, oldest first, the jids no publish of which can still be valid (insertion order is roughly expiry order). */
  #forgetExpired(): void {
    for (const [jid, ran] of this.#ran) {
      if (ran.some(live)) break
      this.#ran.delete(jid)
    }
  }

  /** Waits for every started job to return, spool or be killed. */
  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running])
  }
}

const live = (entry: { route: ReturnRoute; expire: number }): boolean => entry.route.masterNow() <= entry.expire
