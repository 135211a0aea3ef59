import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openJobCache, PostgresJobCache } from '../src/index.js'
import { jidAt, jobCacheContract, ret } from './contract.js'

// A real server, set up by `npm run postgres` (scripts/ensure-postgres.sh). Missing server = failure, never a skip.
const URL = process.env['BRINE_TEST_PG_URL'] ?? 'postgres://brine:brine@127.0.0.1:5432/brine_test'
const schemas: string[] = []

function freshSchema(): string {
  const schema = `brine_test_${process.pid}_${randomBytes(4).toString('hex')}`
  schemas.push(schema)
  return schema
}

/** Set when the server does not answer: every test that needs it then fails with this message. */
let serverProblem: string | undefined

async function cacheIn(schema: string): Promise<PostgresJobCache> {
  if (serverProblem !== undefined) throw new Error(serverProblem)
  return new PostgresJobCache({ connection: { url: URL }, schema, connectTimeoutMs: 5_000 }).open()
}

beforeAll(async () => {
  const client = new pg.Client({ connectionString: URL, connectionTimeoutMillis: 5_000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
  } catch (error) {
    serverProblem =
      `PostgreSQL tests need a server at ${URL} (BRINE_TEST_PG_URL): ${(error as Error).message || String(error)}. ` +
      'Run `sudo bash scripts/ensure-postgres.sh` (npm test does) to install and start one.'
  } finally {
    await client.end().catch(() => undefined)
  }
})

afterAll(async () => {
  if (schemas.length === 0 || serverProblem !== undefined) return
  const client = new pg.Client({ connectionString: URL, connectionTimeoutMillis: 5_000 })
  await client.connect()
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
})

jobCacheContract(
  'PostgresJobCache',
  async () => {
    const schema = freshSchema()
    const cache = await cacheIn(schema)
    return { cache, another: () => cacheIn(schema), cleanup: () => cache.close() }
  },
  { sharedStore: true },
)

describe('PostgresJobCache', () => {
  it('creates the schema when several masters start at once', async () => {
    const schema = freshSchema()
    const caches = await Promise.all([cacheIn(schema), cacheIn(schema), cacheIn(schema)])
    try {
      const jid = jidAt('2024-07-01T00:00:00Z', 1)
      expect(await caches[0]?.saveReturn(jid, 'm', ret(jid, 'm'))).toBe(true)
      expect(await caches[2]?.saveReturn(jid, 'm', ret(jid, 'm'))).toBe(false)
    } finally {
      await Promise.all(caches.map((c) => c.close()))
    }
  })

  it('keeps the first load and unites the expected minions when several masters of a syndic tree save the same jid', async () => {
    const schema = freshSchema()
    const [top, lower] = await Promise.all([cacheIn(schema), cacheIn(schema)])
    try {
      const jid = jidAt('2024-07-02T00:00:00Z', 1)
      // A return that arrives before any job record leaves a placeholder load: the first real load replaces it.
      expect(await lower!.saveReturn(jid, 's1-web', ret(jid, 's1-web'))).toBe(true)
      await top!.saveJob(jid, { jid, fun: 'test.ping', tgt: '*', user: 'root' }, ['direct1'])
      await lower!.saveJob(jid, { jid, fun: 'test.ping', tgt: '*', user: 'root', to: 4 }, ['s1-web', 's1-db', 'direct1'])
      const job = await top!.getJob(jid)
      expect(job?.load).toEqual({ jid, fun: 'test.ping', tgt: '*', user: 'root' })
      expect(job?.minions).toEqual(['direct1', 's1-db', 's1-web'])
      expect(Object.keys(job?.returns ?? {})).toEqual(['s1-web'])
    } finally {
      await Promise.all([top!.close(), lower!.close()])
    }
  })

  it('is what openJobCache returns for master_job_cache: postgres, from postgres.url or the split keys', async () => {
    const parsed = new globalThis.URL(URL)
    const split = {
      master_job_cache: 'postgres',
      'postgres.host': parsed.hostname,
      'postgres.port': Number(parsed.port || 5432),
      'postgres.db': parsed.pathname.slice(1),
      'postgres.user': decodeURIComponent(parsed.username),
      'postgres.pass': decodeURIComponent(parsed.password),
      'postgres.url': null,
    }
    if (serverProblem !== undefined) throw new Error(serverProblem)
    for (const opts of [split, { master_job_cache: 'postgres', 'postgres.url': URL }]) {
      const cache = await openJobCache(opts as never)
      try {
        expect(cache).toBeInstanceOf(PostgresJobCache)
        expect(await cache.getJob(jidAt('2024-07-02T00:00:00Z', 1))).toBeUndefined()
      } finally {
        await cache.close()
      }
    }
  })

  it('fails with an error naming the server when it cannot connect', async () => {
    const cache = new PostgresJobCache({ connection: { url: 'postgres://brine:secret@127.0.0.1:1/none' }, connectTimeoutMs: 2_000 })
    try {
      const error = await cache.open().then(
        () => undefined,
        (e: unknown) => e as Error,
      )
      expect(error?.name).toBe('JobCacheError')
      expect(error?.message).toContain('127.0.0.1:1')
      expect(error?.message).not.toContain('secret')
    } finally {
      await cache.close()
    }
  })
})
