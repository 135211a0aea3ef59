import { constantTimeEqual } from '@brine/crypt'
import type { Permissions } from './acl.js'
import type { ExternalAuth } from './eauth/external-auth.js'
import { PermissionDeniedError } from '@brine/protocol'

/**
 * Who is asking, once {@link Authorizer.authorize} has checked their credentials. Every publish,
 * runner and wheel call of the {@link MasterService} takes one and checks it against the call
 * (`permits` in acl.ts).
 */
export interface Caller {
  /** Salt's user: recorded with the job (`root`, `sudo_alice`), the eauth user name, or the runner's caller. */
  readonly user: string
  /**
   * How the caller proved who they are: `key`, the master's root key; `master`, the master itself (a
   * runner publishing for its caller). `token` and `eauth` are for external auth (Salt's `external_auth`);
   * `reactor` and `schedule`, the master's reactor (as `reactor_user`) and its schedule.
   */
  readonly auth: 'key' | 'master' | 'token' | 'eauth' | 'reactor' | 'schedule'
  /** The eauth backend (`file`, `pam`, …) when `auth` is `token` or `eauth`. */
  readonly eauth?: string
  /** What the caller may do (see {@link Permissions}). */
  readonly permissions: Permissions
  /** Where the call came from, for the audit log: `client` (cli, api, syndic, reactor, schedule, runner) and what is known of its address. */
  readonly via?: CallerVia
}

/** Where a call came from. `address` is what the client claims (an API's HTTP client); `peer` what the wire saw. */
export interface CallerVia {
  readonly client: string
  readonly [detail: string]: string | undefined
}

/** The clients a request may say it came from (its `origin` field); anything else is recorded as `unknown`. */
const ORIGIN_CLIENTS = new Set(['cli', 'api', 'syndic', 'library'])

/** `via` for a clear request: the client and address its `origin` field claims, and the peer the transport saw. */
export function viaOfRequest(origin: unknown, transport: string, peer: string): CallerVia {
  const claimed = typeof origin === 'object' && origin !== null ? (origin as Record<string, unknown>) : {}
  const client = typeof claimed['client'] === 'string' && ORIGIN_CLIENTS.has(claimed['client']) ? claimed['client'] : 'unknown'
  const address = typeof claimed['address'] === 'string' ? claimed['address'].slice(0, 100) : undefined
  return { client, transport, peer, ...(address === undefined ? {} : { address }) }
}

export type { Permissions } from './acl.js'

/** The credential fields a clear load may carry (Salt's names). */
export interface Credentials {
  cmd?: unknown
  key?: unknown
  user?: unknown
  token?: unknown
  eauth?: unknown
  username?: unknown
  password?: unknown
}

/** The caller the root key makes: every permission, under the user name the load gives (Salt's `sudo_<user>`). */
export function rootCaller(user = 'root'): Caller {
  return { user: user === '' ? 'root' : user, auth: 'key', permissions: 'all' }
}

/** The master acting for `user` (a runner's own publishes: Salt's runners publish with the master's key). */
export function masterCaller(user: string): Caller {
  return { user, auth: 'master', permissions: 'all' }
}

export interface AuthorizerOptions {
  /** The master's root key (`<cachedir>/.root_key`). */
  rootKey: string
  /** `external_auth` and its tokens; without it eauth credentials and tokens are refused. */
  externalAuth?: ExternalAuth
}

/**
 * The one authorize step: turns the credentials a request carries into a {@link Caller}, or refuses.
 * The root key makes a caller with every permission (PermissionDeniedError when wrong); a `token`
 * (made by `mk_token`) or `eauth` + `username` + `password` make the eauth user's caller with Salt's
 * ACL for them (TokenAuthenticationError / EauthAuthenticationError when they do not authenticate).
 */
export class Authorizer {
  readonly #rootKey: string
  readonly #externalAuth: ExternalAuth | undefined

  constructor(options: AuthorizerOptions) {
    this.#rootKey = options.rootKey
    this.#externalAuth = options.externalAuth
  }

  /** True for the master's root key: a local program the master trusts (the REST API vouching for its callers' addresses). */
  holdsRootKey(key: unknown): boolean {
    return typeof key === 'string' && constantTimeEqual(key, this.#rootKey)
  }

  /** The master's external auth (tokens, backends), when configured. */
  get externalAuth(): ExternalAuth | undefined {
    return this.#externalAuth
  }

  /** `from`: the client's address, for the per-address login limit (eauth credentials only). */
  async authorize(request: Credentials, from?: string): Promise<Caller> {
    const command = typeof request.cmd === 'string' ? request.cmd : '(no cmd)'
    const claimed = typeof request.user === 'string' ? request.user : 'root'
    if (request.key !== undefined) {
      if (typeof request.key === 'string' && constantTimeEqual(request.key, this.#rootKey)) return rootCaller(claimed)
      throw new PermissionDeniedError(command, 'the root key is missing or wrong', { user: claimed })
    }
    if (request.token !== undefined || request.eauth !== undefined) {
      const external = this.#externalAuth
      if (external === undefined || !external.configured) {
        const user = typeof request.username === 'string' ? request.username : claimed
        throw new PermissionDeniedError(command, 'external auth (token or eauth) is not configured on this master (external_auth)', { user })
      }
      const identity = request.token !== undefined ? await external.identityOfToken(request.token) : await external.authenticate(request, from)
      return { user: identity.name, auth: request.token !== undefined ? 'token' : 'eauth', eauth: identity.eauth, permissions: identity.perms }
    }
    throw new PermissionDeniedError(command, 'the root key is missing or wrong (no credentials: key, token or eauth)', { user: claimed })
  }
}
