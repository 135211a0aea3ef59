import { ClearRequester, type ClientCredentials, type MasterClientOptions, type RequestOrigin } from './clear-request.js'
import { WheelError } from './errors.js'
import { checkAsyncReply, type AsyncResult } from './runner-client.js'

/** What a wheel call answered: Salt's return, and the jid and tag of its `salt/wheel/<jid>/…` events. */
export interface WheelResult {
  jid: string
  tag: string
  user: string
  return: unknown
  success: boolean
}

export interface WheelCallOptions {
  signal?: AbortSignal
  /** Run as this eauth user (their ACL applies) instead of with the client's own credentials. */
  credentials?: ClientCredentials
  /** Where this call comes from (the master's audit log), instead of the client's `origin`. */
  origin?: RequestOrigin
}

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
  async cmd(fun: string, kwarg: Record<string, unknown> = {}, options: WheelCallOptions = {}): Promise<unknown> {
    return (await this.cmdFull(fun, kwarg, options)).return
  }

  /** Runs wheel function `fun` and returns its return with its jid, tag, user and success. */
  async cmdFull(fun: string, kwarg: Record<string, unknown> = {}, options: WheelCallOptions = {}): Promise<WheelResult> {
    const reply = await this.#requester.request({ ...kwarg, cmd: 'wheel', fun }, options, WheelError)
    if (typeof reply !== 'object' || reply === null || !('return' in reply)) {
      throw new WheelError(`the master answered wheel ${fun} with ${JSON.stringify(reply)?.slice(0, 200)}, not {return}`, { fun })
    }
    const value = reply as Partial<WheelResult>
    return {
      jid: String(value.jid ?? ''),
      tag: String(value.tag ?? ''),
      user: String(value.user ?? ''),
      return: value.return,
      success: value.success !== false,
    }
  }

  /** Salt's wheel_async: answers `{tag, jid}` once the master has checked the call; the return comes as `salt/wheel/<jid>/ret`. */
  async cmdAsync(fun: string, kwarg: Record<string, unknown> = {}, options: WheelCallOptions = {}): Promise<AsyncResult> {
    const reply = await this.#requester.request({ ...kwarg, cmd: 'wheel', fun, asynchronous: true }, options, WheelError)
    return checkAsyncReply(reply, `wheel ${fun}`, WheelError)
  }

  close(): Promise<void> {
    return this.#requester.close()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
