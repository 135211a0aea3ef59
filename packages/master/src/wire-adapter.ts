import { setImmediate } from 'node:timers/promises'
import { DUPLICATE, minionIdProblem, MinionBoxes, ReplayGuard, StaleRequestError, type PkiStore } from '@brine/crypt'
import {
  CLEAR_COMMANDS,
  FILE_COMMANDS,
  SEALED_COMMANDS,
  type ClearCommand,
  type SealedCommand,
  validateMinionEventLoad,
  validatePreviewTargetLoad,
  validatePublishLoad,
  validateReturnLoad,
  validateSyndicEventLoad,
  validateSyndicReturnLoad,
  type PublishLoad,
} from '@brine/protocol'
import { type RequestContext } from '@brine/transport'
import { LogLimiter, serializeError, silentLogger, type DecodeLimits, type Logger, type WireValue } from '@brine/core'
import { viaOfRequest, type Caller } from './authorize.js'
import { MalformedRequestError, PermissionDeniedError } from '@brine/protocol'
import type { TokenCommands } from './eauth/token-commands.js'
import type { FileServer } from './file-server/file-server.js'
import type { AuthContext, MasterService } from './master-service.js'
import type { SyndicIntake } from './syndic-intake.js'
import type { RequestPool } from './worker-pool.js'

export interface MasterWireAdapterOptions {
  service: MasterService
  /** Takes a syndic's `_syndic_return` and `_syndic_event`. */
  syndics: SyndicIntake
  /** Answers `mk_token`, `get_token` and `rm_token`. */
  tokens: TokenCommands
  /** Accepted minions' box keys, for the sealed channel. */
  store: PkiStore
  /** Computes each minion's shared key off the main thread. */
  crypto: RequestPool
  /** The master's X25519 secret key (minions' boxes are opened and sealed on the main thread). */
  masterBoxSecret: Uint8Array
  /** Applies each sealed request once inside its time window (request_window and the nonce bounds). */
  replayGuard: ReplayGuard
  /** Entry and depth bounds on a sealed request's opened content (`max_frame_entries`, `max_frame_depth`). */
  decodeLimits?: DecodeLimits
  /** The publish port of a transport this master serves, told to a minion authenticating over it. */
  publishPortOf?: (transport: string) => number | undefined
  /** Answers the sealed file commands (`_serve_file`, `_file_recv`, …); without it they are refused. */
  files?: FileServer
  /**
   * The master's clock, ms since the epoch (default Date.now): a sealed answer carries it, and a minion whose
   * clock anchor lags catches up from it (packages/link, sendSealed).
   */
  now?: () => number
  logger?: Logger
}

/** A clear command's handler: the load (a map whose `cmd` named it) and where it came from → the reply. */
type ClearHandler = (load: Record<string, unknown>, context: RequestContext) => Promise<WireValue>

/**
 * A sealed command's handler: the minion the box proved and its opened load → what is added to `{ok: true}` (a map;
 * anything else adds nothing, so a handler may hand on its service's promise as it is, without a frame of its own).
 */
type SealedHandler = (id: string, load: Record<string, unknown>, context: RequestContext) => Promise<unknown>

/** The acknowledgement of a sealed request applied with nothing to add, and of one applied before (its copy). */
const ACKNOWLEDGED = Object.freeze({ ok: true })
const ALREADY_HANDLED = Object.freeze({ ok: true, duplicate: true })

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The operator's requests — a clear load whose command is not a minion's `_auth`: publish, runner, wheel,
 * fire_event and the token commands, from the local client, the REST API or a syndic. The request servers
 * serve them before every waiting minion request (RequestServerOptions.urgent), so a publish never waits behind
 * a fleet's returns. A peer that claims to be one gains a place in that lane only; authorize still decides.
 */
export function isOperatorRequest(request: WireValue): boolean {
  if (!isMap(request) || request['enc'] !== 'clear') return false
  const load = request['load']
  return isMap(load) && typeof load['cmd'] === 'string' && load['cmd'] !== '_auth'
}

/** The credentials and envelope keys of a clear load: never handed on to a wheel function (Salt pops them too). */
/**
 * Minions whose shared box key the master keeps (only accepted minions get one). It must hold the whole fleet:
 * a job to all is answered in about the order it reached them, so a cache smaller than the fleet drops each key
 * just before its minion's next return, and every return then costs an X25519 on a worker (20,000 minions
 * over crypt's default of 16,384: a test.ping's median went from seconds to 32 s). A few hundred bytes each.
 */
const MINION_BOXES_KEPT = 131_072

