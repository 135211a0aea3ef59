import { userInfo } from 'node:os'
import type { Logger, RequestClient } from '@brine/transport'
import {
  JOB_TAG_PREFIX,
  parseJobReturnTag,
  timeoutsFromConfig,
  type BusEvent,
  type MasterConfig,
  type PublishLoad,
  type PublishReply,
  type TargetType,
  type Tgt,
} from '@brine/common'
import { ClearRequester, MasterRequestError, type MasterClientOptions } from './clear-request.js'
import { MasterEvent } from './master-event.js'

/** A publish the master refused or answered with something that is not `{jid, minions}`. */
export class PublishError extends MasterRequestError {
  override name = 'PublishError'
}

export type LocalClientOptions = MasterClientOptions

export interface RunJobOptions {
  /** Salt's `tgt_type` (default glob). */
  tgtType?: TargetType
  kwarg?: Record<string, unknown>
  /** How long to wait for returns before asking the missing minions (find_job), ms (default: config `timeout`). */
  timeout?: number
  /** Returners to send the returns to as well, comma separated (Salt's `ret`). */
  ret?: string
  /** A jid of the caller's choosing; the master allocates one otherwise. */
  jid?: string
  /** Ends the wait for returns (the job keeps running on the minions). */
  signal?: AbortSignal
}

export interface WaitOptions {
  /** ms before the first find_job (default: config `timeout`). */
  timeout?: number
  /** ms each find_job round waits, and the extension per still-running minion (default: config `gather_job_timeout`). */
  gatherJobTimeout?: number
  signal?: AbortSignal
}

/** One minion's return in Salt's `cmd_iter` shape. */
export interface MinionReturn {
  ret: unknown
  retcode: number
  jid: string
  success?: boolean
  out?: string
}

/**
 * What {@link LocalClient.getCliReturns} yields: a minion's return, or a minion that never answered.
 * `fromCache` marks a return read back from the master's job cache because its event never reached
 * this reader; the runner does not carry retcode/success, so `retcode` is then 0 and `success` absent.
 */
export type CliReturn =
  | ({ id: string; status: 'returned'; fromCache?: true } & MinionReturn)
  | { id: string; status: 'missing'; jid: string }

/** Salt's text for a minion that neither returned nor answered find_job. */
export const NO_RESPONSE = 'Minion did not return. [No response]'

interface Connection {
  opts: MasterConfig
  key: string
  requests: RequestClient
  events: MasterEvent
}

/** A job-event reader opened before its publish, so no return can slip past. */
interface Reader {
  iterator: AsyncIterator<BusEvent>
  stop: () => void
}

/** Salt's user name for the publish: `sudo_<user>` under sudo, else the current user. */
export function currentUser(): string {
  if (process.env.SUDO_USER) return `sudo_${process.env.SUDO_USER}`
  try {
    return userInfo().username
  } catch {
    return 'root'
  }
}

/**
 * Salt's LocalClient: publishes jobs to the local master (over its request channel, with the root
 * key) and gathers the returns from the master's event bus. Must run as the master's user.
 *
 * ```ts
 * const client = new LocalClient({ configDir: '/etc/brine' })
 * console.log(await client.cmd('*', 'test.ping'))   // { web1: true, db1: true }
 * await client.close()
 * ```
 */
export class LocalClient implements AsyncDisposable {
  private connecting: Promise<Connection> | undefined
  private readonly logger: Logger
  private readonly requester: ClearRequester
  /** Readers opened by runJob, waiting for getCliReturns to take them. */
  private readonly readers = new Map<string, Reader>()
  private closed = false

  constructor(options: LocalClientOptions = {}) {
    this.requester = new ClearRequester(options)
    this.logger = this.requester.logger
  }

  /** Reads the config and root key and connects to the master; later calls reuse the connection. */
  connect(): Promise<Connection> {
    if (this.closed) return Promise.reject(new PublishError('this LocalClient is closed'))
    this.connecting ??= this.open().catch((error: unknown) => {
      this.connecting = undefined
      throw error
    })
    return this.connecting
  }

  private async open(): Promise<Connection> {
    const { opts, key, requests } = await this.requester.connect()
    // The bus first would be Salt's order; either way it is open before any publish is sent.
    const events = new MasterEvent({ sockDir: opts.sock_dir, logger: this.logger })
    await events.connect()
    return { opts, key, requests, events }
  }

