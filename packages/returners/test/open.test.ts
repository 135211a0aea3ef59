import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
