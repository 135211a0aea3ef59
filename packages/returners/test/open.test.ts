import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import type { MasterConfig } from '@brine/config'
import { LocalJobCache, openJobCache, postgresConnection } from '../src/index.js'

const config = (values: Record<string, unknown>): MasterConfig => values as MasterConfig

describe('openJobCache', () => {
  it('opens local_cache under cachedir by default', async () => {
    const cachedir = await mkdtemp(join(tmpdir(), 'brine-open-'))
    try {
      const cache = await openJobCache(config({ cachedir }))
      expect(cache).toBeInstanceOf(LocalJobCache)
      await cache.close()
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  // The built package, as a master loads it: every master imports it, few use PostgreSQL.
  it('loads the PostgreSQL driver only for a postgres cache, at its first query, not when the package loads or a local_cache opens', async () => {
    const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url))
    if (!existsSync(dist)) throw new Error(`${dist} does not exist: run \`npm run build\` first`)
    const root = await mkdtemp(join(tmpdir(), 'brine-open-'))
    try {
      const hook = join(root, 'hook.mjs')
      const list = join(root, 'loaded.txt')
      await writeFile(
        hook,
        `import { registerHooks } from 'node:module'\nimport { appendFileSync } from 'node:fs'\n` +
          `registerHooks({ load(url, context, next) { appendFileSync(${JSON.stringify(list)}, url + '\\n'); return next(url, context) } })\n`,
      )
      const loads = async (script: string): Promise<string[]> => {
        await rm(list, { force: true })
        const run = spawnSync(process.execPath, ['--import', hook, '--input-type=module', '-e', script], { encoding: 'utf8' })
        expect(run.status, run.stderr).toBe(0)
        return (await readFile(list, 'utf8')).trim().split('\n')
      }
      const driver = (urls: string[]): string[] => urls.filter((url) => /\/node_modules\/pg(-[a-z]+)?\//.test(url))
      const local = await loads(
        `const { openJobCache } = await import(${JSON.stringify(dist)}); await (await openJobCache({ cachedir: ${JSON.stringify(root)} })).close()`,
      )
      expect(local.some((url) => url.endsWith('/packages/returners/dist/index.js'))).toBe(true)
      expect(driver(local)).toEqual([])
      // A postgres cache loads it when it first queries (the server need not be there: the connection fails after).
      const postgres = await loads(
        `const { PostgresJobCache } = await import(${JSON.stringify(dist)}); ` +
          `const cache = new PostgresJobCache({ connection: { url: 'postgres://u@127.0.0.1:1/none' }, connectTimeoutMs: 2000 }); ` +
          `await cache.open().catch(() => {}); await cache.close()`,
      )
      expect(driver(postgres).length).toBeGreaterThan(0)
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })

  it('names the key for an unknown backend or missing settings', async () => {
    await expect(openJobCache(config({ master_job_cache: 'mysql', cachedir: '/x' }))).rejects.toMatchObject({ name: 'ConfigError', key: 'master_job_cache' })
    await expect(openJobCache(config({ master_job_cache: 'local_cache' }))).rejects.toMatchObject({ name: 'ConfigError', key: 'cachedir' })
    expect(() => postgresConnection(config({ 'postgres.host': 'db', 'postgres.port': 5432, 'postgres.user': 'u' }))).toThrow(/postgres\.db/)
    expect(() => postgresConnection(config({ 'postgres.url': 'mysql://x' }))).toThrow(/postgres\.url/)
    expect(
      postgresConnection(config({ 'postgres.host': 'db', 'postgres.port': 5433, 'postgres.db': 'salt', 'postgres.user': 'u', 'postgres.pass': 'p' })),
    ).toEqual({
      host: 'db',
      port: 5433,
      db: 'salt',
      user: 'u',
      pass: 'p',
    })
  })
})
