import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { tagProblem, tags } from '@brine/protocol'
import { ApiError } from '../errors.js'
import { liveToken, plainIp, requireToken, respond, type ApiContext } from './context.js'

/** A request's headers as CherryPy names them (`X-Github-Event`), without its credentials. */
function hookHeaders(request: FastifyRequest): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(request.headers)) {
    if (name === 'x-auth-token' || name === 'cookie') continue
    headers[name.replace(/(^|-)([a-z])/g, (_match, dash: string, letter: string) => `${dash}${letter.toUpperCase()}`)] = Array.isArray(value)
      ? value.join(', ')
      : String(value)
  }
  // CherryPy adds the peer's address as a request header, and reactors read it there; set last, so a sender's
  // own `Remote-Addr` header cannot stand in for its address.
  headers['Remote-Addr'] = plainIp(request.ip)
  return headers
}

/** salt-api's Webhook: a POST under `webhook_url` fires `salt/netapi/hook/<path>` with the body, the form fields and the headers. */
export async function hookRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { link, settings } = context
  const hook = async (request: FastifyRequest<{ Params: { '*'?: string } }>, reply: FastifyReply) => {
    if (!settings.webhookDisableAuth) await liveToken(context, requireToken(context, request))
    const path = (request.params['*'] ?? '').replace(/^\/+|\/+$/g, '')
    // The path becomes the event's tag: a newline or tab in it would forge lines for every reader of the bus.
    const problem = tagProblem(tags.netapiHook(path))
    if (problem !== undefined) throw new ApiError(400, `the hook path ${JSON.stringify(path.slice(0, 120))} cannot be an event tag: it ${problem}`)
    // Salt's `body` is the raw text of a JSON, YAML or plain body as sent, and '' for a form (its fields are in `post`).
    const raw = context.rawBodies.get(request) ?? ''
    await link.call(() => link.eauth.fireEvent(tags.netapiHook(path), { body: raw, post: request.body ?? {}, headers: hookHeaders(request) }), 'hook')
    return respond(request, reply, 200, { success: true })
  }
  const hookBase = settings.webhookUrl.replace(/\/+$/, '')
  app.post(hookBase === '' ? '/' : hookBase, hook)
  app.post(`${hookBase}/*`, hook)
}
