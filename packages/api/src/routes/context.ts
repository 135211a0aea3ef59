import type { FastifyReply, FastifyRequest } from 'fastify'
import type { EauthToken } from '@brine/client'
import type { Logger } from '@brine/core'
import type { ApiMasterClient } from '../api-master-client.js'
import type { ApiSettings } from '../config.js'
import { ApiError } from '../errors.js'
import { runChunk, type Chunk } from '../lowstate.js'
import { chooseResponseType, serialize, type ResponseType } from '../negotiate.js'
import type { EventStreams } from '../sse.js'

/** The session cookie's name (salt-api's CherryPy sessions use `session_id`). */
export const SESSION_COOKIE = 'session_id'

/** What the API counts for `/stats`. */
export interface Counters {
  started: number
  requests: number
  errors: number
}

/** What every route group of one app shares: the master, the settings, the event streams and the app's own state. */
export interface ApiContext {
  link: ApiMasterClient
  settings: ApiSettings
  streams: EventStreams
  logger: Logger
  counters: Counters
  /**
   * The text of each JSON, YAML or plain body as it arrived: a webhook's `data.body` (salt-api's raw_body) must be
   * byte for byte what the sender signed, not a re-serialisation of the parsed value.
   */
  rawBodies: WeakMap<FastifyRequest, string>
  /** Whether the API serves TLS (its session cookie is then `Secure`). */
  tls: boolean
}

export const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
export const isHex = (value: unknown): value is string => typeof value === 'string' && /^[0-9a-fA-F]+$/.test(value)

/** Normalises `::ffff:10.0.0.1` to `10.0.0.1` for `authorized_ips`. */
export const plainIp = (ip: string): string => (ip.startsWith('::ffff:') ? ip.slice(7) : ip)

/** Answers `body` in the type the caller accepts (JSON unless YAML is preferred). */
export function respond(request: FastifyRequest, reply: FastifyReply, status: number, body: unknown): FastifyReply {
  const type: ResponseType = chooseResponseType(request.headers.accept) ?? 'application/json'
  // A Buffer, because fastify appends `; charset=utf-8` to a JSON type it serialises itself, and salt-api's
  // own tests compare the header with exactly `application/json`.
  return reply
    .code(status)
    .type(type)
    .send(Buffer.from(serialize(body, type)))
}

/** A request body as a list of chunks (salt-api's `lowdata_fmt`): a mapping becomes a one-chunk list. */
export function lowstate(body: unknown): unknown {
  if (isMap(body)) {
    const chunk = { ...body }
    if (chunk['arg'] !== undefined && !Array.isArray(chunk['arg'])) chunk['arg'] = [chunk['arg']]
    return [chunk]
  }
  return body
}

/** The first chunk of a body that carries credentials or settings (login, token, keys). */
export function firstChunk(body: unknown): Record<string, unknown> {
  const list = lowstate(body)
  const first = Array.isArray(list) ? list[0] : undefined
  if (!isMap(first)) throw new ApiError(400, 'The request body must be a mapping (or a list of one)')
  return first
}

/** The session's token: `X-Auth-Token`, else the session cookie (salt-api's salt_token tool). */
export function sessionToken(context: ApiContext, request: FastifyRequest): string | undefined {
  const header = request.headers['x-auth-token']
  const value = (Array.isArray(header) ? header[0] : header) ?? (context.settings.enableSessions ? request.cookies[SESSION_COOKIE] : undefined)
  return value === undefined || value === '' ? undefined : value
}

/** salt_auth: a token must be there (the master checks it when it is used). */
export function requireToken(context: ApiContext, request: FastifyRequest): string {
  const token = sessionToken(context, request)
  if (token === undefined) throw new ApiError(401, 'No authentication credentials given (log in at /login, then send X-Auth-Token or the session cookie)')
  if (!isHex(token)) throw new ApiError(401, 'Invalid token')
  return token
}

/** For endpoints that do not reach the master with the token: ask the master whether it is live. */
export async function liveToken(context: ApiContext, token: string): Promise<EauthToken> {
  const data = await context.link.getToken(token)
  if (data === undefined) throw new ApiError(401, 'Authentication failure of type "token" occurred: the token is unknown, expired or revoked.')
  return data
}

/** Runs lowstate `chunks` in order, each with `token` (and `client`, when given) filled in, for a caller at `address`. */
export async function exec(context: ApiContext, chunks: unknown, token: string | undefined, address: string, client?: string): Promise<unknown[]> {
  if (!Array.isArray(chunks)) throw new ApiError(400, 'Lowstates must be a list')
  const out: unknown[] = []
  for (const chunk of chunks) {
    if (!isMap(chunk)) throw new ApiError(400, 'Each lowstate chunk must be a mapping')
    const low: Chunk = { ...chunk }
    if (token !== undefined) low['token'] = token
    if (client !== undefined) low['client'] = client
    if (low['arg'] !== undefined && !Array.isArray(low['arg'])) low['arg'] = [low['arg']]
    out.push(await runChunk(low, context.link, context.settings, { client: 'api', address }))
  }
  return out
}
