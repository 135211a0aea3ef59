import {
  isValidMinionId,
  pendingLimitOutcome,
  publicKeysEqual,
  settleAuth,
  type AuthAcceptanceMade,
  type AuthOutcome,
  type KeyChange,
  type PkiStore,
  type PublicKeys,
  type SessionKey,
  type SubmitResult,
} from '@brine/crypt'
import { type JobCache } from '@brine/common'
import { generateJid, tags, type EventLoad, type PreviewTargetReply, type PublishReply, type ReturnLoad, type Target, returnEventData } from '@brine/protocol'
import { type Grains, type MinionInfo } from '@brine/targeting'
import { LogLimiter, silentLogger, type Logger, type WireValue } from '@brine/core'
import { aclTargets, permits, refusal, type Action } from './acl.js'
import { masterCaller, type Authorizer, type Caller, type Credentials } from './authorize.js'
import { checkReturners } from '@brine/returners'
import type { AuditCall, AuditLog } from './audit/audit-log.js'
import type { MinionEventGate } from './minion-event-gate.js'
import { callerTagProblem, minionTagProblem } from './tag-rules.js'
import { MalformedRequestError, PermissionDeniedError, ReturnRefusedError, UnknownWheelFunctionError } from '@brine/protocol'
import type { EventBus } from './event-bus.js'
import type { FileServer } from './file-server/file-server.js'
import { gather } from './gather.js'
import type { GrainsCache } from './grains-cache.js'
import type { IssuedJobs } from './issued-jobs.js'
import type { JobPublisher, JobRequest } from './job-publisher.js'
import { findRunner, type RunnerContext } from './runners/index.js'
import { runWheel, WHEEL_FUNCTIONS, type WheelContext } from './wheel.js'
import type { AuthAcceptParams, AuthTaskResult, WorkerTask } from './request-worker.js'
import type { RequestPool } from './worker-pool.js'
import type { SyndicRegistry } from './syndics.js'
import { saveReturn, storeFailure } from './job-returns.js'

/** A runner call: Salt's `fun`, positional `arg` and keyword `kwarg`. */
export interface RunnerCall {
  fun: unknown
  arg?: unknown
  kwarg?: unknown
}

/** What a runner call answers (Salt's `{jid, return, success}`). */
export interface RunnerReply {
  jid: string
  return: unknown
  success: boolean
}

/** What runner_async and wheel_async answer (Salt's `{tag, jid}`). */
export interface AsyncReply {
  tag: string
  jid: string
}

/** What a wheel call answers: Salt's return, with the jid and tag its events carry. */
export interface WheelReply {
  jid: string
  tag: string
  user: string
  return: unknown
  success: boolean
}

/** The session key publishes are sealed under, and its rotation. */
export interface SessionControl {
  current(): SessionKey
  rotate(reason: string): void
  /**
   * Minion `id` is about to be handed the current key in an `_auth` reply: resolves once that is recorded where a
   * restarted master looks (the session key file), so a key deleted while the master is down forces a new key.
   */
  handedTo?(id: string): Promise<void>
}

export interface MasterServiceSettings {
  autoAccept: boolean
  openMode: boolean
  /** Config `timeout` in ms: how long runners that publish wait for returns. */
  timeoutMs: number
  /** Config `gather_job_timeout` in ms: the find_job wait of runners that publish. */
  gatherJobTimeoutMs: number
  /** The master's version, reported by manage.versions. */
  version: string
  /** How long a minion may use a session before authenticating again (`publish_session`), ms; 0: no limit. */
  sessionTtlMs?: number
  /** Salt's `unique_jid`: new jids end in `_<pid>`. */
  uniqueJid?: boolean
  /** Salt's `order_masters`: publish even when no direct minion matches, and wait for syndics' announcements. */
  orderMasters?: boolean
  /** Config `syndic_wait` in ms: how long a client (and the runners) wait past `timeout` for syndics to announce. */
  syndicWaitMs?: number
}

