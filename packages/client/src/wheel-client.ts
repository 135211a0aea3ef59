import { ClearRequester, type MasterClientOptions } from './clear-request.js'
import { WheelError } from './errors.js'

/**
 * Salt's WheelClient: the master's key management, the path `brine-key` uses. Functions:
 * `key.list_all`, `key.accept`, `key.reject`, `key.delete` (each `{match}` a glob or a list of ids,
 * plus `include_rejected`/`include_denied`/`include_accepted`), `key.accept_all`, `key.reject_all`,
 * `key.delete_all`, `key.finger` (`{match}`), `key.finger_master`, and `key.gen_accept`
 * (`{id_, force?}` → `{pub, priv}`: a new minion key pair, its public key already accepted).
 *
 * ```ts
 * const wheel = new WheelClient({ configDir: '/etc/brine' })
 * await wheel.cmd('key.accept', { match: 'web*' })   // { minions: ['web1', 'web2'] }
 * const { pub, priv } = await wheel.cmd('key.gen_accept', { id_: 'db9' }) as { pub: string; priv: string }
 * await wheel.close()
 * ```
 */
export class WheelClient implements AsyncDisposable {
  readonly #requester: ClearRequester

  constructor(options: MasterClientOptions = {}) {
    this.#requester = new ClearRequester(options)
  }

  /** Runs wheel function `fun` with keyword arguments `kwarg` and returns Salt's return. */
  async cmd(fun: string, kwarg: Record<string, unknown> = {}, options: { signal?: AbortSignal } = {}): Promise<unknown> {
    const reply = await this.#requester.request({ ...kwarg, cmd: 'wheel', fun }, options, WheelError)
    if (typeof reply !== 'object' || reply === null || !('return' in reply)) {
      throw new WheelError(`the master answered wheel ${fun} with ${JSON.stringify(reply)?.slice(0, 200)}, not {return}`, { fun })
    }
    return (reply as { return: unknown }).return
  }

  close(): Promise<void> {
    return this.#requester.close()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
