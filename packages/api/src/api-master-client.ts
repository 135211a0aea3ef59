import { existsSync } from 'node:fs'
import { EauthClient, LocalClient, MasterEvent, RunnerClient, WheelClient, type ClientCredentials, type EauthLogin, type EauthToken } from '@brine/client'
import { type MasterConfig } from '@brine/config'
import { eventBusPath } from '@brine/protocol'
import { silentLogger, type Logger } from '@brine/core'
import { ApiError } from './errors.js'
import { httpErrorOf } from './http-errors.js'

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

  /** The HTTP answer to `error` (see {@link httpErrorOf}); a 500, logged, for anything it does not map. */
  httpError(error: unknown, what: string): ApiError {
    const mapped = httpErrorOf(error, what, this.masterRunning)
    if (mapped !== undefined) return mapped
    const message = (error as Error)?.message ?? String(error)
    this.#logger.error(`${what} failed: ${message}`)
    return new ApiError(500, `${what} failed: ${message}`, { cause: error })
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.local.close(), this.runner.close(), this.wheel.close(), this.eauth.close(), this.events.close()])
  }
}

export type { ClientCredentials }
