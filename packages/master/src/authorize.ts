import { constantTimeEqual } from '@brine/crypt'
import type { AclEntry } from './acl.js'
import { PermissionDeniedError } from './errors.js'

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
   * runner publishing for its caller). `token` and `eauth` are for external auth (Salt's `external_auth`).
   */
  readonly auth: 'key' | 'master' | 'token' | 'eauth'
  /** The eauth backend (`file`, `pam`, …) when `auth` is `token` or `eauth`. */
  readonly eauth?: string
  /**
   * What the caller may do: `all` (root key, the master), or Salt's ACL entries — the sum of the
   * user's, `*`'s and their groups' entries under `external_auth`.
   */
  readonly permissions: Permissions
}

export type Permissions = 'all' | readonly AclEntry[]

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
}

/**
 * The one authorize step: turns the credentials a request carries into a {@link Caller}, or refuses
 * with a PermissionDeniedError naming the command. Today the credential is the root key; eauth
 * tokens and credentials (`token`, `eauth` + `username` + `password`) are refused until
 * `external_auth` is configured.
 */
export class Authorizer {
  readonly #rootKey: string

  constructor(options: AuthorizerOptions) {
    this.#rootKey = options.rootKey
  }

  authorize(request: Credentials): Caller {
    const command = typeof request.cmd === 'string' ? request.cmd : '(no cmd)'
    const claimed = typeof request.user === 'string' ? request.user : 'root'
    if (request.key !== undefined) {
      if (typeof request.key === 'string' && constantTimeEqual(request.key, this.#rootKey)) return rootCaller(claimed)
      throw new PermissionDeniedError(command, 'the root key is missing or wrong', { user: claimed })
    }
    if (request.token !== undefined || request.eauth !== undefined) {
      const user = typeof request.username === 'string' ? request.username : claimed
      throw new PermissionDeniedError(command, 'external auth (token or eauth) is not configured on this master (external_auth)', { user })
    }
    throw new PermissionDeniedError(command, 'the root key is missing or wrong (no credentials: key, token or eauth)', { user: claimed })
  }
}
