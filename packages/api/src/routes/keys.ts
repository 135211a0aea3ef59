import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { pack } from 'tar-stream'
import { ApiError } from '../errors.js'
import { exec, firstChunk, isMap, requireToken, respond, type ApiContext } from './context.js'

/** A tar archive of `files` (name, text, mode), as salt-api's POST /keys answers. */
async function tarOf(files: ReadonlyArray<[name: string, text: string, mode: number]>): Promise<Buffer> {
  const archive = pack()
  for (const [name, text, mode] of files) archive.entry({ name, mode, mtime: new Date() }, text)
  archive.finalize()
  const chunks: Buffer[] = []
  for await (const chunk of archive) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** salt-api's Keys: the key lists and one key's fingerprints; POST makes and accepts a key pair and answers it as a tar. */
export async function keysRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const keys = async (request: FastifyRequest<{ Params: { mid?: string } }>, reply: FastifyReply) => {
    const token = requireToken(context, request)
    const mid = request.params.mid
    const chunk = mid === undefined || mid === '' ? { client: 'wheel', fun: 'key.list_all' } : { client: 'wheel', fun: 'key.finger', match: mid }
    const [result] = (await exec(context, [chunk], token, request.ip)) as Array<{ data?: { return?: unknown } }>
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
    const [result] = (await exec(context, [chunk], undefined, request.ip)) as Array<{ data?: { return?: { pub?: string; priv?: string } } }>
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
}
