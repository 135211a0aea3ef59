import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { parseListJob } from '@brine/protocol'
import { exec, isMap, lowstate, requireToken, respond, type ApiContext } from './context.js'

/** salt-api's Minions and Jobs: grains of the targeted minions, publishes without waiting (202), the job cache. */
export async function minionsJobsRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const minions = async (request: FastifyRequest<{ Params: { mid?: string } }>, reply: FastifyReply) => {
    const token = requireToken(context, request)
    const mid = request.params.mid
    return respond(request, reply, 200, {
      return: await exec(context, [{ client: 'local', tgt: mid === undefined || mid === '' ? '*' : mid, fun: 'grains.items' }], token, request.ip),
    })
  }
  app.get('/minions', minions)
  app.get('/minions/:mid', minions)

  app.post('/minions', async (request, reply) => {
    const token = requireToken(context, request)
    const jobs = (await exec(context, lowstate(request.body), token, request.ip, 'local_async')) as Array<Record<string, unknown>>
    return respond(request, reply, 202, {
      return: jobs,
      _links: { jobs: jobs.filter((job) => isMap(job) && typeof job['jid'] === 'string').map((job) => ({ href: `/jobs/${String(job['jid'])}` })) },
    })
  })

  const jobs = async (request: FastifyRequest<{ Params: { jid?: string } }>, reply: FastifyReply) => {
    const token = requireToken(context, request)
    const jid = request.params.jid
    if (jid === undefined || jid === '') {
      const [list] = await exec(context, [{ client: 'runner', fun: 'jobs.list_jobs' }], token, request.ip)
      return respond(request, reply, 200, { return: [list] })
    }
    const [info] = (await exec(context, [{ client: 'runner', fun: 'jobs.list_job', jid }], token, request.ip)) as Array<Record<string, unknown>>
    const returns: Record<string, unknown> = {}
    for (const [id, entry] of Object.entries(parseListJob(info).returns)) returns[id] = entry.return
    return respond(request, reply, 200, { info: [info], return: [returns] })
  }
  app.get('/jobs', jobs)
  app.get('/jobs/:jid', jobs)
}
