import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { WebSocket } from 'ws'
import { ApiError } from '../errors.js'
import { websocketSink } from '../ws.js'
import { isHex, liveToken, sessionToken, type ApiContext } from './context.js'

/** salt-api's Events: the master's bus as server-sent events, the token in a header, the session cookie or the query. */
export async function eventsRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { streams } = context
  app.get('/events', async (request: FastifyRequest<{ Querystring: { token?: string; salt_token?: string } }>, reply) => {
    const query = request.query
    const token = query.token ?? query.salt_token ?? sessionToken(context, request)
    if (token === undefined || !isHex(token)) throw new ApiError(401, 'No valid token given (X-Auth-Token, the session cookie, ?token= or ?salt_token=)')
    const data = await liveToken(context, token)
    const origin = request.headers.origin
    reply.hijack()
    try {
      streams.open(
        reply.raw,
        token,
        data.expire,
        origin === undefined ? {} : { 'Access-Control-Allow-Origin': origin, 'Access-Control-Allow-Credentials': 'true' },
      )
    } catch (error) {
      const status = error instanceof ApiError ? error.status : 500
      reply.raw.writeHead(status, { 'Content-Type': 'application/json' })
      reply.raw.end(JSON.stringify({ status, return: (error as Error).message }))
    }
  })
}

type WsRoute = { Params: { token?: string }; Querystring: Record<string, string | undefined> }

/**
 * salt-api's websocket event stream: the token in the path (salt-api's /ws/<token>, for browsers that cannot
 * send a header), else X-Auth-Token or the session cookie; checked before the upgrade, so a refusal is a 401.
 * The reader is one of EventStreams' own: the same bound, expiry, revocation and events_max_streams as /events.
 */
export async function websocketRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { streams } = context
  const wsTokens = new WeakMap<FastifyRequest, { token: string; expire: number }>()
  const wsAuth = async (request: FastifyRequest<WsRoute>): Promise<void> => {
    const token = request.params.token ?? sessionToken(context, request)
    if (token === undefined || !isHex(token)) throw new ApiError(401, 'No valid token given (/ws/<token>, X-Auth-Token or the session cookie)')
    const data = await liveToken(context, token)
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
}
