/**
 * From an opened job load to a return: match the target, run each jid once, execute the function
 * with arguments of the job's own, and hand the result back to the link the job came from — and to
 * every other master that published the same job (same jid, function and arguments), so each master
 * that asked gets its answer while the job runs once. A jid is remembered for as long as a publish of
 * it can still be valid (until its `expire`, in the clock of each master it came from), not for a count
 * of jobs. Opening publishes, re-authenticating and refusing stale ones are the link's
 * ({@link MasterLink}); this only matches and runs, for however many links feed it.
 */
import { isDeepStrictEqual } from 'node:util'
import { type JobLoad, type ReturnLoad } from '@brine/protocol'
import { matchMinion, type Nodegroups } from '@brine/targeting'
import type { Logger } from '@brine/core'
import { executeJob, type JobRequest } from './executor.js'
import type { MinionEvent, LinkPublish, ReturnRoute } from '@brine/link'
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
   * another master publishing it gets the return too. Without it (one master) only the jids and until
   * when their publishes can be valid are remembered, which is what a swarm of thousands of minions in one
   * process can afford.
   */
  severalMasters?: boolean
  /** Where a job's return also goes when the job names returners (`ret`, Salt's `--return`), after its masters have it. */
  returners?: { send(job: Readonly<JobLoad>, ret: ReturnLoad): Promise<void> }
}

/**
 * A finished job's return is kept (while its jid is remembered) when it is at most this large, so a master
 * publishing the jid after it finished still gets it; a larger one is not kept, and that master gets none.
 */
export const KEPT_RETURN_BYTES = 64 * 1024
/**
 * The most all kept returns take together (what 100 of the largest cost, the bound Salt's
 * minion_jid_queue_hwm used to set): past it the oldest kept return is let go, its jid still remembered.
 */
export const KEPT_RETURNS_TOTAL_BYTES = 100 * KEPT_RETURN_BYTES

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

/** A route that published a jid, and until when (its `expire`, in that route's master's clock) a publish of it can still arrive valid. */
interface Sighting {
  readonly route: ReturnRoute
  expire: number
}

/** Every route a jid came from: one object for the usual single copy, a list once a second route publishes it. */
type Sightings = Sighting | Sighting[]

const live = (sighting: Sighting): boolean => sighting.route.masterNow() <= sighting.expire

/** Whether any route could still deliver a valid publish of the jid. */
const anyLive = (sightings: Sightings): boolean => (Array.isArray(sightings) ? sightings.some(live) : live(sightings))

/**
 * `sightings` with `route`'s copy valid until `expire` added (or its expiry extended); `changed` when it
 * holds the jid longer than before.
 */
function withSighting(sightings: Sightings, route: ReturnRoute, expire: number): { sightings: Sightings; changed: boolean } {
  const list = Array.isArray(sightings) ? sightings : [sightings]
  const same = list.find((sighting) => sighting.route === route)
  if (same !== undefined) {
    if (same.expire >= expire) return { sightings, changed: false }
    same.expire = expire
    return { sightings, changed: true }
  }
  return { sightings: [...list, { route, expire }], changed: true }
}

/** One master's request for a job: where its return goes, and the master_id its publish carried. */
interface Requester {
  readonly route: ReturnRoute
  readonly masterId: string | undefined
}

/** A job this runner took: remembered by jid with several masters; with one, only while it runs. */
interface TakenJob {
  readonly fun: string
  readonly arg: unknown
  readonly kwarg: unknown
  /** Every master that asked for its return, by name, in the order their publishes arrived. */
  readonly requesters: Map<string, Requester>
  /** Every route that published the jid (answered or not), so a copy from any of them is known while valid. */
  sightings: Sightings
  state: 'running' | 'returned' | 'killed'
  /** The return, once sent (without master_id), when small enough to keep for a later requester. */
  kept: ReturnLoad | undefined
  /** Its approximate size, counted in the runner's kept bytes. */
  keptBytes: number
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
  /**
   * With several masters: the jobs taken, by jid, each for as long as a publish of it can still be valid
   * (its `expire` has not passed in the clock of a master it came from) or it runs. Insertion order is
   * roughly expiry order: a jid published again is moved behind the ones that will be forgotten sooner.
   */
  readonly #taken = new Map<string, TakenJob>()
  /**
   * With one master: the jids taken and the routes they came from, kept as long as in {@link #taken}.
   * Not a count (Salt's minion_jid_queue_hwm): the links refuse what has expired, so nothing older needs
   * remembering, and a publish delivered twice or replayed after any number of other jobs runs once.
   */
  readonly #seen = new Map<string, Sightings>()
  /** Jobs running now, by jid: remembered whatever their publishes' expiry. */
  readonly #runningJobs = new Map<string, TakenJob>()
  readonly #running = new Set<Promise<void>>()
  /** Jobs holding a kept return, oldest first, and the bytes those returns take together. */
  readonly #keptOrder = new Set<TakenJob>()
  #keptBytes = 0

