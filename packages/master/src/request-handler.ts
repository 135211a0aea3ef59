import {
  constantTimeEqual,
  minionIdProblem,
  MinionBoxes,
  type AuthOutcome,
  type KeyChange,
  type PkiStore,
  type PublicKeys,
  type SessionKey,
} from '@brine/crypt'
import {
  expectedMinions,
  resolveNodegroups,
  generateJid,
  isMinionOwnTag,
  tags,
  CLEAR_COMMANDS,
  SEALED_COMMANDS,
  validateMinionEventLoad,
  validatePublishLoad,
  validateReturnLoad,
  type MinionInfo,
  type Nodegroups,
  type PublishLoad,
  type PublishReply,
  type ReturnLoad,
  type TargetType,
  type Tgt,
} from '@brine/common'
import { serializeError, silentLogger, type Logger, type PublishServer, type RequestContext, type WireValue } from '@brine/transport'
import { MalformedRequestError, PermissionDeniedError } from './errors.js'
import type { EventBus } from './event-bus.js'
import type { GrainsCache } from './grains-cache.js'
import type { JobCache } from '@brine/common'
import { findRunner, type GatheredJob, type RunnerContext } from './runners/index.js'
import { runWheel } from './wheel.js'
import type { RequestPool } from './worker-pool.js'

/** A job to publish, as the master's own publish path takes it (a publish load without cmd and key). */
export type JobRequest = Omit<PublishLoad, 'cmd' | 'key'>

export interface MasterRequestHandlerOptions {
  store: PkiStore
  pool: RequestPool
  bus: EventBus
  jobs: JobCache
  grains: GrainsCache
  publisher: PublishServer
  masterPub: PublicKeys
  /** The master's X25519 secret key (minions' boxes are opened and sealed on the main thread). */
  masterBoxSecret: Uint8Array
  /** The session key publishes are sealed under now. */
  session: () => SessionKey
  /** Rotates the session key (after a reject or delete, or an open_mode key replacement). */
  rotateSession: (reason: string) => void
  rootKey: string
  autoAccept: boolean
  openMode: boolean
  nodegroups: Nodegroups
  masterId?: string
  /** Config `timeout` in ms: how long runners that publish wait for returns (default 5000). */
  timeoutMs?: number
  /** The master's version, reported by manage.versions. */
  version?: string
  logger?: Logger
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The master's one request handler, shared by every transport's RequestServer: the clear
 * allow-list (`_auth`, `publish`, `wheel`) and the sealed minion commands (`_return`,
 * `_minion_event`, `_grains`). Crypto runs in the pool; state changes happen here, on the main
 * thread. Whatever a peer sends, the worst outcome is a typed error reply.
 */
export class MasterRequestHandler {
  readonly #o: MasterRequestHandlerOptions
  readonly #logger: Logger
  /** Job records still being written; {@link settle} waits for them before the cache is closed. */
  readonly #pendingJobSaves = new Set<Promise<void>>()
  /** Each minion's box; the shared key is computed in the pool, opening and sealing happen here. */
  readonly #boxes: MinionBoxes

