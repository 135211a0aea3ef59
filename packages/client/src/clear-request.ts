import { type RequestClient } from '@brine/transport'
import { RemoteError, remoteCause, silentLogger, type ErrorContext, type Logger } from '@brine/core'
import { accessSync, constants, statSync } from 'node:fs'
import { loadLocalChannelTransport, loadTransport } from '@brine/common'
import { brokerFromConfig, loadConfig, type MasterConfig } from '@brine/config'
import { clearRequest, localRequestPath, PermissionDeniedError } from '@brine/protocol'
import { readRootKey, rootKeyPath } from '@brine/crypt/root-key'
import { MasterRequestError } from './errors.js'

/**
 * External auth credentials a request may carry instead of the root key (Salt's `token`, or `eauth` +
 * `username` + `password`); the master checks them and the user's ACL on every publish, runner and wheel.
 */
export type ClientCredentials = { token: string } | { eauth: string; username: string; password: string }

/**
 * Where a request comes from, as the master's audit log records it: the client (`cli`, `api`, `syndic`,
 * `library`) and, for the REST API, its HTTP caller's address. What a client claims; the master adds what it saw.
 */
export interface RequestOrigin {
  client: 'cli' | 'api' | 'syndic' | 'library'
  address?: string
}

/** The commands whose load carries the origin (the ones the master audits). */
const AUDITED_COMMANDS = new Set(['publish', 'runner', 'wheel'])

/** How a client finds and talks to the local master. */
export interface MasterClientOptions {
  /** Where this client's requests come from, for the master's audit log (default: `library`). */
  origin?: RequestOrigin
  /**
   * Authenticate as this eauth user instead of with the root key (which is then not read at all, so a
   * user who cannot read it may still publish within their ACL: `brine -a`).
   */
  credentials?: ClientCredentials
  /** Where the master's config lives (Salt's `-c`, default `/etc/brine`); ignored when `opts` is given. */
  configDir?: string
  /** An already loaded master config (skips reading `configDir`). */
  opts?: MasterConfig
  /** The master's root key, already read (skips reading `<cachedir>/.root_key`); ignored with `credentials`. */
  rootKey?: string
  logger?: Logger
  /** How long one request to the master may take, ms (default 15000). */
  requestTimeout?: number
}

export interface ClearConnection {
  opts: MasterConfig
  /** The master's root key (`<cachedir>/.root_key`, read again when a restarted master wrote a new one); undefined when the client authenticates with `credentials`. */
  key: string | undefined
  requests: RequestClient
}

/** Options of one clear request. */
export interface ClearRequestOptions {
  timeout?: number
  tries?: number
  signal?: AbortSignal
  /** This request's credentials instead of the client's (its root key or `credentials`). */
  credentials?: ClientCredentials
  /** Where this request comes from, instead of the client's `origin`. */
  origin?: RequestOrigin
}

export type MasterRequestErrorClass = new (message: string, context?: ErrorContext, options?: ErrorOptions) => MasterRequestError

/**
 * The master's local request channel (a unix socket under its sock_dir) when this process may open
 * it — on the master's host, as its user — else undefined: the client then uses `ret_port`. A socket
 * a killed master left behind is replaced when the master starts again.
 */
export function localChannel(opts: MasterConfig): string | undefined {
  const path = localRequestPath(opts.sock_dir, opts.transport)
  try {
    if (!statSync(path).isSocket()) return undefined
    accessSync(path, constants.R_OK | constants.W_OK)
    return path
  } catch {
    return undefined
  }
}

/**
 * The plumbing LocalClient, RunnerClient and WheelClient share: read the master's config and root
 * key, open one request client to the master — through its local channel when there is one (no
 * remote peer can fill it), else to its `ret_port` — and send `{enc: 'clear', load: {...load, key}}`,
 * turning a refusal into a typed error that names the command; its `cause` is the master's error as a
 * RemoteError, whose `remote` is that error as its own class (`remoteCause(error) instanceof PermissionDeniedError`).
 */
export class ClearRequester {
  readonly logger: Logger
  #connecting: Promise<ClearConnection> | undefined
  #closed = false

  constructor(readonly options: MasterClientOptions = {}) {
    this.logger = options.logger ?? silentLogger
  }

