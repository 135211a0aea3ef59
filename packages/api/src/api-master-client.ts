import { existsSync } from 'node:fs'
import {
  EauthClient,
  LocalClient,
  MasterEvent,
  RunnerClient,
  WheelClient,
  type ClientCredentials,
  type EauthLogin,
  type EauthToken,
} from '@brine/client'
import { eventBusPath, type MasterConfig } from '@brine/common'
import { ClosedError, RemoteError, TimeoutError, silentLogger, type Logger } from '@brine/transport'
import { ApiError } from './errors.js'

/** The remote error names that mean "who are you?" and "you may not" (both 401, as salt-api's hypermedia_handler answers). */
const UNAUTHENTICATED = new Set(['EauthAuthenticationError', 'TokenAuthenticationError', 'EauthError'])
const REFUSED = new Set(['PermissionDeniedError'])
/** The context the master's error carried: the client wraps a RemoteError (its `cause`) in an error of its own. */
function remoteContext(error: unknown): Record<string, unknown> {
  const own = (error as { context?: Record<string, unknown> } | undefined)?.context ?? {}
  const cause = (error as { cause?: { context?: Record<string, unknown> } } | undefined)?.cause?.context ?? {}
  return { ...cause, ...own }
}

const BAD_REQUEST = new Set(['MalformedRequestError', 'PayloadError', 'UnknownRunnerError', 'UnknownWheelFunctionError', 'TargetError', 'JidError', 'InvalidMinionIdError', 'MatchTypeError'])

/**
 * The API's side of the master: one request client and one bus connection shared by every HTTP request,
 * through @brine/client (LocalClient, RunnerClient, WheelClient, EauthClient, MasterEvent). Calls carry
 * the HTTP caller's eauth credentials, so the master's one authorize step and ACL decide; the root key
 * (the API runs as the master's user, as salt-api does) serves only webhooks and the job-cache catch-up.
 */
export class ApiMasterClient {
  readonly local: LocalClient
  readonly runner: RunnerClient
  readonly wheel: WheelClient
  readonly eauth: EauthClient
  readonly events: MasterEvent
  readonly opts: MasterConfig
  readonly #logger: Logger

  constructor(opts: MasterConfig, logger: Logger = silentLogger) {
    this.opts = opts
    this.#logger = logger
    const options = { opts, logger, origin: { client: 'api' as const } }
    this.local = new LocalClient(options)
    this.runner = new RunnerClient(options)
    this.wheel = new WheelClient(options)
    this.eauth = new EauthClient(options)
    this.events = new MasterEvent({ sockDir: opts.sock_dir, logger: logger.child('events'), reconnect: { initial: 100, max: 2000 } })
  }

  /** Connects to the bus (the master's request port is reached lazily by each call). */
  async connect(): Promise<void> {
    await this.events.connect()
  }

  /** Salt's `_is_master_running`: the master's bus socket exists and the bus is connected. */
  get masterRunning(): boolean {
    return this.events.connected && existsSync(eventBusPath(this.opts.sock_dir))
  }

  /** A token for a login; ApiError 401 when it does not authenticate. */
  async mkToken(login: EauthLogin): Promise<EauthToken> {
    return this.call(() => this.eauth.mkToken(login), 'mk_token')
  }

  /** The live token's data, or undefined. */
  async getToken(token: string): Promise<EauthToken | undefined> {
    return this.call(() => this.eauth.getToken(token), 'get_token')
  }

  async rmToken(token: string): Promise<boolean> {
    return this.call(() => this.eauth.rmToken(token), 'rm_token')
  }

  /**
   * Runs `work` against the master and turns its failures into HTTP errors: refused credentials 401,
   * ACL refusals 401 too (salt-api's; marked `refused`), bad calls 400, a master that is down 503, a request that timed out 504.
   */
  async call<T>(work: () => Promise<T>, what: string): Promise<T> {
    try {
      return await work()
    } catch (error) {
      throw this.httpError(error, what)
    }
  }

  httpError(error: unknown, what: string): ApiError {
    if (error instanceof ApiError) return error
    const remoteName = String((error as { context?: { remoteName?: unknown } })?.context?.remoteName ?? (error instanceof RemoteError ? error.remoteName : ''))
    const message = (error as Error)?.message ?? String(error)
    // The message after the transport's "tcp://… answered with Name: " prefix is what the master said.
    const said = message.replace(/^.*? answered with [A-Za-z]+: /, '').replace(/^the master refused [a-z_]+: [A-Za-z]+: /, '')
    if (UNAUTHENTICATED.has(remoteName)) return new ApiError(401, said, { cause: error })
    const name = (error as Error)?.name
    if (name === 'LoginRateLimitedError' || name === 'LoginBusyError' || remoteName === 'LoginRateLimitedError' || remoteName === 'LoginBusyError') {
      const retryAfter = Number(remoteContext(error)['retryAfter'])
      return new ApiError(429, said, { cause: error, retryAfter: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 1 })
    }
    // A request over the master's entry or depth bound: too large (entries) or malformed (depth), never a server fault.
    if (name === 'FrameLimitError' || remoteName === 'FrameLimitError') {
      const key = String(remoteContext(error)['key'] ?? '')
      return new ApiError(key === 'max_frame_entries' ? 413 : 400, message, { cause: error })
    }
    // salt-api turns Salt's AuthorizationError into 401, so pepper says "Authentication denied"; the body keeps the rule.
    if (REFUSED.has(remoteName)) return new ApiError(401, said, { cause: error, refused: true })
    if (BAD_REQUEST.has(remoteName)) return new ApiError(400, said, { cause: error })
    // A batch size the client cannot use (`batch: 0`, `'x%'`) is the caller's mistake.
    if ((error as Error)?.name === 'BatchSizeError') return new ApiError(400, message, { cause: error })
    if (error instanceof TimeoutError || (error as Error)?.name === 'TimeoutError') {
      if (!this.masterRunning) return new ApiError(503, `the master is not available (${what}: ${message})`, { cause: error })
      return new ApiError(504, `${what} timed out: ${message}`, { cause: error })
    }
    if (error instanceof ClosedError || (error as Error)?.name === 'EventBusUnavailableError' || (error as Error)?.name === 'RootKeyError') {
      return new ApiError(503, `the master is not available (${what}: ${message})`, { cause: error })
    }
    this.#logger.error(`${what} failed: ${message}`)
    return new ApiError(500, `${what} failed: ${message}`, { cause: error })
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.local.close(), this.runner.close(), this.wheel.close(), this.eauth.close(), this.events.close()])
  }
}

export type { ClientCredentials }