/** Shared keys per worker task when a restarted master derives its fleet's ahead of their requests. */
export const WARM_BATCH = 128

const NOT_ARGUMENTS = new Set(['cmd', 'key', 'token', 'eauth', 'username', 'password', 'asynchronous', 'origin'])

function withoutCredentials(load: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(load).filter(([name]) => !NOT_ARGUMENTS.has(name)))
}

/**
 * The master's request port, shared by every transport's RequestServer: decodes a request, authorizes
 * it, dispatches it through one table per channel (command → handler) to the {@link MasterService}, the
 * {@link SyndicIntake} or the {@link TokenCommands}, and encodes the reply. Clear requests carry the
 * allow-listed commands (`_auth`; `publish`, `preview_target`, `wheel`, `runner` and `fire_event` behind `authorize`, the
 * runner and wheel ones with `asynchronous: true` answering `{tag, jid}` at once; Salt's eauth token flow
 * `mk_token`, `get_token` and `rm_token`); sealed ones (`{enc: 'box'}`) a minion's `_return`,
 * `_minion_event`, `_grains` and the file server's commands (FileServer), and a syndic's `_syndic_return` and
 * `_syndic_event` (only from a key accepted as a syndic's, docs/security.md), the sender proven by
 * its box, each applied once inside its time window by the {@link ReplayGuard} (a replay is answered
 * "already handled", a request outside the window refused with StaleRequestError): every sealed command,
 * present and future, passes that guard before it is dispatched. Whatever a peer sends, the worst outcome
 * is a typed error reply.
 */
export class MasterWireAdapter {
  readonly #service: MasterService
  readonly #syndics: SyndicIntake
  readonly #tokens: TokenCommands
  readonly #logger: Logger
  /** Each minion's box; the shared key is computed in the pool, opening and sealing happen here. */
  readonly #boxes: MinionBoxes
  /** Refused clear commands are a peer's doing: 10 lines a minute, then a count of the rest. */
  readonly #refusalLog = new LogLimiter()
  /** Refused sealed requests, the same: a minion (or whoever holds its key) decides how many it sends. */
  readonly #sealedLog = new LogLimiter()
  /** Copies of sealed requests already held: each a minion's try that timed out (a master slower than it waits). */
  readonly #copyLog = new LogLimiter()
  readonly #guard: ReplayGuard
  readonly #publishPortOf: (transport: string) => number | undefined
  readonly #files: FileServer | undefined
  readonly #openOptions: { limits?: DecodeLimits }
  readonly #now: () => number
  readonly #store: PkiStore
  readonly #crypto: RequestPool
  /** Each allowed clear command (CLEAR_COMMANDS) → its handler; anything else is refused. */
  readonly #clearHandlers: ReadonlyMap<string, ClearHandler>
  /** Each allowed sealed command (SEALED_COMMANDS) → its handler; anything else is refused. */
  readonly #sealedHandlers: ReadonlyMap<unknown, SealedHandler>

