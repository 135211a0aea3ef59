import { LoginThrottle } from '@brine/common'
import { ConfigError, eauthLimitsFromConfig, timeoutsFromConfig, msFromSeconds, secondsFromMs, type LoginLimits, type MasterConfig } from '@brine/config'
import { LogLimiter, silentLogger, type Logger } from '@brine/core'
import type { AclEntry } from '../acl.js'
import { EauthAuthenticationError, TokenAuthenticationError } from '@brine/protocol'
import { fillAuthList } from './auth-list.js'
import { FileAuthBackend, fileBackendSettings } from './file-backend.js'
import { inlineHasher, type PasswordHasher } from './hash-pool.js'
import { TokenStore, type TokenData } from './token-store.js'

/** An eauth backend: checks a user's password (Salt's `<backend>.auth`) and names its groups. */
export interface AuthBackend {
  readonly name: string
  authenticate(username: string, password: string): Promise<boolean>
  groups?(username: string): Promise<string[]>
}

/** The eauth backends Brine implements; any other name under `external_auth` stops the master at start. */
export const SUPPORTED_EAUTH_BACKENDS = ['file'] as const

/** Who an eauth login or token turned out to be, and what their ACL allows. */
export interface EauthIdentity {
  name: string
  eauth: string
  groups: string[]
  perms: AclEntry[]
}

/** What `mk_token` answers: Salt's token data, plus the ACL the master will enforce for it (`perms`). */
export type MadeToken = TokenData & { perms: AclEntry[] }

export interface ExternalAuthOptions {
  /** `external_auth`: backend → {user | group% | `*` | `^setting` → entries}. */
  config: Readonly<Record<string, Readonly<Record<string, unknown>>>>
  backends: ReadonlyMap<string, AuthBackend>
  tokens: TokenStore
  tokenExpireMs: number
  /** `token_expire_user_override`: true, or {backend: [users]} allowed to ask for their own lifetime. */
  expireOverride: boolean | Readonly<Record<string, unknown>>
  permissiveAcl: boolean
  /** Failed logins per user name and per client address before further ones are refused (default: none). */
  limits?: LoginLimits
  /** The rate limit of failed-login warnings (default: 10 a minute, then a count of the rest). */
  failureLog?: LogLimiter
  logger?: Logger
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Salt's external auth on the master (salt/auth LoadAuth): checks eauth credentials with their backend,
 * issues and checks tokens, and builds a user's ACL (`fill_auth_list`). Failed logins take as long as the
 * slowest failure seen so far (± 25 %), as Salt's `time_auth` does, so timing tells nothing; beyond
 * `eauth_rate_limit_user` / `eauth_rate_limit_address` failures in a window a login is refused with
 * LoginRateLimitedError before any password is checked, and the failure warnings are rate-limited.
 */
export class ExternalAuth {
  readonly #o: ExternalAuthOptions
  readonly #logger: Logger
  readonly #throttle: LoginThrottle | undefined
  /** A failed login is a peer's doing: 10 warnings a minute, then a count of the rest. */
  readonly #failureLog: LogLimiter
  #maxFailMs = 0

  constructor(options: ExternalAuthOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
    this.#throttle = options.limits === undefined ? undefined : new LoginThrottle(options.limits)
    this.#failureLog = options.failureLog ?? new LogLimiter()
  }

  /**
   * Reads `external_auth`, `token_dir`, `token_expire`, `token_expire_user_override` and `permissive_acl`
   * from the master's config. A backend Brine does not implement (pam, ldap, …), or a file backend whose
   * settings are wrong, is a ConfigError naming the key.
   */
  static async fromConfig(opts: MasterConfig, logger: Logger = silentLogger, hasher: PasswordHasher = inlineHasher): Promise<ExternalAuth> {
    const config = (opts.external_auth ?? {}) as Record<string, unknown>
    const backends = new Map<string, AuthBackend>()
    for (const [name, block] of Object.entries(config)) {
      if (!isMap(block)) throw new ConfigError(`external_auth.${name} must be a mapping of users and groups to ACL entries`, { key: `external_auth.${name}` })
      if (!(SUPPORTED_EAUTH_BACKENDS as readonly string[]).includes(name)) {
        throw new ConfigError(
          `external_auth.${name}: the '${name}' eauth backend is not supported by Brine (supported: ${SUPPORTED_EAUTH_BACKENDS.join(', ')})`,
          { key: `external_auth.${name}` },
        )
      }
      backends.set(name, new FileAuthBackend(await fileBackendSettings(block, logger), logger.child('eauth-file'), hasher))
    }
    const override = opts.token_expire_user_override
    return new ExternalAuth({
      config: config as ExternalAuthOptions['config'],
      backends,
      tokens: new TokenStore(String(opts.token_dir), logger),
      tokenExpireMs: timeoutsFromConfig(opts).tokenExpireMs,
      expireOverride: typeof override === 'boolean' || isMap(override) ? override : false,
      permissiveAcl: opts.permissive_acl === true,
      limits: eauthLimitsFromConfig(opts),
      logger,
    })
  }

