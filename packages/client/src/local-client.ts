import { userInfo } from 'node:os'
import type { RequestClient } from '@brine/transport'
import type { Logger } from '@brine/core'
import { type JobSource } from '@brine/common'
import { secondsFromMs, timeoutsFromConfig, type MasterConfig } from '@brine/config'
import {
  jobEventJid,
  parsePublishReply,
  storedReturnsOfListJob,
  unwrapOutputter,
  type PreviewTargetLoad,
  type PublishLoad,
  type PublishReply,
  type TargetType,
  type Tgt,
} from '@brine/protocol'
import { runBatch, type BatchEvent, type BatchOptions } from './batch.js'
import { ClearRequester, type ClearRequestOptions, type ClientCredentials, type MasterClientOptions, type RequestOrigin } from './clear-request.js'
import { MasterRequestError, PublishError } from './errors.js'
import { Job, type CliReturn, type JobEventReader, type JobHost, type WaitOptions } from './job.js'
import { MasterEvent } from './master-event.js'
import { DEFAULT_SUBSET_SIZE, parseSubsetSize, pickSubset } from './subset.js'

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
  /** Salt's job metadata: kept with the job, echoed in each return, searched by `jobs.list_jobs search_metadata=`. */
  metadata?: Record<string, unknown>
  /** Ends the wait for returns (the job keeps running on the minions). */
  signal?: AbortSignal
  /** Publish as this eauth user (their ACL applies) instead of with the client's own credentials. */
  credentials?: ClientCredentials
  /** Where this publish comes from (the master's audit log), instead of the client's `origin`. */
  origin?: RequestOrigin
}

/** One minion's return in Salt's `cmd_iter` shape. */
export interface MinionReturn {
  ret: unknown
  retcode: number
  jid: string
  success?: boolean
  out?: string
}

/** What a job's reader listens to: Salt's job events and the syndics' (`syndic/<id>/…`). */
const JOB_READER_MATCH = '^(?:salt/job/|syndic/)'

/**
 * The only events a job's reader uses (returns, find_job's among them, and syndics' announcements): the
 * client's bus connection asks the master for these alone, so a job's `new` event and its audit line do not
 * wake the client while the minions work.
 */
const JOB_BUS_TAGS = ['salt/job/*/ret/', 'syndic/']

/** Salt's text for a minion that neither returned nor answered find_job. */
export const NO_RESPONSE = 'Minion did not return. [No response]'

interface Connection {
  opts: MasterConfig
  key: string | undefined
  requests: RequestClient
  events: MasterEvent
}

/** The user name of the uid last looked up: every publish names it, and the lookup reads the user database. */
let lookedUp: { uid: number; name: string } | undefined

