import { readFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance } from 'fastify'
import type { MasterConfig } from '@brine/config'
import { silentLogger, type Logger } from '@brine/core'
import { ApiMasterClient } from './api-master-client.js'
import { registerApp } from './app.js'
import type { ApiSettings } from './config.js'
import { ApiStartError } from './errors.js'
import { installBodyParsers, installErrorHandler, installMethodNotAllowed, installProtocolPlugins, installRequestChecks } from './http-setup.js'
import { authRoutes } from './routes/auth.js'
import type { ApiContext } from './routes/context.js'
import { eventsRoutes, websocketRoutes } from './routes/events.js'
import { hookRoutes } from './routes/hook.js'
import { keysRoutes } from './routes/keys.js'
import { minionsJobsRoutes } from './routes/minions-jobs.js'
import { runRoutes } from './routes/run.js'
import { statsRoutes } from './routes/stats.js'
import { EventStreams } from './sse.js'

export { parseForm } from './http-setup.js'
export { SESSION_COOKIE } from './routes/context.js'

export interface ApiAppOptions {
  link: ApiMasterClient
  settings: ApiSettings
  streams: EventStreams
  logger?: Logger
  /** TLS key pair (PEM), when `disable_ssl` is false. */
  tls?: { cert: Buffer; key: Buffer }
}

/** The route groups, one fastify plugin each, in the order salt-api's rest_cherrypy lists its endpoints. */
const ROUTE_GROUPS = [runRoutes, authRoutes, minionsJobsRoutes, keysRoutes, hookRoutes, statsRoutes, eventsRoutes, websocketRoutes]

/**
 * Builds the salt-api compatible application (fastify 5): every endpoint of Salt's rest_cherrypy, JSON or
 * YAML by `Accept`, every error a JSON (or YAML) body with salt-api's status code.
 */
export async function createApiApp(options: ApiAppOptions): Promise<FastifyInstance> {
  const { link, settings, streams } = options
  const logger = options.logger ?? silentLogger
  const context: ApiContext = {
    link,
    settings,
    streams,
    logger,
    counters: { started: Date.now(), requests: 0, errors: 0 },
    rawBodies: new WeakMap(),
    tls: options.tls !== undefined,
  }
  const app = Fastify({
    logger: false,
    bodyLimit: settings.maxRequestBodySize,
    ...(options.tls === undefined ? {} : { https: { cert: options.tls.cert, key: options.tls.key } }),
    // Long jobs: no per-request timeout of fastify's own (the master's waits bound them).
    requestTimeout: 0,
  })
  installMethodNotAllowed(app, context)
  await installBodyParsers(app, context)
  await installProtocolPlugins(app)
  installRequestChecks(app, context)
  installErrorHandler(app, context)
  await registerApp(app, settings, logger)
  for (const routes of ROUTE_GROUPS) await app.register(routes, context)
  return app
}

export interface ApiServerOptions {
  logger?: Logger
}

/**
 * `brine-api`: the REST API beside a running master, configured by the master's `rest_cherrypy` block.
 * It talks to the master over its request port (eauth credentials on every call) and reads its event bus,
 * so it runs on the master's host as the master's user, as salt-api does.
 */
export class ApiServer {
  readonly opts: MasterConfig
  readonly settings: ApiSettings
  readonly #logger: Logger
  #link: ApiMasterClient | undefined
  #streams: EventStreams | undefined
  #app: FastifyInstance | undefined

  constructor(opts: MasterConfig, settings: ApiSettings, options: ApiServerOptions = {}) {
    this.opts = opts
    this.settings = settings
    this.#logger = options.logger ?? silentLogger
  }

  /** The address the API listens on (after start). */
  get address(): { host: string; port: number; url: string } {
    const info = this.#app?.server.address() as AddressInfo | null | undefined
    if (info === undefined || info === null) throw new ApiStartError('brine-api is not listening (call start() first)')
    const scheme = this.settings.disableSsl ? 'http' : 'https'
    const host = info.address.includes(':') ? `[${info.address}]` : info.address
    return { host: info.address, port: info.port, url: `${scheme}://${host}:${info.port}` }
  }

  /** The `/events` counters (streams, delivered, dropped). */
  get events(): EventStreams {
    if (this.#streams === undefined) throw new ApiStartError('brine-api is not started')
    return this.#streams
  }

  async start(): Promise<void> {
    const settings = this.settings
    let tls: { cert: Buffer; key: Buffer } | undefined
    if (!settings.disableSsl) {
      const read = async (key: string, file: string | undefined): Promise<Buffer> => {
        try {
          return await readFile(file as string)
        } catch (error) {
          throw new ApiStartError(`rest_cherrypy.${key}: cannot read ${String(file)}: ${(error as Error).message}`, { key, file }, { cause: error })
        }
      }
      tls = { cert: await read('ssl_crt', settings.sslCrt), key: await read('ssl_key', settings.sslKey) }
    }
    const link = new ApiMasterClient(this.opts, this.#logger.child('master'))
    this.#link = link
    try {
      await link.connect()
    } catch (error) {
      // The API may start before its master, as salt-api can; calls answer 503 until the bus is reachable
      // (EventStreams' reader keeps trying, and the bus connection then follows the master by itself).
      this.#logger.warning(`the master's event bus is not reachable yet: ${(error as Error).message}; requests answer 503 until it is`)
    }
    const streams = new EventStreams({
      events: link.events,
      bufferBytes: settings.eventsBufferBytes,
      maxStreams: settings.eventsMaxStreams,
      recheckMs: settings.eventsTokenRecheckMs,
      tokenLive: async (token) => (await link.getToken(token)) !== undefined,
      logger: this.#logger.child('events'),
    })
    this.#streams = streams
    streams.start()
    const app = await createApiApp({ link, settings, streams, logger: this.#logger, ...(tls === undefined ? {} : { tls }) })
    this.#app = app
    try {
      await app.listen({ host: settings.host, port: settings.port })
    } catch (error) {
      throw new ApiStartError(
        `cannot listen on ${settings.host}:${settings.port} (rest_cherrypy.host/port): ${(error as Error).message}`,
        { host: settings.host, port: settings.port },
        { cause: error },
      )
    }
    this.#logger.info(`brine-api listening on ${this.address.url} (clients: ${settings.enabledClients.join(', ') || 'none: set netapi_enable_clients'})`)
  }

  /** Stops listening, ends every event stream and closes the master link. Idempotent. */
  async stop(): Promise<void> {
    await this.#streams?.close()
    await this.#app?.close()
    await this.#link?.close()
    this.#app = undefined
    this.#streams = undefined
    this.#link = undefined
  }
}