/** Where an `_auth` request arrived, for what the reply tells the minion. */
export interface AuthContext {
  /** The publish port of the transport the request came in on (Salt's auth reply carries it). */
  publishPort?: number
  /**
   * Told the box key shared with a minion just accepted (for its `pub.box`), which the handshake agreed to seal the
   * session key: the sealed channel keeps it for that minion's requests instead of agreeing it again.
   */
  onSharedKey?: (id: string, boxPublicKey: Uint8Array, sharedKey: Uint8Array) => void
}

export interface MasterServiceOptions {
  authorizer: Authorizer
  publisher: JobPublisher
  store: PkiStore
  jobs: JobCache
  bus: EventBus
  grains: GrainsCache
  /** Runs `_auth` handshakes (signature checks) off the main thread. */
  crypto: RequestPool
  session: SessionControl
  masterPub: PublicKeys
  settings: MasterServiceSettings
  /**
   * The jobs published and whom each could reach: a return is stored only from a minion its job was sent
   * to, and a syndic's announcement only for a job found here.
   */
  issued: IssuedJobs
  /** The master's clock, ms since the epoch (default Date.now). */
  now?: () => number
  /** The syndics attached to this master and the minions they announced. */
  syndics: SyndicRegistry
  /** Where every publish, runner and wheel call is recorded (accepted or refused); none: not recorded. */
  audit?: AuditLog
  /** The size and rate bounds on the events minions send; none: unbounded (tests). */
  minionEventGate?: MinionEventGate
  /** The file server, for the fileserver runners and the file_roots wheel. */
  files?: FileServer
  /** The master's pki_dir: wheel key.list_all lists its own key files there as `local`. */
  pkiDir?: string
  /** The master's resolved config, what wheel config.values answers. */
  configValues?: Readonly<Record<string, unknown>>
  logger?: Logger
}

export type KeyChangeListener = (change: KeyChange) => void

/** Salt's `missing`: the ids a list target names that are not accepted minions (`a,b` or a list, empty names dropped). */
function listedMissing(target: { tgt: unknown; tgt_type?: unknown }, known: readonly { id: string }[]): string[] {
  if (target.tgt_type !== 'list') return []
  const listed = Array.isArray(target.tgt) ? target.tgt.map(String) : String(target.tgt).split(',')
  const accepted = new Set(known.map((minion) => minion.id))
  return [...new Set(listed.filter((id) => id !== '' && !accepted.has(id)))]
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The master's operations, typed, behind one {@link authorize} step: what the wire adapter calls for
 * each request, and what the master's own reactor, schedule and runners call in-process (the REST API
 * and the syndic reach it over the wire, as any client does). `publish`, `runner` and `wheel` take the
 * {@link Caller} authorize made and check it against the call; the minion commands (`auth`,
 * `minionReturn`, `minionEvents`, `minionGrains`) take the minion id the sealed channel proved. A
 * syndic's batches go to the SyndicIntake, eauth tokens to TokenCommands.
 */
export class MasterService {
  readonly #o: MasterServiceOptions
  readonly #logger: Logger
  /** Refused calls are a caller's doing: 10 lines a minute, then a count of the rest. */
  readonly #refusalLog = new LogLimiter()
  readonly #keyListeners = new Set<KeyChangeListener>()
  /** Minions connected to this master: authenticated (or returned) since it started, key not removed since. */
  readonly #connected = new Set<string>()