  /** True when at least one backend is configured. */
  get configured(): boolean {
    return this.#o.backends.size > 0
  }

  get tokens(): TokenStore {
    return this.#o.tokens
  }

  /** Salt's `get_auth_list` from the master's config: the entries that apply to `name` of `eauth` in `groups`. */
  authList(eauth: string, name: string, groups: readonly string[]): AclEntry[] {
    const block = this.#o.config[eauth]
    return block === undefined ? [] : fillAuthList(block, name, groups, this.#o.permissiveAcl)
  }

  /**
   * Checks eauth credentials from client address `from` (when known); the identity, an EauthAuthenticationError
   * after the padded failure time, or a LoginRateLimitedError (LoginBusyError) at once when the user or the
   * address failed too often (every hashing thread is taken).
   */
  async authenticate(load: { eauth?: unknown; username?: unknown; password?: unknown }, from?: string): Promise<EauthIdentity> {
    const started = Date.now()
    const eauth = typeof load.eauth === 'string' ? load.eauth : ''
    const username = typeof load.username === 'string' ? load.username : ''
    const password = typeof load.password === 'string' ? load.password : ''
    const backend = this.#o.backends.get(eauth)
    const attempt = this.#throttle?.begin(username, from)
    let ok = false
    if (backend !== undefined && username !== '') ok = await backend.authenticate(username, password)
    if (ok) {
      attempt?.succeeded()
      const groups = (await backend?.groups?.(username)) ?? []
      return { name: username, eauth, groups, perms: this.authList(eauth, username, groups) }
    }
    await this.#padFailure(started)
    const reason =
      backend === undefined
        ? `the eauth backend ${JSON.stringify(eauth.slice(0, 40))} is not configured (external_auth: ${[...this.#o.backends.keys()].join(', ') || 'none'})`
        : ''
    const source = from === undefined ? '' : ` from ${from}`
    this.#failureLog.warning(
      this.#logger,
      `Authentication failure of type "eauth" occurred for user ${JSON.stringify(username.slice(0, 80))}${source} (${eauth.slice(0, 40) || 'no backend'})`,
      'failed-login warnings',
    )
    throw new EauthAuthenticationError(eauth, username, reason)
  }

  /** Salt's `mk_token`: authenticates, then stores a token living `token_expire` (or the user's `token_expire`, when allowed). */
  async mkToken(load: { eauth?: unknown; username?: unknown; password?: unknown; token_expire?: unknown }, from?: string): Promise<MadeToken> {
    const identity = await this.authenticate(load, from)
    let lifetimeMs = this.#o.tokenExpireMs
    const asked = Number(load.token_expire)
    if (load.token_expire !== undefined && Number.isFinite(asked) && asked > 0 && this.#mayOverride(identity.eauth, identity.name))
      lifetimeMs = msFromSeconds(asked)
    const start = secondsFromMs(Date.now())
    const record = await this.#o.tokens.create({
      start,
      expire: start + secondsFromMs(lifetimeMs),
      name: identity.name,
      eauth: identity.eauth,
      ...(identity.groups.length > 0 ? { groups: identity.groups } : {}),
    })
    return { ...record, perms: identity.perms }
  }

  /** The identity a live token stands for; TokenAuthenticationError when unknown, expired, revoked or its backend is gone. */
  async identityOfToken(token: unknown): Promise<EauthIdentity & { token: TokenData }> {
    const record = await this.#o.tokens.get(token)
    if (record === undefined) throw new TokenAuthenticationError('the token is unknown, expired or revoked')
    if (!this.#o.backends.has(record.eauth))
      throw new TokenAuthenticationError(`the token's eauth backend ${JSON.stringify(record.eauth)} is no longer configured`)
    const groups = record.groups ?? []
    return { name: record.name, eauth: record.eauth, groups, perms: this.authList(record.eauth, record.name, groups), token: record }
  }

  #mayOverride(eauth: string, user: string): boolean {
    const override = this.#o.expireOverride
    if (override === true) return true
    if (!isMap(override)) return false
    const users = override[eauth]
    return Array.isArray(users) && users.includes(user)
  }

  async #padFailure(started: number): Promise<void> {
    const took = Date.now() - started
    if (took > this.#maxFailMs) this.#maxFailMs = took
    const target = this.#maxFailMs * (0.75 + Math.random() * 0.5)
    const wait = started + target - Date.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
  }
}
