import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import cookie from '@fastify/cookie'
import cors from '@fastify/cors'
import formbody from '@fastify/formbody'
import websocket from '@fastify/websocket'
import { yamlifyArg } from '@brine/config'
import { checkValueShape, FrameLimitError, LogLimiter } from '@brine/core'
import { isAppRequest } from './app.js'
import { drainBounds, drainUnreadBody } from './body-drain.js'
import { ApiError, REFUSED_HEADER } from './errors.js'
import { chooseResponseType, parseYamlBody } from './negotiate.js'
import { plainIp, respond, type ApiContext } from './routes/context.js'

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

/** An error answer in salt-api's shape, counted for `/stats`. */
function fail(context: ApiContext, request: FastifyRequest, reply: FastifyReply, status: number, message: string): FastifyReply {
  context.counters.errors++
  return respond(request, reply, status, { status, return: message })
}

/** The body parsers salt-api has: JSON, YAML, plain text (JSON if it parses) and forms; each raw text kept. */
export async function installBodyParsers(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { rawBodies } = context
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
}

/** Websockets, cookies and CORS as salt-api's cors_tool answers. */
export async function installProtocolPlugins(app: FastifyInstance): Promise<void> {
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
}

/**
 * Every route's method and URL pattern, kept as routes are added, so a known path asked with another method
 * answers 405 (CherryPy's MethodDispatcher) rather than 404. Call before any route is added.
 */
export function installMethodNotAllowed(app: FastifyInstance, context: ApiContext): void {
  const routes: Array<{ method: string; pattern: RegExp }> = []
  app.addHook('onRoute', (route) => {
    // The CORS plugin's OPTIONS route on every path says nothing about which paths exist.
    if (route.url === '*' || route.url === '/*') return
    const pattern = new RegExp(
      `^${route.url
        .split('/')
        .map((part) => (part.startsWith(':') ? '[^/]+' : part === '*' ? '.*' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/')}$`,
    )
    for (const method of [route.method].flat()) routes.push({ method, pattern })
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? ''
    const allowed = [...new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))]
    // A route that serves this method and still found nothing (a static file that is not there) is a 404.
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      reply.header('Allow', allowed.join(', '))
      return fail(context, request, reply, 405, `The path '${path}' does not serve ${request.method} (it serves ${allowed.join(', ')}).`)
    }
    return fail(context, request, reply, 404, `The path '${path}' was not found.`)
  })
}

/** Before any route: the request count, `authorized_ips` (403), and an `Accept` the API can answer (406). */
export function installRequestChecks(app: FastifyInstance, context: ApiContext): void {
  const { settings, logger } = context
  // Peer-caused warnings: 10 lines a minute each, then a count of the rest.
  const blockedLog = new LogLimiter()
  app.addHook('onRequest', async (request) => {
    context.counters.requests++
    if (settings.authorizedIps.length > 0 && !settings.authorizedIps.includes(plainIp(request.ip))) {
      blockedLog.warning(logger, `blocked request from ${request.ip} (not in rest_cherrypy.authorized_ips)`, 'blocked requests')
      throw new ApiError(403, 'Bad IP')
    }
    // The event stream and the key tarball answer in their own formats (salt-api turns hypermedia_out off there).
    const path = request.url.split('?')[0]
    if (
      path === '/events' ||
      path === '/ws' ||
      path?.startsWith('/ws/') === true ||
      (path === '/keys' && request.method === 'POST') ||
      isAppRequest(settings, path ?? '')
    )
      return
    if (chooseResponseType(request.headers.accept) === undefined)
      throw new ApiError(406, `Could not find an acceptable format for Accept: ${request.headers.accept}; use application/json or application/x-yaml`)
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
}

/** fastify's own errors as salt-api answers them: 406 for a content type, 413 for a body too large, 400 for an empty JSON body. */
function fastifyErrorStatus(code: string | undefined, context: ApiContext, request: FastifyRequest): [number, string] | undefined {
  switch (code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return [
        406,
        `Content type not supported: ${String(request.headers['content-type'])} (use application/json, application/x-yaml, application/x-www-form-urlencoded or text/plain)`,
      ]
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return [413, `request body is larger than rest_cherrypy.max_request_body_size (${context.settings.maxRequestBodySize} bytes)`]
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return [400, 'Invalid JSON document']
    default:
      return undefined
  }
}

/** Every error a JSON (or YAML) body `{status, return}` with salt-api's status; a server fault logged, its stack shown only with `debug`. */
export function installErrorHandler(app: FastifyInstance, context: ApiContext): void {
  const { settings, logger } = context
  const answer = (error: Error & { statusCode?: number; code?: string }, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    if (error instanceof ApiError) {
      if (error.retryAfter !== undefined) reply.header('Retry-After', String(error.retryAfter))
      // salt-api answers an ACL refusal with the same 401 as bad credentials; this header lets a client that
      // cares (the console) tell "you may not" from "who are you?" without changing the salt-shaped body.
      if (error.refused) reply.header(REFUSED_HEADER, 'acl')
      return fail(context, request, reply, error.status, error.message)
    }
    const known = fastifyErrorStatus(error.code, context, request)
    if (known !== undefined) return fail(context, request, reply, known[0], known[1])
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500
    if (status === 500) logger.error(`${request.method} ${request.url}: ${error.stack ?? error.message}`)
    return fail(
      context,
      request,
      reply,
      status,
      status === 500 ? (settings.debug ? (error.stack ?? error.message) : 'An unexpected error occurred') : error.message,
    )
  }
  const bounds = drainBounds(settings.maxRequestBodySize)
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    // An answer before the body was read (too large, a content type not parsed, a refused caller): the body is read
    // first, within bounds, so that the client still sending it gets the answer instead of a reset (body-drain.ts).
    // An injected request (tests) has no `complete`, nor a socket to reset.
    if (request.raw.complete !== false) return answer(error, request, reply)
    void drainUnreadBody(request.raw, bounds).then((ended) => {
      if (!ended) reply.header('connection', 'close')
      answer(error, request, reply)
    })
    return undefined
  })
}