  constructor(options: MasterWireAdapterOptions) {
    this.#service = options.service
    this.#syndics = options.syndics
    this.#tokens = options.tokens
    this.#openOptions = options.decodeLimits === undefined ? {} : { limits: options.decodeLimits }
    this.#logger = options.logger ?? silentLogger
    this.#guard = options.replayGuard
    this.#publishPortOf = options.publishPortOf ?? (() => undefined)
    this.#files = options.files
    this.#now = options.now ?? Date.now
    // A Map, not an object's keys: a peer's `cmd` of `constructor` or `__proto__` must find nothing.
    this.#clearHandlers = new Map(Object.entries(this.#clearTable()))
    this.#sealedHandlers = new Map(Object.entries(this.#sealedTable()))
    const { store, crypto } = options
    this.#store = store
    this.#crypto = crypto
    this.#boxes = new MinionBoxes(options.masterBoxSecret, async (id) => (await store.acceptedKeys(id))?.box, {
      maxEntries: MINION_BOXES_KEPT,
      lookupNow: (id) => store.acceptedKeysNow(id)?.box,
      deriveSharedKey: async (id, boxKey) => (await crypto.run(id, { op: 'box-shared-key', boxKey })) as Uint8Array,
    })
    // A minion whose key left `accepted` (rejected, deleted) must not reuse the shared key it had.
    this.#service.onKeyChange((change) => {
      if (change.from === 'accepted' || change.act === 'delete') this.#boxes.forget(change.id)
    })
  }

  /**
   * Derives the shared keys of minions about to come back (a restarted master's session key holders) ahead of their
   * requests, `WARM_BATCH` to a worker task: their first check-in or return then waits for its batch instead of
   * taking a hop to a worker each. Ids no longer accepted are left out; a failure leaves their requests to derive
   * as before. Resolves once every batch is done.
   *
   * Batches the pool runs on this thread (fewer than a herd of tasks: no worker thread started) run between the
   * event loop's turns, so the fleet's connections and check-ins are read while the rest is derived.
   */
  async warmBoxes(ids: readonly string[]): Promise<void> {
    const batches: Promise<void>[] = []
    for (let first = 0; first < ids.length; first += WARM_BATCH) {
      if (first > 0) await setImmediate()
      const looked = await Promise.all(
        ids.slice(first, first + WARM_BATCH).map(async (id) => ({
          id,
          box: await this.#store.acceptedKeys(id).then(
            (keys) => keys?.box,
            () => undefined,
          ),
        })),
      )
      const entries = looked.filter((entry): entry is { id: string; box: Uint8Array } => entry.box !== undefined)
      if (entries.length === 0) continue
      const keys = this.#crypto.run(`warm:${first}`, { op: 'box-shared-keys', boxKeys: entries.map((entry) => entry.box) }) as Promise<(Uint8Array | null)[]>
      entries.forEach(({ id, box }, index) =>
        this.#boxes.hold(
          id,
          box,
          keys.then((derived) => derived[index] ?? undefined),
        ),
      )
      batches.push(
        keys.then(
          () => undefined,
          () => undefined,
        ),
      )
    }
    await Promise.all(batches)
  }

  /** An accepted `_auth`'s shared key, kept for the minion's sealed requests (used only while that box key stays the accepted one). */
  readonly #holdSharedKey: NonNullable<AuthContext['onSharedKey']> = (id, boxPublicKey, sharedKey) =>
    this.#boxes.hold(id, boxPublicKey, Promise.resolve(sharedKey))

  /** The transport's RequestHandler. */
  readonly handle = async (request: WireValue, context: RequestContext): Promise<WireValue> => {
    if (!isMap(request)) throw new MalformedRequestError('request', 'not a map; expected {enc, load} or a sealed {enc: "box", …}')
    switch (request['enc']) {
      case 'clear':
        return this.#clear(request['load'], context)
      case 'box':
        return this.#box(request, context)
      default:
        throw new MalformedRequestError('request', `enc must be 'clear' or 'box', got ${JSON.stringify(String(request['enc'])).slice(0, 40)}`)
    }
  }

  async #clear(load: unknown, context: RequestContext): Promise<WireValue> {
    if (!isMap(load)) throw new MalformedRequestError('clear request', 'load is not a map')
    const cmd = load['cmd']
    if (typeof cmd !== 'string') throw new MalformedRequestError('clear request', 'load.cmd is not a string')
    const handler = this.#clearHandlers.get(cmd)
    if (handler !== undefined) return handler(load, context)
    this.#refusalLog.warning(
      this.#logger,
      `refused clear command ${JSON.stringify(cmd.slice(0, 80))} from ${context.transport} peer ${context.peer}`,
      'refused clear commands',
    )
    throw new PermissionDeniedError(cmd, cmd.startsWith('_') ? 'not allowed in the clear' : `not a clear command (allowed: ${CLEAR_COMMANDS.join(', ')})`)
  }

  /** The clear commands: `_auth` answers any peer; the others pass the one authorize step first (tokens prove themselves). */
  #clearTable(): Record<ClearCommand, ClearHandler> {
    const service = this.#service
    const tokens = this.#tokens
    return {
      _auth: async (load, context) => {
        const publishPort = this.#publishPortOf(context.transport)
        const reply = await service.auth(
          load,
          publishPort === undefined ? { onSharedKey: this.#holdSharedKey } : { publishPort, onSharedKey: this.#holdSharedKey },
        )
        if ((reply as { ret?: unknown } | null)?.ret === true) context.authenticated?.()
        return reply
      },
      publish: async (load, context) => {
        const caller = await this.#caller(load, context)
        const {
          cmd: _cmd,
          key: _key,
          token: _token,
          eauth: _eauth,
          username: _username,
          password: _password,
          origin: _origin,
          ...job
        } = validatePublishLoad(load) as PublishLoad & { origin?: unknown }
        return (await service.publish(caller, job)) as unknown as WireValue
      },
      preview_target: async (load, context) => {
        const caller = await this.#caller(load, context)
        const { tgt, tgt_type, fun } = validatePreviewTargetLoad(load)
        return (await service.previewTarget(caller, { tgt, tgt_type, fun })) as unknown as WireValue
      },
      wheel: async (load, context) => {
        const caller = await this.#caller(load, context)
        const call = withoutCredentials(load)
        return (load['asynchronous'] === true ? service.wheelAsync(caller, call) : await service.wheel(caller, call)) as unknown as WireValue
      },
      runner: async (load, context) => {
        const caller = await this.#caller(load, context)
        const call = { fun: load['fun'], arg: load['arg'], kwarg: load['kwarg'] }
        return (load['asynchronous'] === true ? service.runnerAsync(caller, call) : await service.runner(caller, call)) as unknown as WireValue
      },
      mk_token: async (load, context) => {
        const token = await tokens.mkToken(load, this.#loginAddress(load, context))
        context.authenticated?.()
        return token as unknown as WireValue
      },
      get_token: async (load) => (await tokens.getToken(load['token'])) as WireValue,
      rm_token: async (load) => ({ removed: await tokens.rmToken(load['token']) }),
      fire_event: async (load, context) => {
        const caller = await service.authorize(load, context.address)
        context.authenticated?.()
        service.fireEvent(caller, load['tag'], load['data'])
        return { fired: true }
      },
    }
  }

  /**
   * Where a login came from, for the per-address limit: the peer's address, or the `client_address` a root-key
   * holder (the REST API, logging in its HTTP callers) vouches for, so one API is not one address to the limit.
   */
  #loginAddress(load: Record<string, unknown>, context: RequestContext): string | undefined {
    const claimed = load['client_address']
    if (typeof claimed === 'string' && claimed !== '' && claimed.length <= 100 && this.#service.holdsRootKey(load['key'])) return claimed
    return context.address
  }

  /**
   * The one authorize step (the peer's address counts toward the login limits), and where the request came from
   * (for the audit log). A caller that passed it has proved itself, so its connection is never evicted at a cap.
   */
  async #caller(load: Record<string, unknown>, context: RequestContext): Promise<Caller> {
    const caller = await this.#service.authorize(load, context.address)
    context.authenticated?.()
    return { ...caller, via: viaOfRequest(load['origin'], context.transport, context.peer) }
  }

  async #box(request: Record<string, unknown>, context: RequestContext): Promise<WireValue> {
    const id = request['id']
    const again = this.#answerCopy(id, request['nonce'], request['box'])
    if (again !== undefined) return again
    // A known box's id passed this check when the box was made.
    if (typeof id !== 'string' || !this.#boxes.knows(id)) {
      const problem = minionIdProblem(id)
      if (problem !== undefined) throw new MalformedRequestError('sealed request', `id ${problem}`)
    }
    let opened: Awaited<ReturnType<MinionBoxes['open']>>
    try {
      // A known minion's key is told without waiting (the hot path of every return); otherwise it is looked up.
      opened = this.#boxes.openNow(request, this.#openOptions) ?? (await this.#boxes.open(request, this.#openOptions))
    } catch (error) {
      // Over max_frame_entries/max_frame_depth once unsealed: an answer the sender can read, naming the bound.
      if ((error as Error)?.name !== 'FrameLimitError' || typeof id !== 'string') throw error
      this.#refusalLog.warning(
        this.#logger,
        `sealed request from minion ${JSON.stringify(id)} refused: ${(error as Error).message}`,
        'sealed requests over the decode bounds',
      )
      return (await this.#boxes.seal(id, { ok: false, error: serializeError(error) }, this.#now())) as unknown as WireValue
    }
    // Sealed by an accepted minion's key: its connection is never evicted to make room at a cap.
    context.authenticated?.()
    let reply: Record<string, unknown>
    try {
      const outcome = await this.#guard.admit(opened.id, opened.nonce, opened.timestamp, () => this.#sealed(opened.id, opened.load, context))
      // A duplicate (the same bytes again: a transport retry, or a replay) was handled the first time; nothing is
      // applied twice, and what the first answer added (a syndic's refusals) is not repeated.
      reply = outcome === DUPLICATE ? ALREADY_HANDLED : isMap(outcome) ? { ok: true, ...outcome } : ACKNOWLEDGED
    } catch (error) {
      // A stale request is routine (a minion's clock anchor aged, or a recording replayed): it re-seals; not worth a warning each.
      const line = `sealed request from minion ${JSON.stringify(opened.id)} refused: ${String((error as Error).message ?? error)}`
      if (error instanceof StaleRequestError) this.#logger.debug(line)
      else this.#sealedLog.warning(this.#logger, line, 'refused sealed requests')
      reply = { ok: false, error: serializeError(error) }
    }
    // Sealed with the key that sealed the request: only its holder can read the answer. Stamped with the master's clock.
    return opened.box.seal(reply, this.#now()) as unknown as WireValue
  }

  /**
   * A copy of a sealed request this master holds already (a try sent again after the first was taken in, or a replay)
   * is answered as the first was, by the replay guard, before anything is opened: a minion whose try of a 64 MB return
   * timed out costs the master no second decipher and decode. The answer is sealed to the minion; nothing is applied.
   * Undefined for anything else, which is opened and checked as always.
   */
  #answerCopy(id: unknown, nonce: unknown, box: unknown): Promise<WireValue> | undefined {
    if (typeof id !== 'string' || !(nonce instanceof Uint8Array)) return undefined
    const first = this.#guard.seen(id, nonce)
    return first === undefined ? undefined : this.#sealCopyAnswer(id, first, box instanceof Uint8Array ? box.length : 0)
  }

  async #sealCopyAnswer(id: string, first: Promise<unknown>, bytes: number): Promise<WireValue> {
    let reply: Record<string, unknown>
    try {
      await first
      reply = { ok: true, duplicate: true }
    } catch (error) {
      reply = { ok: false, error: serializeError(error) }
    }
    this.#copyLog.log(
      this.#logger,
      'info',
      `a sealed request from minion ${JSON.stringify(id)} (${bytes} bytes) came again (its try timed out, or a replay): answered as already handled, not opened again`,
      'sealed requests that came again',
    )
    return (await this.#boxes.seal(id, reply, this.#now())) as unknown as WireValue
  }

  /**
   * Dispatches one opened load; a map it resolves to is added to the `{ok: true}` acknowledgement. Not async: the
   * handler's promise is handed on as it is, and what it throws before that is the guard's rejection (ReplayGuard.admit).
   */
  #sealed(id: string, load: WireValue, context: RequestContext): Promise<unknown> {
    if (!isMap(load)) throw new MalformedRequestError('sealed load', 'not a map')
    if (load['id'] !== id)
      throw new PermissionDeniedError(
        String(load['cmd']),
        `the load names minion ${JSON.stringify(String(load['id']).slice(0, 80))}, but it was sealed by ${JSON.stringify(id)}`,
      )
    const handler = this.#sealedHandlers.get(load['cmd'])
    if (handler === undefined)
      throw new PermissionDeniedError(String(load['cmd']).slice(0, 80), `not a sealed command (allowed: ${SEALED_COMMANDS.join(', ')})`)
    return handler(id, load, context)
  }

  /** The sealed commands: a minion's, the file server's, and a syndic's (only from a key accepted as a syndic's). */
  #sealedTable(): Record<SealedCommand, SealedHandler> {
    const service = this.#service
    const syndics = this.#syndics
    const fileHandlers = Object.fromEntries(
      FILE_COMMANDS.map((cmd): [string, SealedHandler] => [
        cmd,
        async (id, load) => {
          if (this.#files === undefined) throw new PermissionDeniedError(cmd, 'this master serves no files')
          return this.#files.handle(id, cmd, load)
        },
      ]),
    ) as Record<(typeof FILE_COMMANDS)[number], SealedHandler>
    return {
      ...fileHandlers,
      // minionReturn's boolean (stored or a duplicate) is not a map: it adds nothing to the acknowledgement.
      _return: (id, load) => service.minionReturn(id, validateReturnLoad(load)),
      _minion_event: async (id, load, context) => {
        const { events } = validateMinionEventLoad(load)
        service.minionEvents(id, events)
        if (events.length > 0) return undefined
        // An empty batch is a minion checking in (its link reconnected): is its session key still the master's, and the publish port?
        const publishPort = this.#publishPortOf(context.transport)
        return { ...service.checkIn(id), ...(publishPort === undefined ? {} : { publish_port: publishPort }) }
      },
      _grains: async (id, load) => {
        const grains = load['grains']
        if (!isMap(grains)) throw new MalformedRequestError('_grains load', "field 'grains' must be a mapping")
        await service.minionGrains(id, grains)
        return undefined
      },
      _syndic_return: async (id, load) => {
        // Before the load is looked at: a key that is not a syndic's costs no validation of what it claims.
        await syndics.requireSyndic(id, '_syndic_return')
        const refused = await syndics.syndicReturn(id, validateSyndicReturnLoad(load))
        return refused.length === 0 ? undefined : { refused }
      },
      _syndic_event: async (id, load) => {
        await syndics.requireSyndic(id, '_syndic_event')
        await syndics.syndicEvents(id, validateSyndicEventLoad(load).events)
        return undefined
      },
    }
  }
}