  constructor(options: JobRunnerOptions) {
    this.#o = options
  }

  /** Jobs started and not yet returned or spooled. */
  get running(): number {
    return this.#running.size
  }

  /** Jids remembered now (for tests and figures). */
  get remembered(): number {
    return this.#o.severalMasters === true ? this.#taken.size : this.#seen.size
  }

  /** Bytes of the returns kept for masters that may still publish their jid (at most {@link KEPT_RETURNS_TOTAL_BYTES}). */
  get keptBytes(): number {
    return this.#keptBytes
  }

  /** Jobs still running that `master` published (their returns are still owed to it). */
  runningFor(master: string): number {
    let count = 0
    for (const job of this.#runningJobs.values()) if (job.requesters.has(master)) count++
    return count
  }

  /**
   * Handles one job from a link: ignored unless it targets this minion. A new jid starts at once.
   * A jid already taken (and still remembered) does not run again: from a master that published it
   * before it is ignored; with several masters, from another master with the same function and
   * arguments, that master is added to those the return goes to (sent at once when the job already
   * returned and its return was kept); with a different function or arguments it is ignored, as Salt
   * ignores any repeated jid. Jobs run concurrently; the caller keeps publishes in order by handing
   * them over one at a time (matching may wait for the regex guard).
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
    const sighting: Sighting = { route: link, expire: job.expire }
    const entry: TakenJob = {
      fun: job.fun,
      arg: job.arg,
      kwarg: job.kwarg,
      requesters: new Map([[link.master, { route: link, masterId: job.master_id }]]),
      sightings: sighting,
      state: 'running',
      kept: undefined,
      keptBytes: 0,
    }
    if (o.severalMasters === true) {
      this.#forgetExpired(
        this.#taken,
        (taken) => taken.sightings,
        (jid) => this.#forgetJob(jid),
      )
      const taken = this.#taken.get(job.jid)
      if (taken !== undefined && this.#remembers(job.jid, taken.sightings)) return this.#join(taken, job, link)
      this.#forgetJob(job.jid)
      this.#taken.set(job.jid, entry)
    } else {
      this.#forgetExpired(
        this.#seen,
        (sightings) => sightings,
        (jid) => this.#seen.delete(jid),
      )
      const seen = this.#seen.get(job.jid)
      if (seen !== undefined && this.#remembers(job.jid, seen)) {
        // This route's copy keeps the jid remembered for as long as it could be valid too.
        const added = withSighting(seen, link, job.expire)
        if (added.changed) this.#moveToBack(this.#seen, job.jid, added.sightings)
        o.logger.debug(`job ${job.jid} from ${link.master} was already received; ignoring the repeat`)
        o.emit({ type: 'publish-ignored', master: link.master, jid: job.jid, fun: job.fun, reason: 'duplicate jid' })
        return
      }
      this.#seen.delete(job.jid)
      this.#seen.set(job.jid, sighting)
    }
    // The line is made only when it is written: a swarm's thousands of minions run each ping's job at the warning level.
    if (o.logger.isEnabled('info')) o.logger.info(`User ${job.user} Executing command ${job.fun} with jid ${job.jid}`)
    o.emit({ type: 'job-received', master: link.master, jid: job.jid, fun: job.fun })
    this.#runningJobs.set(job.jid, entry)
    const task = this.#run(job, entry).finally(() => {
      this.#runningJobs.delete(job.jid)
      this.#running.delete(task)
    })
    this.#running.add(task)
  }

  /** A jid taken before, published again (by the same master, or another). */
  #join(taken: TakenJob, job: Readonly<JobLoad>, link: ReturnRoute): void {
    const o = this.#o
    // Whatever is decided, this copy keeps the jid remembered for as long as it could be valid.
    const added = withSighting(taken.sightings, link, job.expire)
    taken.sightings = added.sightings
    if (added.changed) this.#moveToBack(this.#taken, job.jid, taken)
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
      o.logger.warning(`job ${job.jid} from ${link.master} ran here already and its return was too large to keep (or no longer kept); ${link.master} gets none`)
      return ignore('duplicate jid; the return was not kept')
    }
    const requester: Requester = { route: link, masterId: job.master_id }
    taken.requesters.set(link.master, requester)
    o.logger.info(
      `job ${job.jid} (${job.fun}) from ${link.master} already ${taken.state === 'running' ? 'runs' : 'ran'} here; its return goes to ${link.master} too`,
    )
    o.emit({ type: 'job-joined', master: link.master, jid: job.jid, fun: job.fun, returned: taken.state === 'returned' })
    if (taken.kept !== undefined) {
      const task = this.#deliver(requester, taken.kept).finally(() => this.#running.delete(task))
      this.#running.add(task)
    }
  }

  async #run(job: Readonly<JobLoad>, taken: TakenJob): Promise<void> {
    const o = this.#o
    // The load may be shared (and is frozen): the function gets arguments of its own to change.
    const own: JobRequest = { ...job, arg: mutableCopy(job.arg) }
    if (job.kwarg !== undefined) own.kwarg = mutableCopy(job.kwarg)
    const result = await executeJob(o.registry, own, { signal: o.signal })
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
    // Salt's minion echoes the job's metadata in its return (a mapping: the job's check refused anything else).
    if (job.metadata !== undefined) ret.metadata = job.metadata
    taken.state = 'returned'
    if (o.severalMasters === true) this.#keep(taken, ret)
    // A master that publishes the jid from here on is answered in #join; these asked while it ran.
    await Promise.all([...taken.requesters.values()].map((requester) => this.#deliver(requester, ret)))
    // As Salt's minion does: the masters first, then the returners the job named.
    if (job.ret !== '') await o.returners?.send(job, ret)
  }

  #deliver(requester: Requester, ret: ReturnLoad): Promise<void> {
    return requester.route.deliver(requester.masterId === undefined ? ret : { ...ret, master_id: requester.masterId })
  }

  /** Keeps a small return for masters publishing the jid later, letting the oldest kept ones go past the total. */
  #keep(taken: TakenJob, ret: ReturnLoad): void {
    const size = approximateSize(ret.return, KEPT_RETURN_BYTES)
    if (size > KEPT_RETURN_BYTES) return
    taken.kept = ret
    taken.keptBytes = size
    this.#keptOrder.add(taken)
    this.#keptBytes += size
    for (const oldest of this.#keptOrder) {
      if (this.#keptBytes <= KEPT_RETURNS_TOTAL_BYTES) break
      this.#release(oldest)
    }
  }

  /** Lets a kept return go (its jid, if still remembered, stays so). */
  #release(taken: TakenJob): void {
    if (!this.#keptOrder.delete(taken)) return
    this.#keptBytes -= taken.keptBytes
    taken.kept = undefined
    taken.keptBytes = 0
  }

  /** Whether a remembered jid still counts: it runs, or a route could still deliver a valid publish of it. */
  #remembers(jid: string, sightings: Sightings): boolean {
    return this.#runningJobs.has(jid) || anyLive(sightings)
  }

  /** Forgets a job taken with several masters (and its kept return). */
  #forgetJob(jid: string): void {
    const taken = this.#taken.get(jid)
    if (taken === undefined) return
    this.#release(taken)
    this.#taken.delete(jid)
  }

  /**
   * Forgets, oldest first, the jids no publish of which can still be valid, stopping at the first that
   * can (insertion order is roughly expiry order); jobs still running stay.
   */
  #forgetExpired<V>(memory: Map<string, V>, sightingsOf: (value: V) => Sightings, forget: (jid: string) => void): void {
    for (const [jid, value] of memory) {
      if (this.#runningJobs.has(jid)) continue
      if (anyLive(sightingsOf(value))) break
      forget(jid)
    }
  }

  /** Moves a jid behind the ones that will be forgotten sooner. */
  #moveToBack<V>(memory: Map<string, V>, jid: string, value: V): void {
    memory.delete(jid)
    memory.set(jid, value)
  }

  /** Waits for every started job to return, spool or be killed. */
  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running])
  }
}
