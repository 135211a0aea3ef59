import type { FastifyInstance } from 'fastify'
import { secondsFromMs } from '@brine/config'
import { liveToken, requireToken, respond, type ApiContext } from './context.js'

/** salt-api's Stats: uptime, request and error counts, the master's state, the event streams and memory. */
export async function statsRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { counters, link, settings, streams } = context
  app.get('/stats', async (request, reply) => {
    if (!settings.statsDisableAuth) await liveToken(context, requireToken(context, request))
    const memory = process.memoryUsage()
    return respond(request, reply, 200, {
      'Brine API': {
        'Uptime (s)': secondsFromMs(Date.now() - counters.started),
        Requests: counters.requests,
        Errors: counters.errors,
        'Master running': link.masterRunning,
        Events: streams.stats(),
        Memory: { rss: memory.rss, heapUsed: memory.heapUsed, external: memory.external, arrayBuffers: memory.arrayBuffers },
      },
    })
  })
}
