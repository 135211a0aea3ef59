import { readFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import cookie from '@fastify/cookie'
import cors from '@fastify/cors'
import formbody from '@fastify/formbody'
import websocket from '@fastify/websocket'
import { pack } from 'tar-stream'
import type { WebSocket } from 'ws'
import { LoginRateLimitedError, LoginThrottle, tagProblem, tags, yamlifyArg, type MasterConfig } from '@brine/common'
import { checkValueShape, FrameLimitError, LogLimiter, silentLogger, type Logger } from '@brine/transport'
import type { ClientCredentials, EauthToken } from '@brine/client'
import { isAppRequest, registerApp } from './app.js'
import type { ApiSettings } from './config.js'
import { ApiError, ApiStartError, REFUSED_HEADER } from './errors.js'
import { runChunk, type Chunk } from './lowstate.js'
import { ApiMasterClient } from './api-master-client.js'
import { chooseResponseType, parseYamlBody, serialize, type ResponseType } from './negotiate.js'
import { EventStreams } from './sse.js'
import { websocketSink } from './ws.js'

/** The session cookie's name (salt-api's CherryPy sessions use `session_id`). */
export const SESSION_COOKIE = 'session_id'

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
const isHex = (value: unknown): value is string => typeof value === 'string' && /^[0-9a-fA-F]+$/.test(value)

/**
 * An `application/x-www-form-urlencoded` body as salt-api reads it: one chunk, a key given several times
 * becomes a list, and each `arg` value is typed as Salt's `yamlify_arg` types a command-line argument.
 */
export function parseForm(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, raw] of new URLSearchParams(text)) {
    const value = key === 'arg' ? yamlifyArg(raw) : raw
    const previous = out[key]
    if (previous === undefined) out[key] = key === 'arg' ? [value] : value
    else if (Array.isArray(previous) && (key === 'arg' || Array.isArray(previous))) previous.push(value)
    else out[key] = [previous, value]
  }
  return out
}

/** A request body as a list of chunks (salt-api's `lowdata_fmt`): a mapping becomes a one-chunk list. */
function lowstate(body: unknown): unknown {
  if (isMap(body)) {
    const chunk = { ...body }
    if (chunk['arg'] !== undefined && !Array.isArray(chunk['arg'])) chunk['arg'] = [chunk['arg']]
    return [chunk]
  }
  return body
}

/** The first chunk of a body that carries credentials or settings (login, token, keys). */
function firstChunk(body: unknown): Record<string, unknown> {
  const list = lowstate(body)
  const first = Array.isArray(list) ? list[0] : undefined
  if (!isMap(first)) throw new ApiError(400, 'The request body must be a mapping (or a list of one)')
  return first
}

/** Normalises `::ffff:10.0.0.1` to `10.0.0.1` for `authorized_ips`. */
const plainIp = (ip: string): string => (ip.startsWith('::ffff:') ? ip.slice(7) : ip)

export interface ApiAppOptions {
  link: ApiMasterClient
  settings: ApiSettings
  streams: EventStreams
  logger?: Logger
  /** TLS key pair (PEM), when `disable_ssl` is false. */
  tls?: { cert: Buffer; key: Buffer }
}

/** What the API counts for `/stats`. */
interface Counters {
  started: number
  requests: number
  errors: number
}

/**
 * Builds the salt-api compatible application (fastify 5): every endpoint of Salt's rest_cherrypy, JSON or
 * YAML by `Accept`, every error a JSON (or YAML) body with salt-api's status code.
 */