  constructor(options: MasterRequestHandlerOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
    this.#boxes = new MinionBoxes(options.masterBoxSecret, async (id) => (await options.store.acceptedKeys(id))?.box, {
      deriveSharedKey: async (id, boxKey) => (await options.pool.run(id, { op: 'box-shared-key', boxKey })) as Uint8Array,
    })
  }

  /** Resolves once every job record handed to the cache has been written (or failed and been logged). */
  async settle(): Promise<void> {
    await Promise.all([...this.#pendingJobSaves])
  }

  /** The transport's RequestHandler. */
  readonly handle = async (request: WireValue, context: RequestContext): Promise<WireValue> => {
    if (!isMap(request)) throw new MalformedRequestError('request', 'not a map; expected {enc, load} or a sealed {enc: "box", …}')
    switch (request['enc']) {
      case 'clear':
        return this.#clear(request['load'], context)
      case 'box':
        return this.#box(request)
      default:
        throw new MalformedRequestError('request', `enc must be 'clear' or 'box', got ${JSON.stringify(String(request['enc'])).slice(0, 40)}`)
    }
  }

  async #clear(load: unknown, context: RequestContext): Promise<WireValue> {
    if (!isMap(load)) throw new MalformedRequestError('clear request', 'load is not a map')
    const cmd = load['cmd']
    if (typeof cmd !== 'string') throw new MalformedRequestError('clear request', "load.cmd is not a string")
    switch (cmd) {
      case '_auth':
        return this.#auth(load)
      case 'publish':
        this.#checkKey(load, cmd)
        return this.#publish(load)
      case 'wheel':
        this.#checkKey(load, cmd)
        return { return: await this.wheel(load) }
      case 'runner':
        this.#checkKey(load, cmd)
        return this.#runner(load)
      default:
        this.#logger.warning(`refused clear command ${JSON.stringify(cmd.slice(0, 80))} from ${context.transport} peer ${context.peer}`)
        throw new PermissionDeniedError(cmd, cmd.startsWith('_') ? 'not allowed in the clear' : `not a clear command (allowed: ${CLEAR_COMMANDS.join(', ')})`)
    }
  }

  #checkKey(load: Record<string, unknown>, cmd: string): void {
    const key = load['key']
    if (typeof key !== 'string' || !constantTimeEqual(key, this.#o.rootKey)) throw new PermissionDeniedError(cmd, 'the root key is missing or wrong')
  }

  async #auth(load: Record<string, unknown>): Promise<WireValue> {
    const session = this.#o.session()
    const key = typeof load['id'] === 'string' ? load['id'] : ''
    const outcome = (await this.#o.pool.run(key, { op: 'auth', request: load, session, autoAccept: this.#o.autoAccept, openMode: this.#o.openMode })) as AuthOutcome
    if (outcome.event !== undefined) this.#o.bus.fire(tags.auth, { ...outcome.event })
    await this.#applyChanges(outcome.changes, outcome.rotateSession, 'a key was replaced (open_mode)')
    if (outcome.rotateSession && outcome.reply.ret) {
      // The reply carries the pre-rotation key; answer again under the new one.
      return ((await this.#o.pool.run(key, { op: 'auth', request: load, session: this.#o.session(), autoAccept: this.#o.autoAccept, openMode: this.#o.openMode })) as AuthOutcome).reply
    }
    return outcome.reply
  }

  /** Fires `salt/key` for each change, forgets removed keys, rotates the session when told. */
  async #applyChanges(changes: readonly KeyChange[], rotate: boolean, reason: string): Promise<void> {
    for (const change of changes) {
      this.#o.bus.fire(tags.key, { act: change.act, id: change.id, result: true })
      if (change.from === 'accepted' || change.act === 'delete') {
        this.#boxes.forget(change.id)
        if (change.act === 'delete') this.#o.grains.delete(change.id)
      }
    }
    if (rotate) this.#o.rotateSession(reason)
  }

  async #publish(load: Record<string, unknown>): Promise<PublishReply> {
    return this.publishJob(validatePublishLoad(load))
  }

  /**
   * The master's publish path: resolves the expected minions, stores the job, fires
   * `salt/job/<jid>/new` and publishes the sealed load. Runners call it directly.
   */
  async publishJob(request: JobRequest): Promise<PublishReply> {
    // Nodegroups are the master's: minions get them expanded into a compound expression, as Salt's client publishes them.
    const publish: JobRequest = { ...request, ...resolveNodegroups(request, this.#o.nodegroups) }
    const listing = await this.#o.store.list()
    const known: MinionInfo[] = listing.minions.map((id) => {
      const grains = this.#o.grains.get(id)
      return grains === undefined ? { id } : { id, grains }
    })
    const minions = await expectedMinions({ tgt: publish.tgt, tgt_type: publish.tgt_type }, known, this.#o.nodegroups)
    if (minions.length === 0) return { jid: '', minions: [] }
    const jid = publish.jid ?? generateJid()
    const job: Record<string, unknown> = {
      jid,
      fun: publish.fun,
      arg: publish.arg,
      kwarg: publish.kwarg,
      tgt: publish.tgt,
      tgt_type: publish.tgt_type,
      ret: publish.ret,
      user: publish.user,
    }
    if (publish.to !== undefined) job['to'] = publish.to
    if (this.#o.masterId !== undefined) job['master_id'] = this.#o.masterId
    // The job record need not be on disk before the publish: a return for a jid the cache has not recorded yet
    // is kept all the same, so waiting for this write would only add a disk sync to every job's latency.
    const saving = this.#o.jobs.saveJob(jid, job, minions).catch((error: unknown) => {
      this.#logger.error(`job cache: could not save job ${jid}: ${(error as Error).message}`)
    })
    this.#pendingJobSaves.add(saving)
    void saving.finally(() => this.#pendingJobSaves.delete(saving))
    // Salt's new-job event; `missing` (targeted minions not connected) is always empty here.
    this.#o.bus.fire(tags.jobNew(jid), { jid, tgt_type: publish.tgt_type, tgt: publish.tgt, user: publish.user, fun: publish.fun, arg: publish.arg, minions, missing: [] })
    const envelope = await this.#o.pool.run(jid, { op: 'seal-publish', load: job, session: this.#o.session() })
    await this.#o.publisher.publish(envelope, publish.tgt_type === 'list' ? { topics: minions } : undefined)
    return { jid, minions }
  }

  /** Runs one wheel function and applies what it changed (salt/key events, session rotation); returns Salt's return. */
  async wheel(load: Record<string, unknown>): Promise<unknown> {
    const outcome = await runWheel(load, { store: this.#o.store, masterPub: this.#o.masterPub })
    await this.#applyChanges(outcome.changes, outcome.rotateSession, `wheel ${String(load['fun'])}`)
    return outcome.return
  }

  /**
   * Publishes `fun` through {@link publishJob} under a fresh jid and gathers its returns from the
   * bus (subscribed before the publish, so none is missed) until every expected minion answered or
   * `timeout` ms passed.
   */
  async gather(tgt: Tgt, fun: string, arg: readonly unknown[], options: { tgtType?: TargetType; timeout: number; user?: string }): Promise<GatheredJob> {
    const jid = generateJid()
    const prefix = tags.jobReturnPrefix(jid)
    const returns = new Map<string, ReturnLoad>()
    let expected: string[] | undefined
    let finish: () => void = () => {}
    const finished = new Promise<void>((resolve) => (finish = resolve))
    const complete = (): boolean => expected !== undefined && expected.every((id) => returns.has(id))
    const unsubscribe = this.#o.bus.subscribe((event) => {
      if (!event.tag.startsWith(prefix)) return
      returns.set(event.tag.slice(prefix.length), event.data as unknown as ReturnLoad)
      if (complete()) finish()
    })
    let timer: NodeJS.Timeout | undefined
    try {
      const reply = await this.publishJob({ tgt, tgt_type: options.tgtType ?? 'glob', fun, arg: [...arg], kwarg: {}, ret: '', user: options.user ?? 'root', jid })
      expected = reply.minions
      if (!complete()) {
        await Promise.race([finished, new Promise<void>((resolve) => (timer = setTimeout(resolve, options.timeout)))])
      }
      return { jid: reply.jid, minions: [...reply.minions], returns: new Map(returns) }
    } finally {
      clearTimeout(timer)
      unsubscribe()
    }
  }

  /**
   * A runner call: fires `salt/run/<jid>/new`, runs the function (async, so other requests keep
   * being served), fires `salt/run/<jid>/ret` and replies `{jid, return, success}`. A runner that
   * fails answers Salt's "Exception occurred in runner …" text with success false; an unknown
   * runner is an error reply listing the available ones.
   */
  async #runner(load: Record<string, unknown>): Promise<WireValue> {
    const fun = load['fun']
    const runner = findRunner(fun)
    const name = fun as string
    const argValue = load['arg'] ?? []
    const kwargValue = load['kwarg'] ?? {}
    if (!Array.isArray(argValue)) throw new MalformedRequestError('runner load', "field 'arg' must be a list")
    if (!isMap(kwargValue)) throw new MalformedRequestError('runner load', "field 'kwarg' must be a mapping")
    const user = typeof load['user'] === 'string' && load['user'] !== '' ? load['user'] : 'root'
    const jid = generateJid()
    // Salt's fun_args: the positional arguments, then the keyword ones as one dict.
    const funArgs: unknown[] = [...argValue, ...(Object.keys(kwargValue).length > 0 ? [kwargValue] : [])]
    const runFun = `runner.${name}`
    this.#o.bus.fire(tags.runNew(jid), { fun: runFun, fun_args: funArgs, jid, user })
    let value: unknown
    let success = true
    try {
      value = await runner({ arg: argValue, kwarg: kwargValue }, this.#runnerContext(user))
    } catch (error) {
      success = false
      const problem = error as Error
      value = `Exception occurred in runner ${name}: ${problem?.name ?? 'Error'}: ${problem?.message ?? String(error)}`
      this.#logger.warning(String(value))
    }
    this.#o.bus.fire(tags.runReturn(jid), { fun: runFun, fun_args: funArgs, jid, return: value, success, user })
    return { jid, return: value as WireValue, success }
  }

  #runnerContext(user: string): RunnerContext {
    return {
      jobs: this.#o.jobs,
      store: this.#o.store,
      bus: this.#o.bus,
      gather: (tgt, fun, arg, options) => this.gather(tgt, fun, arg, { ...options, user }),
      wheel: (load) => this.wheel(load),
      timeoutMs: this.#o.timeoutMs ?? 5000,
      version: this.#o.version ?? '0.0.0',
      logger: this.#logger.child('runner'),
    }
  }

  async #box(request: Record<string, unknown>): Promise<WireValue> {
    const id = request['id']
    const problem = minionIdProblem(id)
    if (problem !== undefined) throw new MalformedRequestError('sealed request', `id ${problem}`)
    const opened = await this.#boxes.open(request)
    let reply: Record<string, unknown>
    try {
      await this.#inner(opened.id, opened.load)
      reply = { ok: true }
    } catch (error) {
      this.#logger.warning(`sealed request from minion ${JSON.stringify(opened.id)} refused: ${String((error as Error).message ?? error)}`)
      reply = { ok: false, error: serializeError(error) }
    }
    return (await this.#boxes.seal(opened.id, reply)) as unknown as WireValue
  }

  async #inner(id: string, load: WireValue): Promise<void> {
    if (!isMap(load)) throw new MalformedRequestError('sealed load', 'not a map')
    if (load['id'] !== id) throw new PermissionDeniedError(String(load['cmd']), `the load names minion ${JSON.stringify(String(load['id']).slice(0, 80))}, but it was sealed by ${JSON.stringify(id)}`)
    switch (load['cmd']) {
      case '_return': {
        const ret = validateReturnLoad(load)
        if (await this.#o.jobs.saveReturn(ret.jid, id, ret)) this.#o.bus.fire(tags.jobReturn(ret.jid, id), returnEventData(ret))
        return
      }
      case '_minion_event': {
        const { events } = validateMinionEventLoad(load)
        const foreign = events.find((event) => !isMinionOwnTag(id, event.tag))
        if (foreign !== undefined) throw new PermissionDeniedError('_minion_event', `minion ${JSON.stringify(id)} may only fire minion_start or tags under ${tags.minionPrefix(id)}, not ${JSON.stringify(foreign.tag.slice(0, 120))}`)
        for (const event of events) this.#o.bus.fire(event.tag, { ...event.data })
        return
      }
      case '_grains': {
        const grains = load['grains']
        if (!isMap(grains)) throw new MalformedRequestError('_grains load', "field 'grains' must be a mapping")
        await this.#o.grains.set(id, grains)
        return
      }
      default:
        throw new PermissionDeniedError(String(load['cmd']).slice(0, 80), `not a sealed minion command (allowed: ${SEALED_COMMANDS.join(', ')})`)
    }
  }
}

/**
 * Salt's `salt/job/<jid>/ret/<id>` data: exactly the return load's fields (cmd, id, jid, fun,
 * fun_args, return, retcode, success, and out/master_id when set); anything else a minion added is
 * left out, so programs written against Salt's events see the same keys.
 */
export function returnEventData(ret: ReturnLoad): Record<string, unknown> {
  const data: Record<string, unknown> = {
    cmd: '_return',
    id: ret.id,
    jid: ret.jid,
    fun: ret.fun,
    fun_args: ret.fun_args,
    return: ret.return,
    retcode: ret.retcode,
    success: ret.success,
  }
  if (ret.out !== undefined) data['out'] = ret.out
  if (ret.master_id !== undefined) data['master_id'] = ret.master_id
  return data
}
