import type { FastifyInstance } from 'fastify'
import type { EauthToken } from '@brine/client'
import { LoginRateLimitedError, LoginThrottle } from '@brine/common'
import { msFromSeconds, secondsFromMs } from '@brine/config'
import { ApiError } from '../errors.js'
import { firstChunk, isMap, lowstate, plainIp, requireToken, respond, SESSION_COOKIE, type ApiContext } from './context.js'

type Credentials = { eauth: string; username: string; password: string; token_expire?: number }

/** A login's credentials; missing ones are `missing` (400 for /token as salt-api's Token; 401 for /login, whose mk_token finds none). */
function credentialsOf(chunk: Record<string, unknown>, missing: ApiError): Credentials {
  const { eauth, username, password } = chunk
  if (typeof eauth !== 'string' || typeof username !== 'string' || typeof password !== 'string') throw missing
  const expire = Number(chunk['token_expire'])
  return { eauth, username, password, ...(chunk['token_expire'] !== undefined && Number.isFinite(expire) ? { token_expire: expire } : {}) }
}

/**
 * Logins as the master's `eauth_rate_limit_*` limits them, counted here per HTTP client (the master is told the
 * address, as it counts too): refused with 429 once a user name or an address failed too often.
 */
class ApiLogins {
  readonly #throttle: LoginThrottle
  constructor(readonly context: ApiContext) {
    this.#throttle = new LoginThrottle(context.settings.loginLimits)
  }

  /** A login from HTTP client `ip`; `missing` is what missing credentials answer. */
  async login(chunk: Record<string, unknown>, ip: string, missing: ApiError): Promise<EauthToken> {
    const { link } = this.context
    if (!link.masterRunning) throw new ApiError(503, 'the master is not available (its event bus is not reachable)')
    const credentials = credentialsOf(chunk, missing)
    const address = plainIp(ip)
    let attempt
    try {
      attempt = this.#throttle.begin(credentials.username, address)
    } catch (error) {
      if (error instanceof LoginRateLimitedError)
        throw new ApiError(429, error.message, { retryAfter: Math.max(1, Math.ceil(secondsFromMs(error.retryAfterMs))) })
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
}

/** salt-api's Login, Logout and Token: eauth credentials in, a master token out (header and session cookie). */
export async function authRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { link, settings, streams } = context
  const logins = new ApiLogins(context)

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
    const made = await logins.login(chunk, request.ip, refused)
    reply.header('X-Auth-Token', made.token)
    if (settings.enableSessions) {
      reply.setCookie(SESSION_COOKIE, made.token, {
        path: '/',
        httpOnly: true,
        sameSite: 'lax',
        secure: context.tls,
        expires: new Date(msFromSeconds(made.expire)),
      })
    }
    return respond(request, reply, 200, {
      return: [{ token: made.token, expire: made.expire, start: made.start, user: made.name, eauth: made.eauth, perms: made.perms ?? {} }],
    })
  })

  app.post('/logout', async (request, reply) => {
    const token = requireToken(context, request)
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
      const made = await logins.login(chunk, request.ip, new ApiError(400, 'Require "username", "password", and "eauth" params'))
      out.push({ start: made.start, token: made.token, expire: made.expire, name: made.name, eauth: made.eauth })
    }
    return respond(request, reply, 200, out)
  })
}