  /** The loaded master config (connects first). */
  async config(): Promise<MasterConfig> {
    return (await this.connect()).opts
  }

  /** Sends one clear request with the root key (`publish`, `wheel`, `runner`) and returns the master's reply. */
  async request(load: Record<string, unknown>, options: { timeout?: number; signal?: AbortSignal } = {}): Promise<unknown> {
    await this.connect()
    return this.requester.request(load, options, load['cmd'] === 'publish' ? PublishError : MasterRequestError)
  }

  /**
   * Publishes a job and returns `{jid, minions}` (the minions the master expects to answer; empty
   * when nothing matched). A reader on the job's events is opened before the publish and kept for
   * {@link getCliReturns}; pass `listen: false` when no returns will be read.
   */
  async runJob(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions & { listen?: boolean } = {}): Promise<PublishReply> {
    const connection = await this.connect()
    const timeout = options.timeout ?? timeoutsFromConfig(connection.opts).timeoutMs
    const reader = options.listen === false ? undefined : this.openReader(connection.events)
    let reply: PublishReply
    try {
      const load: Omit<PublishLoad, 'key'> = {
        cmd: 'publish',
        tgt,
        tgt_type: options.tgtType ?? 'glob',
        fun,
        arg: [...arg],
        kwarg: options.kwarg ?? {},
        ret: options.ret ?? '',
        user: currentUser(),
        // The publish load carries Salt's seconds.
        timeout: timeout / 1000,
      }
      if (options.jid !== undefined) load.jid = options.jid
      reply = checkPublishReply(await this.request(load as unknown as Record<string, unknown>, { signal: options.signal }))
    } catch (error) {
      reader?.stop()
      throw error
    }
    if (reader !== undefined) {
      if (reply.minions.length === 0 || reply.jid === '') reader.stop()
      else this.readers.set(reply.jid, reader)
    }
    return reply
  }

  /** Publishes and returns the jid at once, '' if no minion matched (Salt's cmd_async). */
  async cmdAsync(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions = {}): Promise<string> {
    const { jid, minions } = await this.runJob(tgt, fun, arg, { ...options, listen: false })
    return minions.length === 0 ? '' : jid
  }

