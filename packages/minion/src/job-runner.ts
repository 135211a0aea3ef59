/**
 * From an opened job load to a return: match the target, run each jid once, execute the function
 * with arguments of the job's own, and hand the result back to the link the job came from — and to
 * every other master that published the same job (same jid, function and arguments), so each master
 * that asked gets its answer while the job runs once. Opening publishes and re-authenticating are
 * the link's ({@link MasterLink}); this only matches and runs, for however many links feed it.
 */
import { isDeepStrictEqual } from 'node:util'
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
  /**
   * Jobs come from several masters: remember, per jid, who published it and (when small) its return, so
   * another master publishing it gets the return too. Without it (one master) only jids are remembered,
   * which is what a swarm of thousands of minions in one process can afford.
   */
  severalMasters?: boolean
}

/** Salt's minion_jid_queue_hwm: jids remembered so a publish delivered twice (or by two masters) runs once. */
const JID_MEMORY = 100
/**
 * A finished job's return is kept (for the jids remembered) when it is at most this large, so a master
 * publishing the jid after it finished still gets it; a larger one is not kept, and that master gets none.
 */
export const KEPT_RETURN_BYTES = 64 * 1024

/** Roughly how many bytes `value` takes encoded; stops counting once past `limit` (and returns more than it). */
export function approximateSize(value: unknown, limit: number): number {
  let size = 0
  const stack: unknown[] = [value]
  while (stack.length > 0 && size <= limit) {
    const item = stack.pop()
    if (typeof item === 'string') size += item.length + 5
    else if (typeof item !== 'object' || item === null) size += 9
    else if (ArrayBuffer.isView(item)) size += item.byteLength + 5
    else if (Array.isArray(item)) {
      size += 5
      for (const entry of item) stack.push(entry)
    } else {
      size += 5
      for (const [key, entry] of Object.entries(item)) {
        size += key.length + 5
        stack.push(entry)
      }
    }
  }
  return size
}

/** One master's request for a job: where its return goes, and the master_id its publish carried. */
interface Requester {
  readonly route: ReturnRoute
  readonly masterId: string | undefined
}