export async function createApiApp(options: ApiAppOptions): Promise<FastifyInstance> {
  const { link, settings, streams } = options
  const logger = options.logger ?? silentLogger
  const counters: Counters = { started: Date.now(), requests: 0, errors: 0 }
  const app = Fastify({
    logger: false,
    bodyLimit: settings.maxRequestBodySize,
    ...(options.tls === undefined ? {} : { https: { cert: options.tls.cert, key: options.tls.key } }),
    // Long jobs: no per-request timeout of fastify's own (the master's waits bound them).
    requestTimeout: 0,
  })

  const respond = (request: FastifyRequest, reply: FastifyReply, status: number, body: unknown): FastifyReply => {
    const type: ResponseType = chooseResponseType(request.headers.accept) ?? 'application/json'
    // A Buffer, because fastify appends `; charset=utf-8` to a JSON type it serialises itself, and salt-api's
    // own tests compare the header with exactly `application/json`.
    return reply.code(status).type(type).send(Buffer.from(serialize(body, type)))
  }
  const fail = (request: FastifyRequest, reply: FastifyReply, status: number, message: string): FastifyReply => {
    counters.errors++
    return respond(request, reply, status, { status, return: message })
  }

  // The text of each JSON, YAML or plain body as it arrived: a webhook's `data.body` (salt-api's raw_body) must be
  // byte for byte what the sender signed, not a re-serialisation of the parsed value.
  const rawBodies = new WeakMap<FastifyRequest, string>()
  // Every route's method and URL pattern, so a known path asked with another method answers 405 (CherryPy's
  // MethodDispatcher) rather than 404.
  const routes: Array<{ method: string; pattern: RegExp }> = []
  app.addHook('onRoute', (route) => {
    // The CORS plugin's OPTIONS route on every path says nothing about which paths exist.
    if (route.url === '*' || route.url === '/*') return
    const pattern = new RegExp(`^${route.url.split('/').map((part) => (part.startsWith(':') ? '[^/]+' : part === '*' ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}$`)
    for (const method of [route.method].flat()) routes.push({ method, pattern })
  })

  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    rawBodies.set(request, body as string)
    if ((body as string).trim() === '') return done(null, undefined)
    try {
      done(null, JSON.parse(body as string))
    } catch {
      done(new ApiError(400, 'Invalid JSON document'), undefined)
    }
  })
  app.addContentTypeParser(['application/x-yaml', 'text/yaml', 'application/yaml'], { parseAs: 'string' }, (request, body, done) => {
    rawBodies.set(request, body as string)
    try {
      done(null, parseYamlBody(body as string))
    } catch {
      done(new ApiError(400, 'Invalid YAML document'), undefined)
    }
  })
  // salt-api: "Some large services still send JSON with a text/plain Content-Type".
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (request, body, done) => {
    rawBodies.set(request, body as string)
    try {
      done(null, JSON.parse(body as string))
    } catch {
      done(null, body)
    }
  })
  await app.register(formbody, { parser: parseForm })
  // A /ws client only ever sends `websocket client ready`: anything bigger is refused by ws (1009) before it is held.
  await app.register(websocket, { options: { maxPayload: 4096 } })
  await app.register(cookie)
  await app.register(cors, {
    // salt-api's cors_tool: the caller's origin, credentials allowed, GET and POST, its three headers.
    origin: (origin, callback) => callback(null, origin ?? '*'),
    credentials: true,
    methods: ['GET', 'POST'],
    allowedHeaders: ['Content-Type', 'X-Auth-Token', 'X-Requested-With'],
    exposedHeaders: 'GET, POST',
    maxAge: 1400,
    strictPreflight: false,
    // salt-api's cors_tool answers a preflight with 200 (the plugin's default is 204).
    optionsSuccessStatus: 200,
  })

  // Peer-caused warnings: 10 lines a minute each, then a count of the rest.
  const blockedLog = new LogLimiter()
  const throttle = new LoginThrottle(settings.loginLimits)
  app.addHook('onRequest', async (request) => {
    counters.requests++
    if (settings.authorizedIps.length > 0 && !settings.authorizedIps.includes(plainIp(request.ip))) {
      blockedLog.warning(logger, `blocked request from ${request.ip} (not in rest_cherrypy.authorized_ips)`, 'blocked requests')
      throw new ApiError(403, 'Bad IP')
    }
    // The event stream and the key tarball answer in their own formats (salt-api turns hypermedia_out off there).
    const path = request.url.split('?')[0]
    if (path === '/events' || path === '/ws' || path?.startsWith('/ws/') === true || (path === '/keys' && request.method === 'POST') || isAppRequest(settings, path ?? '')) return
    if (chooseResponseType(request.headers.accept) === undefined) throw new ApiError(406, `Could not find an acceptable format for Accept: ${request.headers.accept}; use application/json or application/x-yaml`)
  })

  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (error instanceof ApiError) {
      if (error.retryAfter !== undefined) reply.header('Retry-After', String(error.retryAfter))
      // salt-api answers an ACL refusal with the same 401 as bad credentials; this header lets a client that
      // cares (the console) tell "you may not" from "who are you?" without changing the salt-shaped body.
      if (error.refused) reply.header(REFUSED_HEADER, 'acl')
      return fail(request, reply, error.status, error.message)
    }
    switch (error.code) {
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return fail(request, reply, 406, `Content type not supported: ${String(request.headers['content-type'])} (use application/json, application/x-yaml, application/x-www-form-urlencoded or text/plain)`)
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return fail(request, reply, 413, `request body is larger than rest_cherrypy.max_request_body_size (${settings.maxRequestBodySize} bytes)`)
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return fail(request, reply, 400, 'Invalid JSON document')
      default:
        break
    }
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500
    if (status === 500) logger.error(`${request.method} ${request.url}: ${error.stack ?? error.message}`)
    return fail(request, reply, status, status === 500 ? (settings.debug ? (error.stack ?? error.message) : 'An unexpected error occurred') : error.message)
  })
  // A body over the master's entry or depth bound is refused here, as the master would refuse it, before anything
  // walks it recursively (a 5,000-deep argument would otherwise overflow the stack: a 500).
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined || request.body === null || typeof request.body !== 'object') return
    try {
      checkValueShape(request.body, settings.bodyLimits, 'the request body')
    } catch (error) {
      if (error instanceof FrameLimitError) throw new ApiError(error.key === 'max_frame_entries' ? 413 : 400, error.message)
      throw error
    }
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? ''
    const allowed = [...new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))]
    // A route that serves this method and still found nothing (a static file that is not there) is a 404.
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      reply.header('Allow', allowed.join(', '))
      return fail(request, reply, 405, `The path '${path}' does not serve ${request.method} (it serves ${allowed.join(', ')}).`)
    }
    return fail(request, reply, 404, `The path '${path}' was not found.`)
  })

  /** The session's token: `X-Auth-Token`, else the session cookie (salt-api's salt_token tool). */
  const sessionToken = (request: FastifyRequest): string | undefined => {
    const header = request.headers['x-auth-token']
    const value = (Array.isArray(header) ? header[0] : header) ?? (settings.enableSessions ? request.cookies[SESSION_COOKIE] : undefined)
    return value === undefined || value === '' ? undefined : value
  }
  /** salt_auth: a token must be there (the master checks it when it is used). */
  const requireToken = (request: FastifyRequest): string => {
    const token = sessionToken(request)
    if (token === undefined) throw new ApiError(401, 'No authentication credentials given (log in at /login, then send X-Auth-Token or the session cookie)')
    if (!isHex(token)) throw new ApiError(401, 'Invalid token')
    return token
  }
  /** For endpoints that do not reach the master with the token: ask the master whether it is live. */
  const liveToken = async (token: string): Promise<EauthToken> => {
    const data = await link.getToken(token)
    if (data === undefined) throw new ApiError(401, 'Authentication failure of type "token" occurred: the token is unknown, expired or revoked.')
    return data
  }
  const exec = async (chunks: unknown, token: string | undefined, address: string, client?: string): Promise<unknown[]> => {
    if (!Array.isArray(chunks)) throw new ApiError(400, 'Lowstates must be a list')
    const out: unknown[] = []
    for (const chunk of chunks) {
      if (!isMap(chunk)) throw new ApiError(400, 'Each lowstate chunk must be a mapping')
      const low: Chunk = { ...chunk }
      if (token !== undefined) low['token'] = token
      if (client !== undefined) low['client'] = client
      if (low['arg'] !== undefined && !Array.isArray(low['arg'])) low['arg'] = [low['arg']]
      out.push(await runChunk(low, link, settings, { client: 'api', address }))
    }
    return out
  }
  /** A login's credentials; missing ones are `missing` (400 for /token as salt-api's Token; 401 for /login, whose mk_token finds none). */
  const credentialsOf = (chunk: Record<string, unknown>, missing: ApiError): { eauth: string; username: string; password: string; token_expire?: number } => {
    const { eauth, username, password } = chunk
    if (typeof eauth !== 'string' || typeof username !== 'string' || typeof password !== 'string') throw missing
    const expire = Number(chunk['token_expire'])
    return { eauth, username, password, ...(chunk['token_expire'] !== undefined && Number.isFinite(expire) ? { token_expire: expire } : {}) }
  }
  /**
   * A login from HTTP client `ip`: refused with 429 once its user name or address failed too often (the master's
   * `eauth_rate_limit_*`, counted here per HTTP client; the master is told the address, as it counts too).
   */
  const login = async (chunk: Record<string, unknown>, ip: string, missing: ApiError): Promise<EauthToken> => {
    if (!link.masterRunning) throw new ApiError(503, 'the master is not available (its event bus is not reachable)')
    const credentials = credentialsOf(chunk, missing)
    const address = plainIp(ip)
    let attempt
    try {
      attempt = throttle.begin(credentials.username, address)
    } catch (error) {
      if (error instanceof LoginRateLimitedError) throw new ApiError(429, error.message, { retryAfter: Math.max(1, Math.ceil(error.retryAfterMs / 1000)) })
      throw error
    }
    try {
      const made = await link.mkToken({ ...credentials, client_address: address })
      attempt.succeeded()
      return made
    } catch (error) {
      // Only a refused password counts: a master that is down or busy says nothing about the caller.
      if (!(error instanceof ApiError && error.status === 401)) attempt.succeeded()
      if (error instanceof ApiError && error.status === 401) throw new ApiError(401, 'Could not authenticate using provided credentials')
      throw error
    }
  }

  await registerApp(app, settings, logger)

  app.get('/', async (request, reply) => respond(request, reply, 200, { return: 'Welcome', clients: settings.enabledClients }))

  app.post('/', async (request, reply) => {
    const token = requireToken(request)
    return respond(request, reply, 200, { return: await exec(lowstate(request.body), token, request.ip) })
  })

  app.get('/login', async (request, reply) => {
    reply.header('WWW-Authenticate', 'Session')
    return respond(request, reply, 200, { status: 200, return: 'Please log in' })
  })

  app.post('/login', async (request, reply) => {
    // salt-api's Login answers 401 for any body that yields no token, a malformed one included.
    const refused = new ApiError(401, 'Could not authenticate using provided credentials')
    let chunk: Record<string, unknown>
    try {
      chunk = firstChunk(request.body)
    } catch {
      throw refused
    }
    const made = await login(chunk, request.ip, refused)
    reply.header('X-Auth-Token', made.token)
    if (settings.enableSessions) {
      reply.setCookie(SESSION_COOKIE, made.token, { path: '/', httpOnly: true, sameSite: 'lax', secure: options.tls !== undefined, expires: new Date(made.expire * 1000) })
    }
    return respond(request, reply, 200, { return: [{ token: made.token, expire: made.expire, start: made.start, user: made.name, eauth: made.eauth, perms: made.perms ?? {} }] })
  })

  app.post('/logout', async (request, reply) => {
    const token = requireToken(request)
    // Better than salt-api, which only forgets the session: the token itself is revoked on the master.
    await link.rmToken(token)
    streams.endToken(token)
    if (settings.enableSessions) reply.clearCookie(SESSION_COOKIE, { path: '/' })
    return respond(request, reply, 200, { return: 'Your token has been cleared' })
  })

  app.post('/token', async (request, reply) => {
    const body = lowstate(request.body)
    if (!Array.isArray(body)) throw new ApiError(400, 'Require "username", "password", and "eauth" params')
    const out: unknown[] = []
    for (const chunk of body) {
      if (!isMap(chunk)) throw new ApiError(400, 'Require "username", "password", and "eauth" params')
      const made = await login(chunk, request.ip, new ApiError(400, 'Require "username", "password", and "eauth" params'))
      out.push({ start: made.start, token: made.token, expire: made.expire, name: made.name, eauth: made.eauth })
    }
    return respond(request, reply, 200, out)
  })

  app.post('/run', async (request, reply) => respond(request, reply, 200, { return: await exec(lowstate(request.body), undefined, request.ip) }))

  const minions = async (request: FastifyRequest<{ Params: { mid?: string } }>, reply: FastifyReply) => {
    const token = requireToken(request)
    const mid = request.params.mid
    return respond(request, reply, 200, { return: await exec([{ client: 'local', tgt: mid === undefined || mid === '' ? '*' : mid, fun: 'grains.items' }], token, request.ip) })
  }
  app.get('/minions', minions)
  app.get('/minions/:mid', minions)

  app.post('/minions', async (request, reply) => {
    const token = requireToken(request)
    const jobs = (await exec(lowstate(request.body), token, request.ip, 'local_async')) as Array<Record<string, unknown>>
    return respond(request, reply, 202, { return: jobs, _links: { jobs: jobs.filter((job) => isMap(job) && typeof job['jid'] === 'string').map((job) => ({ href: `/jobs/${String(job['jid'])}` })) } })
  })

  const jobs = async (request: FastifyRequest<{ Params: { jid?: string } }>, reply: FastifyReply) => {
    const token = requireToken(request)
    const jid = request.params.jid
    if (jid === undefined || jid === '') {
      const [list] = await exec([{ client: 'runner', fun: 'jobs.list_jobs' }], token, request.ip)
      return respond(request, reply, 200, { return: [list] })
    }
    const [info] = (await exec([{ client: 'runner', fun: 'jobs.list_job', jid }], token, request.ip)) as Array<Record<string, unknown>>
    const returns: Record<string, unknown> = {}
    const result = isMap(info) ? info['Result'] : undefined
    if (isMap(result)) for (const [id, entry] of Object.entries(result)) returns[id] = isMap(entry) ? entry['return'] : entry
    return respond(request, reply, 200, { info: [info], return: [returns] })
  }
  app.get('/jobs', jobs)
  app.get('/jobs/:jid', jobs)

  const keys = async (request: FastifyRequest<{ Params: { mid?: string } }>, reply: FastifyReply) => {
    const token = requireToken(request)
    const mid = request.params.mid
    const chunk = mid === undefined || mid === '' ? { client: 'wheel', fun: 'key.list_all' } : { client: 'wheel', fun: 'key.finger', match: mid }
    const [result] = (await exec([chunk], token, request.ip)) as Array<{ data?: { return?: unknown } }>
    return respond(request, reply, 200, { return: result?.data?.return ?? {} })
  }
  app.get('/keys', keys)
  app.get('/keys/:mid', keys)

  // salt-api's POST /keys: credentials in the body, a tar of the new key pair back (key.gen_accept).
  app.post('/keys', async (request, reply) => {
    const chunk: Record<string, unknown> = { ...firstChunk(request.body), client: 'wheel', fun: 'key.gen_accept' }
    if (chunk['mid'] !== undefined) {
      chunk['id_'] = chunk['mid']
      delete chunk['mid']
    }
    // As salt-api's Keys.POST (sessions off): the eauth trio in the body, never a session token.
    if (typeof chunk['username'] !== 'string' || typeof chunk['password'] !== 'string' || typeof chunk['eauth'] !== 'string') {
      throw new ApiError(401, 'POST /keys needs "username", "password" and "eauth" in the body (as salt-api; a session token is not used here)')
    }
    delete chunk['token']
    const [result] = (await exec([chunk], undefined, request.ip)) as Array<{ data?: { return?: { pub?: string; priv?: string } } }>
    const generated = result?.data?.return
    if (!isMap(generated) || typeof generated['pub'] !== 'string' || typeof generated['priv'] !== 'string') {
      throw new ApiError(409, `minion ${JSON.stringify(chunk['id_'])} already has an accepted key (send force=true to replace it)`)
    }
    const tar = await tarOf([
      ['minion.pub', generated['pub'] as string, 0o644],
      ['minion.key', generated['priv'] as string, 0o600],
    ])
    return reply
      .code(200)
      .header('Content-Disposition', `attachment; filename="brinekeys-${String(chunk['id_'])}.tar"`)
      .header('Cache-Control', 'no-cache')
      .type('application/x-tar')
      .send(tar)
  })

  const hook = async (request: FastifyRequest<{ Params: { '*'?: string } }>, reply: FastifyReply) => {
    if (!settings.webhookDisableAuth) await liveToken(requireToken(request))
    const path = (request.params['*'] ?? '').replace(/^\/+|\/+$/g, '')
    // The path becomes the event's tag: a newline or tab in it would forge lines for every reader of the bus.
    const problem = tagProblem(tags.netapiHook(path))
    if (problem !== undefined) throw new ApiError(400, `the hook path ${JSON.stringify(path.slice(0, 120))} cannot be an event tag: it ${problem}`)
    // Salt's `body` is the raw text of a JSON, YAML or plain body as sent, and '' for a form (its fields are in `post`).
    const raw = rawBodies.get(request) ?? ''
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(request.headers)) {
      if (name === 'x-auth-token' || name === 'cookie') continue
      headers[name.replace(/(^|-)([a-z])/g, (_match, dash: string, letter: string) => `${dash}${letter.toUpperCase()}`)] = Array.isArray(value) ? value.join(', ') : String(value)
    }
    // CherryPy adds the peer's address as a request header, and reactors read it there; set last, so a sender's
    // own `Remote-Addr` header cannot stand in for its address.
    headers['Remote-Addr'] = plainIp(request.ip)
    await link.call(() => link.eauth.fireEvent(tags.netapiHook(path), { body: raw, post: request.body ?? {}, headers }), 'hook')
    return respond(request, reply, 200, { success: true })
  }
  const hookBase = settings.webhookUrl.replace(/\/+$/, '')
  app.post(hookBase === '' ? '/' : hookBase, hook)
  app.post(`${hookBase}/*`, hook)

  app.get('/stats', async (request, reply) => {
    if (!settings.statsDisableAuth) await liveToken(requireToken(request))
    const memory = process.memoryUsage()
    return respond(request, reply, 200, {
      'Brine API': {
        'Uptime (s)': (Date.now() - counters.started) / 1000,
        Requests: counters.requests,
        Errors: counters.errors,
        'Master running': link.masterRunning,
        Events: streams.stats(),
        Memory: { rss: memory.rss, heapUsed: memory.heapUsed, external: memory.external, arrayBuffers: memory.arrayBuffers },
      },
    })
  })

  app.get('/events', async (request: FastifyRequest<{ Querystring: { token?: string; salt_token?: string } }>, reply) => {
    const query = request.query
    const token = query.token ?? query.salt_token ?? sessionToken(request)
    if (token === undefined || !isHex(token)) throw new ApiError(401, 'No valid token given (X-Auth-Token, the session cookie, ?token= or ?salt_token=)')
    const data = await liveToken(token)
    const origin = request.headers.origin
    reply.hijack()
    try {
      streams.open(reply.raw, token, data.expire, origin === undefined ? {} : { 'Access-Control-Allow-Origin': origin, 'Access-Control-Allow-Credentials': 'true' })
    } catch (error) {
      const status = error instanceof ApiError ? error.status : 500
      reply.raw.writeHead(status, { 'Content-Type': 'application/json' })
      reply.raw.end(JSON.stringify({ status, return: (error as Error).message }))
    }
  })

  // salt-api's websocket event stream: the token in the path (salt-api's /ws/<token>, for browsers that cannot
  // send a header), else X-Auth-Token or the session cookie; checked before the upgrade, so a refusal is a 401.
  // The reader is one of EventStreams' own: the same bound, expiry, revocation and events_max_streams as /events.
  const wsTokens = new WeakMap<FastifyRequest, { token: string; expire: number }>()
  type WsRoute = { Params: { token?: string }; Querystring: Record<string, string | undefined> }
  const wsAuth = async (request: FastifyRequest<WsRoute>): Promise<void> => {
    const token = request.params.token ?? sessionToken(request)
    if (token === undefined || !isHex(token)) throw new ApiError(401, 'No valid token given (/ws/<token>, X-Auth-Token or the session cookie)')
    const data = await liveToken(token)
    streams.checkRoom()
    wsTokens.set(request, { token, expire: data.expire })
  }
  const wsOpen = (socket: WebSocket, request: FastifyRequest<WsRoute>): void => {
    const auth = wsTokens.get(request)
    if (auth === undefined) return socket.close(1008, 'not authenticated')
    // salt-api formats when the parameter is there at all (`/ws?format_events`), whatever its value.
    const formatEvents = Object.hasOwn(request.query, 'format_events')
    try {
      streams.attach(websocketSink(socket, formatEvents), auth.token, auth.expire)
    } catch (error) {
      socket.close(1013, (error as Error).message.slice(0, 120))
    }
  }
  app.get<WsRoute>('/ws', { websocket: true, preValidation: wsAuth }, wsOpen)
  app.get<WsRoute>('/ws/:token', { websocket: true, preValidation: wsAuth }, wsOpen)

  return app
}

/** A tar archive of `files` (name, text, mode), as salt-api's POST /keys answers. */
async function tarOf(files: ReadonlyArray<[name: string, text: string, mode: number]>): Promise<Buffer> {
  const archive = pack()
  for (const [name, text, mode] of files) archive.entry({ name, mode, mtime: new Date() }, text)
  archive.finalize()
  const chunks: Buffer[] = []
  for await (const chunk of archive) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
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
      throw new ApiStartError(`cannot listen on ${settings.host}:${settings.port} (rest_cherrypy.host/port): ${(error as Error).message}`, { host: settings.host, port: settings.port }, { cause: error })
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