  constructor(options: MasterServiceOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  /** True for the master's root key (see {@link Authorizer.holdsRootKey}). */
  holdsRootKey(key: unknown): boolean {
    return this.#o.authorizer.holdsRootKey(key)
  }

  /** The one authorize step: the credentials a request carries (`key`, `token`, or `eauth` + `username` + `password`) → its caller. */
  authorize(request: Credentials, from?: string): Promise<Caller> {
    return this.#o.authorizer.authorize(request, from)
  }

  /**
   * Publishes a job for `caller`: its target resolved, its permission checked, then stored, fired and
   * published under the caller's user name (Salt records the authenticated user, not what the load claims).
   */
  async publish(caller: Caller, job: JobRequest): Promise<PublishReply> {
    // A returner the minions do not have is refused here, not left to each minion to log (Salt's way).
    checkReturners(job.ret)
    const { known, target, minions } = await this.#expected(job)
    const resolved = { ...job, ...target, jid: job.jid ?? this.#newJid() }
    const syndics = this.#o.settings.orderMasters === true ? await this.#syndicsFor(resolved) : undefined
    const audited: AuditCall = {
      cmd: 'publish',
      fun: job.fun,
      tgt: job.tgt,
      tgt_type: job.tgt_type ?? 'glob',
      arg: job.arg,
      kwarg: job.kwarg,
      result: 'accepted',
    }
    await this.#checkPublish(caller, job.fun, minions, known, audited)
    const reply = await this.#o.publisher.publish(
      resolved.user === caller.user ? resolved : { ...resolved, user: caller.user },
      minions,
      syndics,
      listedMissing(resolved, known),
    )
    this.#o.audit?.record(caller, { ...audited, jid: reply.jid, minions: reply.minions })
    return reply
  }

  /**
   * The minions a publish of `request.fun` to its target would expect, checked as that publish would be; nothing is
   * stored, fired, published or audited (Salt's `--preview-target`).
   */
  async previewTarget(caller: Caller, request: Pick<JobRequest, 'tgt' | 'tgt_type' | 'fun'>): Promise<PreviewTargetReply> {
    const { known, minions } = await this.#expected(request)
    await this.#checkPublish(caller, request.fun, minions, known)
    return { minions }
  }

  /** The accepted minions (a syndic is not one: it never returns), the target with nodegroups resolved, and the minions it selects. */
  async #expected(job: Pick<JobRequest, 'tgt' | 'tgt_type'>): Promise<{ known: MinionInfo[]; target: Target; minions: string[] }> {
    const syndicRegistry = this.#o.syndics
    const known = (await this.#o.publisher.known()).filter((minion) => !syndicRegistry.isSyndic(minion.id))
    // Nodegroups are the master's: minions receive the compound expression they stand for (as Salt's client sends it).
    const target = this.#o.publisher.resolveNodegroups({ tgt: job.tgt, tgt_type: job.tgt_type })
    return { known, target, minions: await this.#o.publisher.expected(target, known) }
  }

  /** Refuses a publish of `fun` to `minions` that no ACL entry of the caller permits (its targets resolved against the same `known`). */
  async #checkPublish(caller: Caller, fun: string, minions: readonly string[], known: readonly MinionInfo[], audited?: AuditCall): Promise<void> {
    // Matching is async: regexes run off the main thread.
    const targets = aclTargets(caller)
    const allowed = new Map(
      await Promise.all(targets.map(async (target) => [target, await this.#o.publisher.expected({ tgt: target, tgt_type: 'compound' }, known)] as const)),
    )
    this.#check(caller, 'publish', { kind: 'publish', fun, minions }, (target) => allowed.get(target) ?? [], audited)
  }

  /** The syndics attached now (registered and accepted), each with the minions it announced before that `target` may select. */
  async #syndicsFor(target: JobRequest): Promise<Record<string, string[]>> {
    const attached: string[] = []
    for (const id of this.#o.syndics.ids()) if (await this.#o.store.isSyndic(id)) attached.push(id)
    return this.#o.syndics.candidates({ tgt: target.tgt, tgt_type: target.tgt_type }, attached, this.#o.publisher.nodegroups)
  }

  /**
   * Runs a runner for `caller`: fires `salt/run/<jid>/new`, runs the function (async, so other requests
   * keep being served), fires `salt/run/<jid>/ret` and answers `{jid, return, success}`. A runner that
   * fails answers Salt's "Exception occurred in runner …" text with success false; an unknown runner is
   * an UnknownRunnerError listing the available ones.
   */
  async runner(caller: Caller, call: RunnerCall): Promise<RunnerReply> {
    return this.#prepareRunner(caller, call).run()
  }

  /**
   * Salt's runner_async: checks the runner exists and the caller may run it, then answers `{tag, jid}` at
   * once while the runner goes on in the background (its return comes as `salt/run/<jid>/ret`).
   */
  runnerAsync(caller: Caller, call: RunnerCall): AsyncReply {
    const prepared = this.#prepareRunner(caller, call)
    void prepared.run()
    return { tag: tags.run(prepared.jid), jid: prepared.jid }
  }

  #prepareRunner(caller: Caller, call: RunnerCall): { jid: string; run: () => Promise<RunnerReply> } {
    const runner = findRunner(call.fun)
    const name = call.fun as string
    const argValue = call.arg ?? []
    const kwargValue = call.kwarg ?? {}
    const audited: AuditCall = { cmd: 'runner', fun: name, arg: argValue, kwarg: kwargValue, result: 'accepted' }
    this.#check(caller, 'runner', { kind: 'runner', fun: name }, undefined, audited)
    if (!Array.isArray(argValue)) throw new MalformedRequestError('runner load', "field 'arg' must be a list")
    if (!isMap(kwargValue)) throw new MalformedRequestError('runner load', "field 'kwarg' must be a mapping")
    const jid = this.#newJid()
    this.#o.audit?.record(caller, { ...audited, jid })
    // Salt's fun_args: the positional arguments, then the keyword ones as one dict.
    const funArgs: unknown[] = [...argValue, ...(Object.keys(kwargValue).length > 0 ? [kwargValue] : [])]
    const runFun = `runner.${name}`
    const user = caller.user
    const run = async (): Promise<RunnerReply> => {
      this.#o.bus.fire(tags.runNew(jid), { fun: runFun, fun_args: funArgs, jid, user })
      let value: unknown
      let success = true
      try {
        value = await runner({ arg: argValue, kwarg: kwargValue }, this.#runnerContext(user, jid, caller))
      } catch (error) {
        success = false
        const problem = error as Error
        value = `Exception occurred in runner ${name}: ${problem?.name ?? 'Error'}: ${problem?.message ?? String(error)}`
        this.#logger.warning(String(value))
      }
      this.#o.bus.fire(tags.runReturn(jid), { fun: runFun, fun_args: funArgs, jid, return: value, success, user })
      return { jid, return: value, success }
    }
    return { jid, run }
  }

  /**
   * Runs one wheel function (key management) for `caller`, applies what it changed (salt/key events,
   * session rotation), fires `salt/wheel/<jid>/new` and `/ret`, and answers Salt's return with its jid
   * and tag. A function that does not exist, or arguments it cannot use, throw (nothing is fired).
   */
  async wheel(caller: Caller, load: Record<string, unknown>): Promise<WheelReply> {
    return this.#prepareWheel(caller, load).run()
  }

  /** Salt's wheel_async: checks the function exists and the caller may run it, answers `{tag, jid}`, runs it in the background. */
  wheelAsync(caller: Caller, load: Record<string, unknown>): AsyncReply {
    const prepared = this.#prepareWheel(caller, load)
    void prepared
      .run()
      .catch((error: unknown) => this.#logger.warning(`wheel ${String(load['fun'])} (jid ${prepared.jid}) failed: ${(error as Error).message}`))
    return { tag: tags.wheel(prepared.jid), jid: prepared.jid }
  }

  #prepareWheel(caller: Caller, load: Record<string, unknown>): { jid: string; run: () => Promise<WheelReply> } {
    const fun = load['fun']
    if (typeof fun !== 'string') throw new MalformedRequestError('wheel load', "field 'fun' must be a string")
    if (!Object.hasOwn(WHEEL_FUNCTIONS, fun)) throw new UnknownWheelFunctionError(fun, Object.keys(WHEEL_FUNCTIONS))
    const { fun: _fun, ...wheelArgs } = load
    const audited: AuditCall = { cmd: 'wheel', fun, kwarg: wheelArgs, result: 'accepted' }
    this.#check(caller, 'wheel', { kind: 'wheel', fun }, undefined, audited)
    const jid = this.#newJid()
    this.#o.audit?.record(caller, { ...audited, jid })
    const user = caller.user
    const wheelFun = `wheel.${fun}`
    const run = async (): Promise<WheelReply> => {
      this.#o.bus.fire(tags.wheelNew(jid), { fun: wheelFun, jid, user })
      let outcome: Awaited<ReturnType<typeof runWheel>>
      try {
        outcome = await runWheel(load, this.#wheelContext())
      } catch (error) {
        this.#o.bus.fire(tags.wheelReturn(jid), { fun: wheelFun, jid, user, return: `${(error as Error).name}: ${(error as Error).message}`, success: false })
        throw error
      }
      await this.#applyChanges(outcome.changes, outcome.rotateSession, `wheel ${fun}`)
      this.#o.bus.fire(tags.wheelReturn(jid), { fun: wheelFun, jid, user, return: outcome.return, success: true })
      return { jid, tag: tags.wheel(jid), user, return: outcome.return, success: true }
    }
    return { jid, run }
  }

  /**
   * Fires `tag` with `data` on the master's bus for a root-key caller (the REST API's webhooks fire
   * `salt/netapi/hook/…` this way, as Salt's fire into the master's event socket). Minion tags are refused.
   */
  fireEvent(caller: Caller, tag: unknown, data: unknown): void {
    if (caller.auth !== 'key')
      throw new PermissionDeniedError('fire_event', `only the root key may fire events, not user ${JSON.stringify(caller.user)} (${caller.auth})`, {
        user: caller.user,
      })
    const problem = callerTagProblem(tag)
    if (problem !== undefined || typeof tag !== 'string') throw new MalformedRequestError('fire_event load', `field 'tag': ${problem ?? 'must be a string'}`)
    if (!isMap(data)) throw new MalformedRequestError('fire_event load', "field 'data' must be a mapping")
    this.#o.bus.fire(tag, data)
  }

  /**
   * A minion's `_auth`: the handshake (its checks and signatures in the crypto pool, the key store here), `salt/auth`,
   * key changes. The reply carries the master's clock, the session's lifetime and, when `context` names it, the
   * publish port to subscribe to.
   */
  async auth(load: Record<string, unknown>, context: AuthContext = {}): Promise<WireValue> {
    const key = typeof load['id'] === 'string' ? load['id'] : ''
    const now = this.#now()
    const accept = (session: SessionKey): AuthAcceptParams => ({
      session,
      now,
      publishPort: context.publishPort ?? 0,
      sessionTtlMs: this.#o.settings.sessionTtlMs ?? 0,
    })
    // The acceptance is made with the checks when the key is expected to be accepted (one task); a key left pending
    // costs the pool no box and no signature.
    const expected = await this.#acceptanceExpected(load)
    const task: WorkerTask = { op: 'auth', request: load, now, ...(expected ? { accept: accept(this.#o.session.current()) } : {}) }
    // A minion's _auth is worth nothing once its sender gave up waiting: under a storm the workers refuse it unrun (shed).
    const checked = (await this.#o.crypto.run(key, task, { shed: true })) as AuthTaskResult
    const outcome = checked.ok ? await this.#settleAuth(key, checked, now, accept) : checked.outcome
    if (outcome.event !== undefined) this.#o.bus.fire(tags.auth, { ...outcome.event })
    await this.#applyChanges(outcome.changes, outcome.rotateSession, 'a key was replaced (open_mode)')
    if (outcome.reply.ret === true && key !== '') this.#connected.add(key)
    // The reply carries the pre-rotation key; answer again under the new one.
    const final = outcome.rotateSession && outcome.reply.ret ? await this.#acceptance(key, checked, accept(this.#o.session.current())) : outcome
    const reply = final.reply
    if (reply.ret === true && key !== '') {
      // An accepted reply means the request was well formed: `pub.box` is the minion's 32-byte box key.
      if (final.sharedKey !== undefined) context.onSharedKey?.(key, (load['pub'] as { box: Uint8Array }).box, final.sharedKey)
      await this.#o.session.handedTo?.(key)
    }
    return reply
  }

  /** Whether an `_auth` will likely be accepted: `auto_accept`, `open_mode`, or its keys are the ones accepted for its id. */
  async #acceptanceExpected(load: Record<string, unknown>): Promise<boolean> {
    if (this.#o.settings.autoAccept || this.#o.settings.openMode) return true
    const id = load['id']
    const pub = load['pub']
    if (typeof id !== 'string' || !isValidMinionId(id) || !isMap(pub)) return false
    const { box, sign } = pub
    if (!(box instanceof Uint8Array) || !(sign instanceof Uint8Array)) return false
    const known = await this.#o.store.acceptedKeys(id).catch(() => undefined)
    return known !== undefined && publicKeysEqual(known, { box, sign })
  }

  /** A checked `_auth` recorded in the key store (Salt's rules), then answered: a refusal, or the acceptance (made now if not with the checks). */
  async #settleAuth(
    key: string,
    checked: Extract<AuthTaskResult, { ok: true }>,
    now: number,
    accept: (session: SessionKey) => AuthAcceptParams,
  ): Promise<AuthOutcome> {
    const r = checked.checked.request
    const { autoAccept, openMode } = this.#o.settings
    let submitted: SubmitResult
    try {
      submitted = await this.#o.store.submit(r.id, { box: r.pub.box, sign: r.pub.sign }, { autoAccept, openMode, signedAt: r.timestamp })
    } catch (error) {
      const refused = pendingLimitOutcome(error, now)
      if (refused === undefined) throw error
      return refused
    }
    if (submitted.state !== 'accepted') return settleAuth(checked.checked, submitted, now)
    const acceptance = checked.acceptance ?? (await this.#acceptance(key, checked, accept(this.#o.session.current())))
    return settleAuth(checked.checked, submitted, now, acceptance)
  }

  /** An acceptance of a checked `_auth` made in the crypto pool (one not made with its checks, or one under a rotated key). */
  async #acceptance(key: string, checked: AuthTaskResult, params: AuthAcceptParams): Promise<AuthAcceptanceMade> {
    if (!checked.ok) throw new RangeError('an acceptance needs a checked _auth request')
    return (await this.#o.crypto.run(key, { op: 'auth-accept', request: checked.checked.request, ...params })) as unknown as AuthAcceptanceMade
  }

  /**
   * A minion checking in after its link reconnected (an empty `_minion_event`): it counts as connected, and learns
   * the session key's generation, so it authenticates again only if the key changed while it was away.
   */
  checkIn(id: string): { gen: number } {
    this.#connected.add(id)
    return { gen: this.#o.session.current().gen }
  }

  /**
   * Stores minion `id`'s return and fires `salt/job/<jid>/ret/<id>` the first time; false for a duplicate.
   * Only for a job this master issued (or holds in its job cache) whose publish could reach `id`, and never
   * for a jid dated beyond `clock_skew` ahead: anything else is a ReturnRefusedError, and nothing is stored.
   */
  minionReturn(id: string, ret: ReturnLoad): Promise<boolean> {
    if (ret.id !== id)
      return Promise.reject(
        new PermissionDeniedError('_return', `the return names minion ${JSON.stringify(ret.id.slice(0, 80))}, but it came from ${JSON.stringify(id)}`),
      )
    if (ret.schedule !== undefined) return this.#scheduleReturn(id, ret)
    // Not async, as every return passes here: a job held in memory is checked without waiting, and the return is
    // stored through one promise of its own.
    const checking = this.#o.issued.check(ret.jid, id)
    return checking === undefined ? this.#storeReturn(id, ret) : checking.then(() => this.#storeReturn(id, ret))
  }

  /** Stores a checked return of minion `id` and fires its event once; false for a duplicate. */
  #storeReturn(id: string, ret: ReturnLoad): Promise<boolean> {
    // Fired once the return is readable from the cache and a crash of the master cannot lose it (the local cache:
    // written), without waiting for the disk's sync; the minion's acknowledgement still waits for that.
    let fired = false
    const fire = (): void => {
      if (fired) return
      fired = true
      this.#o.bus.fire(tags.jobReturn(ret.jid, id), returnEventData(ret))
    }
    return this.#o.jobs.saveReturn(ret.jid, ret.id, ret, { onWritten: fire }).then(
      (stored) => {
        this.#connected.add(id)
        if (stored) fire()
        return stored
      },
      (error: unknown) => {
        throw storeFailure(ret, error)
      },
    )
  }

  /**
   * A minion schedule's return (Salt's `return_job`): a job of its own jid that only this minion ran. Its jid must
   * not be dated beyond `clock_skew` ahead, nor belong to a job of other minions; the job is recorded (target: the
   * minion, user `Schedule`, as Salt's scheduled jobs show), `salt/job/<jid>/new` and the return are fired.
   */
  async #scheduleReturn(id: string, ret: ReturnLoad): Promise<boolean> {
    const another = (): ReturnRefusedError =>
      new ReturnRefusedError(ret.jid, id, 'jid of another job', `jid ${ret.jid} belongs to another job; a schedule's return needs a jid of its own`)
    const known = await this.#o.jobs.getJob(ret.jid)
    if (known === undefined) {
      if ((await this.#o.issued.find(ret.jid, (detail) => new ReturnRefusedError(ret.jid, id, 'future jid', detail))) !== undefined) throw another()
      const load = { jid: ret.jid, fun: ret.fun, arg: ret.fun_args, tgt: id, tgt_type: 'list', user: 'Schedule', schedule: ret.schedule }
      await this.#o.jobs.saveJob(ret.jid, load, [id])
      this.#o.bus.fire(tags.jobNew(ret.jid), { ...load, minions: [id], missing: [] })
    } else if (known.load['schedule'] !== ret.schedule || known.minions.length !== 1 || known.minions[0] !== id) {
      throw another()
    }
    const stored = await saveReturn(this.#o.jobs, ret)
    if (stored) this.#o.bus.fire(tags.jobReturn(ret.jid, id), { ...returnEventData(ret), schedule: ret.schedule })
    return stored
  }

  /** Fires minion `id`'s events on the bus; only `minion_start` and tags under `salt/minion/<id>/`. */
  minionEvents(id: string, events: readonly EventLoad[]): void {
    for (const event of events) {
      const problem = minionTagProblem(id, event.tag)
      if (problem !== undefined) throw new PermissionDeniedError('_minion_event', problem)
    }
    // Size and rate: every event of the batch passes, or none is fired.
    this.#o.minionEventGate?.admit(id, events)
    for (const event of events) this.#o.bus.fire(event.tag, { ...event.data })
  }

  /** Caches minion `id`'s grains for grain targeting. */
  async minionGrains(id: string, grains: Grains): Promise<void> {
    await this.#o.grains.set(id, grains)
  }

  /** Calls `listener` for each key change (accept, reject, delete, …); returns its unsubscribe function. */
  onKeyChange(listener: KeyChangeListener): () => void {
    this.#keyListeners.add(listener)
    return () => this.#keyListeners.delete(listener)
  }

  /** Resolves once every job record handed to the cache has been written. */
  settle(): Promise<void> {
    return this.#o.publisher.settle()
  }

  /** Checks `caller` may do `action`; a refusal is logged, audited (as `audited`, when given) and thrown. */
  #check(caller: Caller, command: string, action: Action, minionsOf: (target: string) => readonly string[] = () => [], audited?: AuditCall): void {
    if (permits(caller, action, minionsOf)) return
    this.#refusalLog.warning(this.#logger, `refused ${command} ${action.fun} for user ${JSON.stringify(caller.user)} (${caller.auth})`, 'ACL refusals')
    const reason = refusal(caller, action)
    if (audited !== undefined)
      this.#o.audit?.record(caller, {
        ...audited,
        result: 'refused',
        reason: `no external_auth entry permits it: ${reason}`,
        ...(action.kind === 'publish' ? { minions: [...action.minions] } : {}),
      })
    throw new PermissionDeniedError(command, reason, { user: caller.user, fun: action.fun })
  }

  #now(): number {
    return this.#o.now?.() ?? Date.now()
  }

  /** Fires `salt/key` for each change, forgets removed minions' grains, tells listeners, rotates the session when told. */
  async #applyChanges(changes: readonly KeyChange[], rotate: boolean, reason: string): Promise<void> {
    for (const change of changes) {
      this.#o.bus.fire(tags.key, { act: change.act, id: change.id, result: true })
      if (change.to === 'accepted') this.#o.issued.accepted(change.id, this.#now())
      else if (change.from === 'accepted') {
        this.#o.issued.removed(change.id)
        this.#connected.delete(change.id)
      }
      if (change.act === 'delete') {
        this.#o.grains.delete(change.id)
        this.#o.syndics.forget(change.id)
      }
      for (const listener of this.#keyListeners) listener(change)
    }
    if (rotate) this.#o.session.rotate(reason)
  }

  /** The master's one jid allocator: every job, runner and wheel call it starts is named here (Salt's format, `unique_jid`'s suffix). */
  #newJid(): string {
    return generateJid(undefined, { unique: this.#o.settings.uniqueJid === true })
  }

  #wheelContext(): WheelContext {
    return {
      store: this.#o.store,
      masterPub: this.#o.masterPub,
      connected: () => this.connectedMinions(),
      ...(this.#o.pkiDir === undefined ? {} : { pkiDir: this.#o.pkiDir }),
      ...(this.#o.configValues === undefined ? {} : { configValues: this.#o.configValues }),
      ...(this.#o.files === undefined ? {} : { files: this.#o.files }),
    }
  }

  /** The connected minions (see {@link RunnerContext.connected}), sorted. */
  connectedMinions(): string[] {
    // A syndic authenticates as a minion does, but it is not one.
    return [...this.#connected].filter((id) => !this.#o.syndics.isSyndic(id)).sort()
  }

  #runnerContext(user: string, jid: string, outer: Caller): RunnerContext {
    // A runner's own publishes and wheel calls are the master's, audited as coming from that runner's caller.
    const caller: Caller = {
      ...masterCaller(user),
      via: { client: 'runner', caller: outer.user, ...(outer.via === undefined ? {} : { from: outer.via.client }) },
    }
    const logger = this.#logger.child('runner')
    return {
      jobs: this.#o.jobs,
      store: this.#o.store,
      bus: this.#o.bus,
      syndics: this.#o.syndics,
      gather: (tgt, fun, arg, options) =>
        gather(
          { publish: (job) => this.publish(caller, job), bus: this.#o.bus, jobs: this.#o.jobs, user, logger, syndicWait: this.#o.settings.syndicWaitMs ?? 0 },
          tgt,
          fun,
          arg,
          options,
        ),
      wheel: async (load) => (await this.wheel(caller, load)).return,
      grains: this.#o.grains,
      select: async (tgt, tgtType) => {
        const known = (await this.#o.publisher.known()).filter((minion) => !this.#o.syndics.isSyndic(minion.id))
        return this.#o.publisher.expected(this.#o.publisher.resolveNodegroups({ tgt, tgt_type: tgtType }), known)
      },
      connected: () => this.connectedMinions(),
      configValues: this.#o.configValues ?? {},
      progress: (data) => this.#o.bus.fire(tags.runProgress(jid), { ...data }),
      timeoutMs: this.#o.settings.timeoutMs,
      gatherJobTimeoutMs: this.#o.settings.gatherJobTimeoutMs,
      version: this.#o.settings.version,
      ...(this.#o.audit === undefined ? {} : { audit: this.#o.audit }),
      ...(this.#o.files === undefined ? {} : { files: this.#o.files }),
      logger,
    }
  }
}