/** A job this runner took, remembered by jid. */
interface TakenJob {
  readonly fun: string
  readonly arg: unknown
  readonly kwarg: unknown
  /** Every master that published it, by name, in the order their publishes arrived. */
  readonly requesters: Map<string, Requester>
  state: 'running' | 'returned' | 'killed'
  /** The return, once sent (without master_id), when small enough to keep for a later requester. */
  kept: ReturnLoad | undefined
}

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
  /** With several masters: the last {@link JID_MEMORY} jobs taken, by jid, oldest first. */
  readonly #taken = new Map<string, TakenJob>()
  /** With one master: the last {@link JID_MEMORY} jids taken, oldest first. */
  readonly #recentJids: string[] = []
  /** Jobs running now. */
  readonly #runningJobs = new Set<TakenJob>()
  readonly #running = new Set<Promise<void>>()

  constructor(options: JobRunnerOptions) {
    this.#o = options
  }

  /** Jobs started and not yet returned or spooled. */
  get running(): number {
    return this.#running.size
  }

  /** Jobs still running that `master` published (their returns are still owed to it). */
  runningFor(master: string): number {
    let count = 0
    for (const job of this.#runningJobs) if (job.requesters.has(master)) count++
    return count
  }

  /**
   * Handles one job from a link: ignored unless it targets this minion. A new jid starts at once.
   * A jid already taken does not run again: from a master that published it before it is ignored;
   * with several masters, from another master with the same function and arguments, that master is
   * added to those the return goes to (sent at once when the job already returned and its return
   * was kept); with a different function or arguments it is ignored, as Salt ignores any repeated
   * jid. Jobs run concurrently; the caller keeps publishes in order by handing them over one at a
   * time (matching may wait for the regex guard).
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
    const entry: TakenJob = { fun: job.fun, arg: job.arg, kwarg: job.kwarg, requesters: new Map([[link.master, { route: link, masterId: job.master_id }]]), state: 'running', kept: undefined }
    if (o.severalMasters === true) {
      const taken = this.#taken.get(job.jid)
      if (taken !== undefined) return this.#join(taken, job, link)
      this.#taken.set(job.jid, entry)
      if (this.#taken.size > JID_MEMORY) this.#taken.delete(this.#taken.keys().next().value as string)
    } else {
      if (this.#recentJids.includes(job.jid)) {
        o.logger.debug(`job ${job.jid} from ${link.master} was already received; ignoring the repeat`)
        o.emit({ type: 'publish-ignored', master: link.master, jid: job.jid, fun: job.fun, reason: 'duplicate jid' })
        return
      }
      this.#recentJids.push(job.jid)
      if (this.#recentJids.length > JID_MEMORY) this.#recentJids.shift()
    }
    o.logger.info(`User ${job.user} Executing command ${job.fun} with jid ${job.jid}`)
    o.emit({ type: 'job-received', master: link.master, jid: job.jid, fun: job.fun })
    this.#runningJobs.add(entry)
    const task = this.#run(job, entry).finally(() => {
      this.#runningJobs.delete(entry)
      this.#running.delete(task)
    })
    this.#running.add(task)
  }

  /** A jid taken before, published again (by the same master, or another). */
  #join(taken: TakenJob, job: Readonly<JobLoad>, link: ReturnRoute): void {
    const o = this.#o
    const ignore = (reason: string): void => {
      o.emit({ type: 'publish-ignored', master: link.master, jid: job.jid, fun: job.fun, reason })
    }
    if (taken.requesters.has(link.master)) {
      o.logger.debug(`job ${job.jid} from ${link.master} was already received; ignoring the repeat`)
      return ignore('duplicate jid')
    }
    if (taken.fun !== job.fun || !isDeepStrictEqual(taken.arg, job.arg) || !isDeepStrictEqual(taken.kwarg, job.kwarg)) {
      o.logger.warning(`job ${job.jid} from ${link.master} (${job.fun}) reuses the jid of another job (${taken.fun}) this minion took; ignored`)
      return ignore('jid of another job')
    }
    if (taken.state === 'killed') return ignore('duplicate jid of a killed job')
    if (taken.state === 'returned' && taken.kept === undefined) {
      o.logger.warning(`job ${job.jid} from ${link.master} ran here already and its return was too large to keep; ${link.master} gets none`)
      return ignore('duplicate jid; the return was not kept')
    }
    const requester: Requester = { route: link, masterId: job.master_id }
    taken.requesters.set(link.master, requester)
    o.logger.info(`job ${job.jid} (${job.fun}) from ${link.master} already ${taken.state === 'running' ? 'runs' : 'ran'} here; its return goes to ${link.master} too`)
    o.emit({ type: 'job-joined', master: link.master, jid: job.jid, fun: job.fun, returned: taken.state === 'returned' })
    if (taken.kept !== undefined) {
      const task = this.#deliver(requester, taken.kept).finally(() => this.#running.delete(task))
      this.#running.add(task)
    }
  }

  async #run(job: Readonly<JobLoad>, taken: TakenJob): Promise<void> {
    const o = this.#o
    // The load may be shared (and is frozen): the function gets arguments of its own to change.
    const own: JobLoad = { ...job, arg: mutableCopy(job.arg) }
    if (job.kwarg !== undefined) own.kwarg = mutableCopy(job.kwarg)
    const result = await executeJob(o.registry, { ...own }, { signal: o.signal })
    if (result.killed === true) {
      // Salt's killed job never returns; the client reports it from find_job or as "did not return".
      taken.state = 'killed'
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
    taken.state = 'returned'
    if (this.#o.severalMasters === true && approximateSize(ret.return, KEPT_RETURN_BYTES) <= KEPT_RETURN_BYTES) taken.kept = ret
    // A master that publishes the jid from here on is answered in #join; these asked while it ran.
    await Promise.all([...taken.requesters.values()].map((requester) => this.#deliver(requester, ret)))
  }

  #deliver(requester: Requester, ret: ReturnLoad): Promise<void> {
    return requester.route.deliver(requester.masterId === undefined ? ret : { ...ret, master_id: requester.masterId })
  }

  /** Waits for every started job to return, spool or be killed. */
  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running])
  }
}
