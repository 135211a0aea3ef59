import type { TokenData } from '@brine/protocol'
import { ClearRequester, type MasterClientOptions } from './clear-request.js'
import { MasterRequestError } from './errors.js'
import { registerErrors } from '@brine/core'

/** Salt's token data, as `mk_token` and `get_token` answer it (`start`, `expire`: epoch seconds), with the ACL the master enforces. */
export interface EauthToken extends TokenData {
  /** The user's ACL entries (Salt's `fill_auth_list` of `external_auth`). */
  perms: unknown[]
}

/** An eauth login: a backend and a user's password, and optionally the token lifetime asked for (seconds). */
export interface EauthLogin {
  eauth: string
  username: string
  password: string
  /** Honoured when the master's `token_expire_user_override` allows this user. */
  token_expire?: number
  /**
   * Brine: the address the login came from when a program logs users in for others (the REST API): the
   * master's per-address login limit (`eauth_rate_limit_address`) keys on it instead of the program's own
   * address. Believed only with the root key, which this client sends unless given other credentials.
   */
  client_address?: string
}

/** A refused login, or an answer that is not a token. */
export class EauthError extends MasterRequestError {
  override name = 'EauthError'
}

const isToken = (value: unknown): value is EauthToken =>
  typeof value === 'object' && value !== null && typeof (value as EauthToken).token === 'string' && typeof (value as EauthToken).expire === 'number'

/**
 * Salt's eauth token flow against the local master (salt.auth.Resolver): `mkToken` turns a login into a
 * token, `getToken` checks one, `rmToken` revokes one; `fireEvent` puts an event on the master's bus
 * with the root key (the REST API's webhooks).
 *
 * ```ts
 * const eauth = new EauthClient({ configDir: '/etc/brine' })
 * const { token, expire } = await eauth.mkToken({ eauth: 'file', username: 'alice', password: 'wonder' })
 * const local = new LocalClient({ configDir: '/etc/brine', credentials: { token } })
 * ```
 */
export class EauthClient implements AsyncDisposable {
  readonly #requester: ClearRequester

  constructor(options: MasterClientOptions = {}) {
    this.#requester = new ClearRequester(options)
  }

  /** A new token for `login`; EauthError (remoteName EauthAuthenticationError) when it does not authenticate. */
  async mkToken(login: EauthLogin, options: { signal?: AbortSignal } = {}): Promise<EauthToken> {
    const reply = await this.#requester.request({ cmd: 'mk_token', ...login }, { ...options, tries: 1 }, EauthError)
    if (!isToken(reply)) throw new EauthError(`the master answered mk_token with ${JSON.stringify(reply)?.slice(0, 120)}, not a token`)
    return reply
  }

  /** The live token's data, or undefined when it is unknown, expired or revoked. */
  async getToken(token: string, options: { signal?: AbortSignal } = {}): Promise<EauthToken | undefined> {
    const reply = await this.#requester.request({ cmd: 'get_token', token }, options, EauthError)
    return isToken(reply) ? reply : undefined
  }

  /** Revokes `token`; true when it was live. */
  async rmToken(token: string, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    const reply = (await this.#requester.request({ cmd: 'rm_token', token }, options, EauthError)) as { removed?: unknown } | null
    return reply?.removed === true
  }

  /** Fires `tag` with `data` on the master's bus (root key only). */
  async fireEvent(tag: string, data: Record<string, unknown>, options: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#requester.request({ cmd: 'fire_event', tag, data }, options)
  }

  close(): Promise<void> {
    return this.#requester.close()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

registerErrors({ EauthError })