/** Salt's user name for the publish: `sudo_<user>` under sudo, else the current user. */
export function currentUser(): string {
  if (process.env.SUDO_USER) return `sudo_${process.env.SUDO_USER}`
  // Looked up again if the process switched users (a daemon dropping root).
  const uid = process.getuid?.() ?? -1
  if (lookedUp?.uid === uid) return lookedUp.name
  let name: string
  try {
    name = userInfo().username
  } catch {
    name = 'root'
  }
  lookedUp = { uid, name }
  return name
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
  #connecting: Promise<Connection> | undefined
  #connection: Connection | undefined
  readonly #logger: Logger
  readonly #requester: ClearRequester
  readonly #host: JobHost
  #closed = false

  constructor(options: LocalClientOptions = {}) {
    this.#requester = new ClearRequester(options)
    this.#logger = this.#requester.logger
    const source: JobSource = {
      findJob: (jid, { tgt, tgt_type: tgtType = 'glob' }, { timeout, signal }) =>
        this.#publish(tgt, 'saltutil.find_job', [jid], signal === undefined ? { tgtType, timeout } : { tgtType, timeout, signal }),
      storedReturns: (jid, { signal }) => this.#storedReturns(jid, signal),
    }
    this.#host = {
      openReader: () => this.#openReader(this.#connected()),
      source,
      waits: () => {
        const timeouts = timeoutsFromConfig(this.#connected().opts)
        return { timeout: timeouts.timeoutMs, gatherJobTimeout: timeouts.gatherJobTimeoutMs, syndicWait: timeouts.syndicWaitMs }
      },
      logger: this.#logger,
    }
  }

  /** Reads the config and root key and connects to the master; later calls reuse the connection. */
  connect(): Promise<Connection> {
    if (this.#closed) return Promise.reject(new PublishError('this LocalClient is closed'))
    this.#connecting ??= this.#open().then(
      (connection) => (this.#connection = connection),
      (error: unknown) => {
        this.#connecting = undefined
        throw error
      },
    )
    return this.#connecting
  }

  async #open(): Promise<Connection> {
    const { opts, key, requests } = await this.#requester.connect()
    // The bus first would be Salt's order; either way it is open before any publish is sent.
    const events = new MasterEvent({ sockDir: opts.sock_dir, logger: this.#logger, tags: JOB_BUS_TAGS })
    await events.connect()
    return { opts, key, requests, events }
  }

  #connected(): Connection {
    if (this.#connection === undefined) throw new PublishError('this LocalClient is not connected (call connect() first)')
    return this.#connection
  }

  /** The loaded master config (connects first). */
  async config(): Promise<MasterConfig> {
    return (await this.connect()).opts
  }

  /** Bus readers open now: one per Job being collected (or published with `listen: true`). */
  get openReaders(): number {
    return this.#connection?.events.readerCount ?? 0
  }

  /** Sends one clear request with the root key or the credentials given (`publish`, `wheel`, `runner`) and returns the master's reply. */
  async request(load: Record<string, unknown>, options: ClearRequestOptions = {}): Promise<unknown> {
    await this.connect()
    return this.#requester.request(load, options, load['cmd'] === 'publish' ? PublishError : MasterRequestError)
  }

  /**
   * Publishes a job and returns its {@link Job}: the jid, the minions the master expects to answer (none
   * when nothing matched) and `returns()`. The Job holds no bus reader until `returns()` is iterated, which
   * then catches up from the job cache. With `listen: true` a reader is opened before the publish and held
   * for the first `returns()` (no cache lookup: what `cmd`, `cmdIter` and `brine` use), until it ends or
   * `close()`.
   */
  async runJob(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions & { listen?: boolean } = {}): Promise<Job> {
    const connection = await this.connect()
    const early = options.listen === true ? this.#openReader(connection) : undefined
    let reply: PublishReply
    try {
      reply = await this.#publish(tgt, fun, arg, options)
    } catch (error) {
      early?.stop()
      throw error
    }
    const expectsReturns = reply.minions.length > 0 || Object.keys(reply.syndics ?? {}).length > 0
    if (!expectsReturns) early?.stop()
    const target = { tgt, tgt_type: options.tgtType ?? 'glob' }
    return new Job(this.#host, reply.jid, reply.minions, expectsReturns ? early : undefined, reply.syndics, reply.missing, target)
  }

  async #publish(tgt: Tgt, fun: string, arg: readonly unknown[], options: RunJobOptions): Promise<PublishReply> {
    const connection = await this.connect()
    const timeout = options.timeout ?? timeoutsFromConfig(connection.opts).timeoutMs
    const load: PublishLoad = {
      cmd: 'publish',
      tgt,
      tgt_type: options.tgtType ?? 'glob',
      fun,
      arg: [...arg],
      kwarg: options.kwarg ?? {},
      ret: options.ret ?? '',
      user: currentUser(),
      // The publish load carries Salt's seconds.
      timeout: secondsFromMs(timeout),
    }
    if (options.jid !== undefined) load.jid = options.jid
    if (options.metadata !== undefined) load.metadata = options.metadata
    return checkPublishReply(await this.request(load as unknown as Record<string, unknown>, requestOptionsOf(options)))
  }

  /**
   * The minions a publish of `fun` to `tgt` would expect, as the master resolves them and under the same permission
   * check; nothing is published (Salt's `--preview-target`).
   */
  async previewTarget(tgt: Tgt, fun: string, options: Pick<RunJobOptions, 'tgtType' | 'signal' | 'credentials' | 'origin'> = {}): Promise<string[]> {
    await this.connect()
    const load: PreviewTargetLoad = { cmd: 'preview_target', tgt, tgt_type: options.tgtType ?? 'glob', fun, user: currentUser() }
    const reply = (await this.request(load as unknown as Record<string, unknown>, requestOptionsOf(options))) as { minions?: unknown } | null
    const minions = reply?.minions
    if (!Array.isArray(minions) || !minions.every((id) => typeof id === 'string'))
      throw new PublishError(`the master answered preview_target with ${JSON.stringify(reply)?.slice(0, 200)}, not {minions}`)
    return minions
  }

  /** Publishes and returns the jid at once, '' if no minion matched (Salt's cmd_async). */
  async cmdAsync(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions = {}): Promise<string> {
    const job = await this.runJob(tgt, fun, arg, options)
    return job.expectsReturns ? job.jid : ''
  }

  /** Runs a job and returns `{id: return}` for every minion that returned (Salt's cmd). */
  async cmd(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions = {}): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {}
    for await (const item of this.cmdIter(tgt, fun, arg, options)) {
      for (const [id, value] of Object.entries(item)) out[id] = value.ret
    }
    return out
  }

  /**
   * The minions Salt's cmd_subset would run on: `sys.list_functions` is run on `tgt` (with the same
   * credentials, so the caller needs the right to run it) and, of the minions whose list names `fun`,
   * `count` are picked at random. The ids, for a list target; none when no minion has `fun`.
   */
  async subsetOf(tgt: Tgt, fun: string, count: number, options: RunJobOptions = {}): Promise<string[]> {
    const size = parseSubsetSize(count, 'subset')
    // The look-up job carries the caller's target, wait and identity, not the job's own arguments or returners.
    const { kwarg: _kwarg, ret: _ret, jid: _jid, metadata: _metadata, ...lookup } = options
    return pickSubset(await this.cmd(tgt, 'sys.list_functions', [], lookup), fun, size)
  }

  /** Salt's cmd_subset: `fun` on at most `subset` (default 3) of the minions `tgt` matches that have it, `{id: return}` as {@link cmd}. */
  async cmdSubset(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions & { subset?: number } = {}): Promise<Record<string, unknown>> {
    const { subset = DEFAULT_SUBSET_SIZE, ...rest } = options
    const ids = await this.subsetOf(tgt, fun, subset, rest)
    return ids.length === 0 ? {} : this.cmd(ids, fun, arg, { ...rest, tgtType: 'list' })
  }

  /** Yields `{[id]: {ret, retcode, jid, out?}}` per minion as it returns (Salt's cmd_iter). */
  async *cmdIter(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: RunJobOptions = {}): AsyncGenerator<Record<string, MinionReturn>> {
    // The reader is opened before the publish: no return can slip past, and no cache lookup is needed.
    await using job = await this.runJob(tgt, fun, arg, { ...options, listen: true })
    const wait: WaitOptions = {}
    if (options.timeout !== undefined) wait.timeout = options.timeout
    if (options.signal !== undefined) wait.signal = options.signal
    for await (const item of job.returns(wait)) {
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
   * Salt's `cmd_batch`, as an async iterator: pings the target, then runs `fun` on at most `batch` of the
   * minions that answered at a time (a count or a percentage, default `10%`), each batch a new job with a
   * list target, yielding {@link BatchEvent}s: the ping's outcome, each batch published, each return (or
   * minion that did not return), and a last `failhard` event when `failhard` stopped the run. Minions
   * that do not answer the ping get no job; offline minions cost the bounded find_job wait, never a hang.
   * `signal` ends the run (jobs already sent keep running). A bad `batch` throws {@link BatchSizeError}.
   *
   * ```ts
   * for await (const event of client.cmdBatch('web*', 'cmd.run', ['apt-get -y upgrade'], { batch: '25%', failhard: true })) {
   *   if (event.type === 'return' && event.item.status === 'returned') console.log(event.item.id, event.item.retcode)
   * }
   * ```
   */
  cmdBatch(tgt: Tgt, fun: string, arg: readonly unknown[] = [], options: BatchOptions = {}): AsyncGenerator<BatchEvent> {
    const credentials = options.credentials === undefined ? {} : { credentials: options.credentials }
    return runBatch(
      { runJob: (target, name, args, jobOptions) => this.runJob(target, name, args, { ...jobOptions, ...credentials, listen: true }) },
      tgt,
      fun,
      arg,
      options,
    )
  }

  /**
   * The returns of a job published earlier (by jid), as {@link Job.returns} yields them: a reader is
   * opened, the job cache read for what came before it, then returns as they arrive, find_job, and
   * `missing` markers (Salt's get_cli_returns).
   */
  async *getCliReturns(jid: string, minions: readonly string[], options: WaitOptions = {}): AsyncGenerator<CliReturn> {
    await this.connect()
    await using job = new Job(this.#host, jid, minions)
    yield* job.returns(options)
  }

  /**
   * The returns the master stored for `jid`, read with the runner `jobs.list_job` (its `Result` keeps
   * each return's retcode and success); one request, one try, bounded by the request timeout.
   */
  async #storedReturns(jid: string, signal: AbortSignal | undefined) {
    const load = { cmd: 'runner', fun: 'jobs.list_job', arg: [jid], kwarg: {}, user: currentUser() }
    const reply = (await this.request(load, signal === undefined ? { tries: 1 } : { tries: 1, signal })) as { return?: unknown; success?: unknown } | null
    if (typeof reply !== 'object' || reply === null || reply.success === false) {
      throw new MasterRequestError(`jobs.list_job ${jid} answered ${JSON.stringify(reply)?.slice(0, 200)}`, { jid })
    }
    return storedReturnsOfListJob(reply.return)
  }

  #openReader(connection: Connection): JobEventReader {
    // Job events, and the announcements of syndics (`syndic/<id>/salt/job/<jid>/new`) on a master of masters;
    // once its collector names its jids, only theirs (with several jobs in flight, each reader skips the others' returns).
    let jids: ReadonlySet<string> | undefined
    const filter = (tag: string): boolean => jids === undefined || jids.has(jobEventJid(tag) ?? '')
    const events = connection.events.iter({ match: JOB_READER_MATCH, matchType: 'regex', filter })
    return {
      events,
      // Not an AbortController's abort: that made and dispatched an abort event for every job.
      stop: () => events.stop(),
      focus: (wanted) => {
        jids = wanted
      },
    }
  }

  /** Closes the request client and the event bus connection (ending every Job's reader). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const connection = await this.#connecting?.catch(() => undefined)
    this.#connecting = undefined
    this.#connection = undefined
    await this.#requester.close()
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
  const { outputter, data } = unwrapOutputter(value)
  if (outputter !== undefined && typeof data === 'object' && data !== null && !Array.isArray(data))
    return { returns: data as Record<string, unknown>, out: outputter }
  return { returns: typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {} }
}

/** The request options a job's options carry: its signal, credentials and origin. */
function requestOptionsOf(options: Pick<RunJobOptions, 'signal' | 'credentials' | 'origin'>): ClearRequestOptions {
  const requestOptions: ClearRequestOptions = {}
  if (options.signal !== undefined) requestOptions.signal = options.signal
  if (options.credentials !== undefined) requestOptions.credentials = options.credentials
  if (options.origin !== undefined) requestOptions.origin = options.origin
  return requestOptions
}

function checkPublishReply(reply: unknown): PublishReply {
  const checked = parsePublishReply(reply)
  if (checked === undefined) throw new PublishError(`the master answered the publish with ${JSON.stringify(reply)?.slice(0, 200)}, not {jid, minions}`)
  return checked
}
