import { minionIdProblem, MinionBoxes, type PkiStore } from '@brine/crypt'
import {
  CLEAR_COMMANDS,
  SEALED_COMMANDS,
  validateMinionEventLoad,
  validatePublishLoad,
  validateReturnLoad,
  validateSyndicEventLoad,
  validateSyndicReturnLoad,
} from '@brine/common'
import { serializeError, silentLogger, type Logger, type RequestContext, type WireValue } from '@brine/transport'
import { MalformedRequestError, PermissionDeniedError } from './errors.js'
import type { MasterService } from './master-service.js'
import type { RequestPool } from './worker-pool.js'

export interface MasterWireAdapterOptions {
  service: MasterService
  /** Accepted minions' box keys, for the sealed channel. */
  store: PkiStore
  /** Computes each minion's shared key off the main thread. */
  crypto: RequestPool
  /** The master's X25519 secret key (minions' boxes are opened and sealed on the main thread). */
  masterBoxSecret: Uint8Array
  logger?: Logger
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The master's request port, shared by every transport's RequestServer: decodes a request, authorizes
 * it, dispatches it to the {@link MasterService} and encodes the reply. Clear requests carry the
 * allow-listed commands (`_auth`, and `publish`, `wheel`, `runner` behind `authorize`); sealed ones
 * (`{enc: 'box'}`) a minion's `_return`, `_minion_event` and `_grains`, and a syndic's `_syndic_return` and
 * `_syndic_event`, the sender proven by its box.
 * Whatever a peer sends, the worst outcome is a typed error reply.
 */
export class MasterWireAdapter {
  readonly #service: MasterService
  readonly #logger: Logger
  /** Each minion's box; the shared key is computed in the pool, opening and sealing happen here. */
  readonly #boxes: MinionBoxes

  constructor(options: MasterWireAdapterOptions) {
    this.#service = options.service
    this.#logger = options.logger ?? silentLogger
    const { store, crypto } = options
    this.#boxes = new MinionBoxes(options.masterBoxSecret, async (id) => (await store.acceptedKeys(id))?.box, {
      deriveSharedKey: async (id, boxKey) => (await crypto.run(id, { op: 'box-shared-key', boxKey })) as Uint8Array,
    })
    // A minion whose key left `accepted` (rejected, deleted) must not reuse the shared key it had.
    this.#service.onKeyChange((change) => {
      if (change.from === 'accepted' || change.act === 'delete') this.#boxes.forget(change.id)
    })
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
    if (typeof cmd !== 'string') throw new MalformedRequestError('clear request', 'load.cmd is not a string')
    const service = this.#service
    switch (cmd) {
      case '_auth':
        return service.auth(load)
      case 'publish': {
        const caller = service.authorize(load)
        const { cmd: _cmd, key: _key, ...job } = validatePublishLoad(load)
        return (await service.publish(caller, job)) as unknown as WireValue
      }
      case 'wheel': {
        const caller = service.authorize(load)
        const { cmd: _cmd, key: _key, ...call } = load
        return { return: (await service.wheel(caller, call)) as WireValue }
      }
      case 'runner': {
        const caller = service.authorize(load)
        return (await service.runner(caller, { fun: load['fun'], arg: load['arg'], kwarg: load['kwarg'] })) as unknown as WireValue
      }
      default:
        this.#logger.warning(`refused clear command ${JSON.stringify(cmd.slice(0, 80))} from ${context.transport} peer ${context.peer}`)
        throw new PermissionDeniedError(cmd, cmd.startsWith('_') ? 'not allowed in the clear' : `not a clear command (allowed: ${CLEAR_COMMANDS.join(', ')})`)
    }
  }

  async #box(request: Record<string, unknown>): Promise<WireValue> {
    const id = request['id']
    const problem = minionIdProblem(id)
    if (problem !== undefined) throw new MalformedRequestError('sealed request', `id ${problem}`)
    const opened = await this.#boxes.open(request)
    let reply: Record<string, unknown>
    try {
      reply = { ok: true, ...(await this.#sealed(opened.id, opened.load)) }
    } catch (error) {
      this.#logger.warning(`sealed request from minion ${JSON.stringify(opened.id)} refused: ${String((error as Error).message ?? error)}`)
      reply = { ok: false, error: serializeError(error) }
    }
    return (await this.#boxes.seal(opened.id, reply)) as unknown as WireValue
  }

  /** Dispatches one opened load; what it returns is added to the `{ok: true}` acknowledgement. */
  async #sealed(id: string, load: WireValue): Promise<Record<string, unknown> | undefined> {
    if (!isMap(load)) throw new MalformedRequestError('sealed load', 'not a map')
    if (load['id'] !== id) throw new PermissionDeniedError(String(load['cmd']), `the load names minion ${JSON.stringify(String(load['id']).slice(0, 80))}, but it was sealed by ${JSON.stringify(id)}`)
    switch (load['cmd']) {
      case '_return':
        await this.#service.minionReturn(id, validateReturnLoad(load))
        return
      case '_minion_event':
        this.#service.minionEvents(id, validateMinionEventLoad(load).events)
        return
      case '_grains': {
        const grains = load['grains']
        if (!isMap(grains)) throw new MalformedRequestError('_grains load', "field 'grains' must be a mapping")
        await this.#service.minionGrains(id, grains)
        return
      }
      case '_syndic_return': {
        const refused = await this.#service.syndicReturn(id, validateSyndicReturnLoad(load))
        return refused.length === 0 ? undefined : { refused }
      }
      case '_syndic_event':
        this.#service.syndicEvents(id, validateSyndicEventLoad(load).events)
        return
      default:
        throw new PermissionDeniedError(String(load['cmd']).slice(0, 80), `not a sealed command (allowed: ${SEALED_COMMANDS.join(', ')})`)
    }
  }
}
