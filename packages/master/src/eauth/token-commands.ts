import { PermissionDeniedError, TokenAuthenticationError } from '@brine/protocol'
import type { ExternalAuth, MadeToken } from './external-auth.js'

/**
 * Salt's eauth token flow (`mk_token`, `get_token`, `rm_token`): a login turned into a token, a token
 * checked, a token revoked. Without `external_auth` configured every one of them is refused.
 */
export class TokenCommands {
  readonly #externalAuth: ExternalAuth | undefined

  constructor(externalAuth: ExternalAuth | undefined) {
    this.#externalAuth = externalAuth
  }

  /**
   * Salt's `mk_token`: checks eauth credentials and stores a token for that user (`token_expire`, or
   * the `token_expire` the load asks for when `token_expire_user_override` allows it). Answers Salt's
   * token data and `perms`, the ACL the master enforces for the token.
   */
  async mkToken(load: Record<string, unknown>, from?: string): Promise<MadeToken> {
    return this.#external('mk_token').mkToken(load, from)
  }

  /** Salt's `get_token`: the live token's data (and `perms`), or `{}` when it is unknown, expired or revoked. */
  async getToken(token: unknown): Promise<Record<string, unknown>> {
    try {
      const identity = await this.#external('get_token').identityOfToken(token)
      return { ...identity.token, perms: identity.perms }
    } catch (error) {
      if (error instanceof TokenAuthenticationError) return {}
      throw error
    }
  }

  /** Revokes `token` (the caller proves itself by holding it); true when it was live. */
  async rmToken(token: unknown): Promise<boolean> {
    const external = this.#external('rm_token')
    const live = (await external.tokens.get(token)) !== undefined
    await external.tokens.remove(token)
    return live
  }

  #external(command: string): ExternalAuth {
    const external = this.#externalAuth
    if (external === undefined || !external.configured)
      throw new PermissionDeniedError(command, 'external auth is not configured on this master (external_auth)')
    return external
  }
}