  /** Reads the config and root key and connects; later calls reuse the connection. */
  connect(): Promise<ClearConnection> {
    if (this.#closed) return Promise.reject(new MasterRequestError('this client is closed'))
    this.#connecting ??= this.#open().catch((error: unknown) => {
      this.#connecting = undefined
      throw error
    })
    return this.#connecting
  }

  async #open(): Promise<ClearConnection> {
    const opts = this.options.opts ?? (await loadConfig('master', { configDir: this.options.configDir, logger: this.logger })).opts
    // RootKeyError already says "run as the master's user" when the file cannot be read.
    const key = this.options.credentials === undefined ? (this.options.rootKey ?? (await readRootKey(rootKeyPath(opts.cachedir)))) : undefined
    const path = localChannel(opts)
    // A broker transport's local channel speaks a socket transport's framing (the master serves it so); the broker's
    // own client is then not loaded at all.
    const transport = path === undefined ? await loadTransport(opts.transport) : await loadLocalChannelTransport(opts.transport)
    const host = opts.interface === '0.0.0.0' ? '127.0.0.1' : opts.interface === '::' ? '::1' : opts.interface
    const port = Number(opts.transport_opts[opts.transport]?.ret_port ?? opts.ret_port)
    // On NATS the client reaches the master through the broker the master's config names (transport_opts first).
    const broker = brokerFromConfig({ ...opts, ...(opts.transport_opts[opts.transport] ?? {}) })
    if (path !== undefined) this.logger.debug(`reaching the master through its local channel ${path}`)
    const requests = transport.createRequestClient({
      host,
      port,
      broker,
      ...(path === undefined ? {} : { path }),
      logger: this.logger,
      timeout: this.options.requestTimeout ?? 15_000,
    })
    await requests.start()
    return { opts, key, requests }
  }

  /**
   * Sends one clear load with the root key (or the credentials given) and returns the master's reply. A master
   * writes a new root key at every start: a refusal of the key this client read at its connect has it read the
   * file again, and the request is sent once more when the key there is another.
   */
  async request(load: Record<string, unknown>, options: ClearRequestOptions = {}, ErrorClass: MasterRequestErrorClass = MasterRequestError): Promise<unknown> {
    const connection = await this.connect()
    const sentKey = connection.key
    try {
      return await this.#requestOnce(connection, load, options, ErrorClass)
    } catch (error) {
      if (!(await this.#rootKeyRenewed(connection, sentKey, error, options))) throw error
      this.logger.info(`the master's root key changed (the master restarted): ${String(load['cmd'])} sent again with the new one`)
      return await this.#requestOnce(connection, load, options, ErrorClass)
    }
  }

  /** Whether `error` refused the root key this client read from the file, and the file now holds another (taken). */
  async #rootKeyRenewed(connection: ClearConnection, sentKey: string | undefined, error: unknown, options: ClearRequestOptions): Promise<boolean> {
    const fromFile = options.credentials === undefined && this.options.credentials === undefined && this.options.rootKey === undefined
    if (!fromFile || sentKey === undefined || !(remoteCause(error) instanceof PermissionDeniedError)) return false
    const current = await readRootKey(rootKeyPath(connection.opts.cachedir)).catch(() => undefined)
    if (current === undefined || current === sentKey) return false
    connection.key = current
    return true
  }

  async #requestOnce(
    connection: ClearConnection,
    load: Record<string, unknown>,
    options: ClearRequestOptions,
    ErrorClass: MasterRequestErrorClass,
  ): Promise<unknown> {
    const { key, requests } = connection
    const { credentials: given, origin: givenOrigin, ...sendOptions } = options
    const credentials = given ?? this.options.credentials ?? { key }
    const origin = givenOrigin ?? this.options.origin ?? { client: 'library' }
    const withOrigin = AUDITED_COMMANDS.has(String(load['cmd'])) ? { ...load, origin } : load
    let reply: unknown
    try {
      reply = await requests.send(clearRequest({ ...withOrigin, ...credentials }), sendOptions)
    } catch (error) {
      if (error instanceof RemoteError)
        throw new ErrorClass(`the master refused ${String(load['cmd'])}: ${error.message}`, { remoteName: error.remoteName }, { cause: error })
      throw error
    }
    const problem = (reply as { error?: { name?: string; message?: string; context?: ErrorContext } } | null)?.error
    if (problem !== undefined && problem !== null) {
      const remote = new RemoteError(
        { name: problem.name ?? 'Error', message: problem.message ?? String(problem), context: problem.context ?? {} },
        'the master',
      )
      throw new ErrorClass(
        `the master refused ${String(load['cmd'])}: ${problem.name ?? 'Error'}: ${problem.message ?? String(problem)}`,
        { remoteName: problem.name },
        { cause: remote },
      )
    }
    return reply
  }

  /** Closes the request client. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const connection = await this.#connecting?.catch(() => undefined)
    this.#connecting = undefined
    await connection?.requests.close()
  }
}