  /** Runs a job and returns `{id: return}` for every minion that returned (Salt's cmd). */
  async cmd(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions = {}): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {}
    for await (const item of this.cmdIter(tgt, fun, arg, options)) {
      for (const [id, value] of Object.entries(item)) out[id] = value.ret
    }
    return out
  }

  /** Yields `{[id]: {ret, retcode, jid, out?}}` per minion as it returns (Salt's cmd_iter). */
  async *cmdIter(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions = {}): AsyncGenerator<Record<string, MinionReturn>> {
    const { jid, minions } = await this.runJob(tgt, fun, arg, options)
    if (minions.length === 0) return
    for await (const item of this.getCliReturns(jid, minions, { timeout: options.timeout, signal: options.signal })) {
      if (item.status === 'returned') yield { [item.id]: toMinionReturn(item) }
    }
  }

  /**
   * Like {@link cmdIter}, but yields `undefined` every `tick` ms (default 1000) while nothing
   * arrives, so a caller can do other work between returns (Salt's cmd_iter_no_block).
   */
  async *cmdIterNoBlock(
    tgt: Tgt,
    fun: string,
    arg: readonly unknown[] = [],
    options: RunJobOptions & { tick?: number } = {},
  ): AsyncGenerator<Record<string, MinionReturn> | undefined> {
    const iterator = this.cmdIter(tgt, fun, arg, options)
    const tick = options.tick ?? 1000
    let pending: Promise<IteratorResult<Record<string, MinionReturn>>> | undefined
    try {
      for (;;) {
        pending ??= iterator.next()
        let timer: NodeJS.Timeout | undefined
        const ticked = new Promise<'tick'>((resolve) => (timer = setTimeout(() => resolve('tick'), tick)))
        const result = await Promise.race([pending, ticked]).finally(() => clearTimeout(timer))
        if (result === 'tick') {
          yield undefined
          continue
        }
        pending = undefined
        if (result.done === true) return
        yield result.value
      }
    } finally {
      await iterator.return(undefined)
    }
  }

  /**
   * The returns of `jid` from `minions` as they arrive, then a `missing` marker for each minion that
   * neither returned nor was found still running it. At `timeout` the missing minions are asked
   * `saltutil.find_job [jid]` (a list target); each one still running extends the wait by
   * `gatherJobTimeout`, and the question is asked again. Returns from minions that were not expected
   * (a syndic's) are yielded too. `signal` ends the wait without markers.
   */
  async *getCliReturns(jid: string, minions: readonly string[], options: WaitOptions = {}): AsyncGenerator<CliReturn> {
    const connection = await this.connect()
    const timeouts = timeoutsFromConfig(connection.opts)
    const timeout = options.timeout ?? timeouts.timeoutMs
    const gather = options.gatherJobTimeout ?? timeouts.gatherJobTimeoutMs
    const reader = this.readers.get(jid) ?? this.openReader(connection.events)
    this.readers.delete(jid)
    /** Expected minions not yet returned: kept as returns arrive, so a return costs O(1), not O(N). */
    const outstanding = new Set(minions)
    const returned = new Set<string>()
    const signal = options.signal
    let aborted = signal?.aborted === true
    const onAbort = (): void => {
      aborted = true
      reader.stop()
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    /** find_job answers of the round in progress: jid → (id → still running). */
    const findJobs = new Map<string, Map<string, boolean>>()
    let pending: Promise<IteratorResult<BusEvent>> | undefined

    /** Waits for the next job event until `until`; 'timeout' when the time ran out, 'end' when the reader ended. */
    const next = async (until: number): Promise<BusEvent | 'timeout' | 'end'> => {
      const remaining = until - Date.now()
      if (remaining <= 0) return 'timeout'
      pending ??= reader.iterator.next()
      let timer: NodeJS.Timeout | undefined
      const expired = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), remaining)))
      const result = await Promise.race([pending, expired]).finally(() => clearTimeout(timer))
      if (result === 'timeout') return result
      pending = undefined
      return result.done === true ? 'end' : result.value
    }

    /** Handles one event; a return of our job is handed back to be yielded. */
    const handle = (event: BusEvent): CliReturn | undefined => {
      const parsed = parseJobReturnTag(event.tag)
      if (parsed === undefined) return undefined
      const data = event.data
      if (parsed.jid === jid) {
        if (returned.has(parsed.id)) return undefined
        returned.add(parsed.id)
        outstanding.delete(parsed.id)
        const item: CliReturn = {
          id: parsed.id,
          status: 'returned',
          ret: data.return,
          retcode: typeof data.retcode === 'number' ? data.retcode : 0,
          jid,
          success: typeof data.success === 'boolean' ? data.success : undefined,
        }
        if (typeof data.out === 'string') item.out = data.out
        if (item.success === undefined) delete item.success
        return item
      }
      const round = findJobs.get(parsed.jid)
      if (round !== undefined && round.has(parsed.id)) {
        const ret = data.return
        // Salt: a non-empty dict means the job is still in the minion's running-job table.
        round.set(parsed.id, typeof ret === 'object' && ret !== null && Object.keys(ret).length > 0)
      }
      return undefined
    }

    try {
      let deadline = Date.now() + timeout
      waiting: for (;;) {
        // Phase 1: returns until everyone answered or the deadline passed.
        while (!aborted && outstanding.size > 0) {
          const event = await next(deadline)
          if (event === 'end') break waiting
          if (event === 'timeout') break
          const item = handle(event)
          if (item !== undefined) yield item
        }
        if (aborted || outstanding.size === 0) break
        // Phase 2: ask the missing minions whether they are still running the job.
        const asked = [...outstanding]
        let round: Map<string, boolean>
        try {
          const reply = await this.runJob(asked, 'saltutil.find_job', [jid], { tgtType: 'list', timeout: gather, listen: false, signal })
          if (reply.minions.length === 0) break
          round = new Map(reply.minions.map((id) => [id, false]))
          findJobs.set(reply.jid, round)
        } catch (error) {
          if (aborted) break
          this.logger.warning(`find_job for ${jid} failed: ${(error as Error).message}`)
          break
        }
        /** Asked minions that have neither answered find_job nor returned (a count, not a scan per event). */
        const unanswered = new Set(round.keys())
        const roundDeadline = Date.now() + gather
        while (!aborted && outstanding.size > 0) {
          const event = await next(roundDeadline)
          if (event === 'end') break waiting
          if (event === 'timeout') break
          const item = handle(event)
          if (item !== undefined) {
            unanswered.delete(item.id)
            yield item
          }
          const parsed = parseJobReturnTag(event.tag)
          if (parsed !== undefined && findJobs.get(parsed.jid) === round) unanswered.delete(parsed.id)
          if (unanswered.size === 0) break
        }
        if (aborted || outstanding.size === 0) break
        const stillRunning = [...round].filter(([id, running]) => running && !returned.has(id))
        if (stillRunning.length === 0) break
        this.logger.debug(`job ${jid} still running on ${stillRunning.map(([id]) => id).join(', ')}; waiting ${gather} ms more`)
        deadline = Date.now() + gather
      }
      if (!aborted && outstanding.size > 0) {
        // The bus drops events for a reader that falls behind (bounded memory by design), so a minion
        // may have returned without our seeing it: the job cache has the last word, asked once.
        for (const item of await this.storedReturns(jid, outstanding, signal)) {
          returned.add(item.id)
          outstanding.delete(item.id)
          yield item
        }
      }
      if (!aborted) for (const id of outstanding) yield { id, status: 'missing', jid }
    } finally {
      signal?.removeEventListener('abort', onAbort)
      reader.stop()
    }
  }

  /**
   * The returns of `ids` the master stored for `jid`, read with the runner `jobs.lookup_jid` (one
   * request, one try, bounded by the request timeout). Empty when the request fails: the caller then
   * reports those minions missing, as without the cache.
   */
  private async storedReturns(jid: string, ids: ReadonlySet<string>, signal: AbortSignal | undefined): Promise<CliReturn[]> {
    let reply: unknown
    try {
      const load = { cmd: 'runner', fun: 'jobs.lookup_jid', arg: [jid], kwarg: {}, user: currentUser() }
      const sendOptions: { tries: number; signal?: AbortSignal } = { tries: 1 }
      if (signal !== undefined) sendOptions.signal = signal
      reply = await this.request(load, sendOptions)
    } catch (error) {
      this.logger.debug(`job cache lookup for ${jid} failed: ${(error as Error).message}`)
      return []
    }
    const result = reply as { return?: unknown; success?: unknown } | null
    if (typeof result !== 'object' || result === null || result.success === false) {
      this.logger.debug(`job cache lookup for ${jid} answered ${JSON.stringify(reply)?.slice(0, 200)}`)
      return []
    }
    const { returns, out } = unwrapLookup(result.return)
    const items: CliReturn[] = []
    for (const id of ids) {
      if (!Object.hasOwn(returns, id)) continue
      const item: CliReturn = { id, status: 'returned', ret: returns[id], retcode: 0, jid, fromCache: true }
      if (out !== undefined) item.out = out
      items.push(item)
    }
    return items
  }

  private openReader(events: MasterEvent): Reader {
    const controller = new AbortController()
    const iterator = events.iter({ match: JOB_TAG_PREFIX, signal: controller.signal })[Symbol.asyncIterator]()
    return { iterator, stop: () => controller.abort() }
  }

  /** Closes the request client and the event bus connection. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const reader of this.readers.values()) reader.stop()
    this.readers.clear()
    const connection = await this.connecting?.catch(() => undefined)
    this.connecting = undefined
    await this.requester.close()
    await connection?.events.close()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

function toMinionReturn(item: Extract<CliReturn, { status: 'returned' }>): MinionReturn {
  const out: MinionReturn = { ret: item.ret, retcode: item.retcode, jid: item.jid }
  if (item.out !== undefined) out.out = item.out
  return out
}

/**
 * jobs.lookup_jid's answer → `{id: return}` and the outputter hint. The runner wraps its map as
 * `{outputter, data}` when the first return named an outputter (Salt's shape).
 */
export function unwrapLookup(value: unknown): { returns: Record<string, unknown>; out?: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { returns: {} }
  const record = value as Record<string, unknown>
  const data = record['data']
  if (Object.keys(record).length === 2 && typeof record['outputter'] === 'string' && typeof data === 'object' && data !== null && !Array.isArray(data)) {
    return { returns: data as Record<string, unknown>, out: record['outputter'] }
  }
  return { returns: record }
}


function checkPublishReply(reply: unknown): PublishReply {
  const value = reply as Partial<PublishReply> | null
  if (typeof value !== 'object' || value === null || typeof value.jid !== 'string' || !Array.isArray(value.minions)) {
    throw new PublishError(`the master answered the publish with ${JSON.stringify(reply)?.slice(0, 200)}, not {jid, minions}`)
  }
  return { jid: value.jid, minions: value.minions.map(String) }
}
