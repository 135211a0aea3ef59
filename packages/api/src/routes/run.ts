import type { FastifyInstance } from 'fastify'
import { exec, lowstate, requireToken, respond, type ApiContext } from './context.js'

/** salt-api's root and Run: GET / says which clients are enabled; POST / (a session token) and /run (credentials in each chunk) run lowstate. */
export async function runRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  app.get('/', async (request, reply) => respond(request, reply, 200, { return: 'Welcome', clients: context.settings.enabledClients }))

  app.post('/', async (request, reply) => {
    const token = requireToken(context, request)
    return respond(request, reply, 200, { return: await exec(context, lowstate(request.body), token, request.ip) })
  })

  app.post('/run', async (request, reply) => respond(request, reply, 200, { return: await exec(context, lowstate(request.body), undefined, request.ip) }))
}
