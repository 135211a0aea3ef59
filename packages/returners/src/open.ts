import { type JobCache } from '@brine/common'
import { ConfigError, timeoutsFromConfig, type MasterConfig } from '@brine/config'
import type { Logger } from '@brine/core'
import { LocalJobCache } from './local-cache.js'
import { PostgresJobCache, type PostgresConnection } from './postgres-cache.js'

/** The `master_job_cache` values Brine knows. */
export const JOB_CACHE_BACKENDS = ['local_cache', 'postgres'] as const
export type JobCacheBackend = (typeof JOB_CACHE_BACKENDS)[number]

export interface OpenJobCacheOptions {
  logger?: Logger
  /** The master's clock, ms since the epoch (default Date.now): `local_cache` refuses jids dated beyond `clock_skew` of it. */
  now?: () => number
}

/**
 * The job cache `master_job_cache` names (default `local_cache` under `cachedir`), opened: directories
 * or tables created. Throws ConfigError naming the key for an unknown backend or missing settings.
 */
export async function openJobCache(opts: MasterConfig, { logger, now }: OpenJobCacheOptions = {}): Promise<JobCache> {
  const backend = opts.master_job_cache ?? 'local_cache'
  switch (backend) {
    case 'local_cache': {
      const cachedir = opts.cachedir
      if (typeof cachedir !== 'string' || cachedir === '') {
        throw new ConfigError('cachedir must be set for master_job_cache: local_cache', { key: 'cachedir' })
      }
      // In the background: a restarted master answers its minions while a large log is indexed.
      // A jid dated beyond clock_skew never opens a day file (the master refuses such returns first).
      const maxFutureMs = timeoutsFromConfig(opts).clockSkewMs
      return new LocalJobCache({
        cachedir,
        logger: logger?.child('local_cache'),
        indexInBackground: true,
        maxFutureMs,
        ...(now === undefined ? {} : { now }),
      }).open()
    }
    case 'postgres':
      return new PostgresJobCache({ connection: postgresConnection(opts), logger: logger?.child('postgres') }).open()
    default:
      throw new ConfigError(`master_job_cache must be one of ${JOB_CACHE_BACKENDS.join(', ')}, got '${String(backend)}'`, { key: 'master_job_cache' })
  }
}

/** Salt's `postgres.*` keys (or `postgres.url`) from a master config, checked. */
export function postgresConnection(opts: MasterConfig): PostgresConnection {
  const url = opts['postgres.url']
  if (typeof url === 'string' && url !== '') {
    if (!/^postgres(ql)?:\/\//.test(url)) throw new ConfigError(`postgres.url must start with postgres:// or postgresql://`, { key: 'postgres.url' })
    return { url }
  }
  const connection: PostgresConnection = {
    host: opts['postgres.host'],
    port: opts['postgres.port'],
    db: opts['postgres.db'],
    user: opts['postgres.user'],
    pass: opts['postgres.pass'] ?? '',
  }
  for (const key of ['host', 'db', 'user'] as const) {
    const value = connection[key]
    if (typeof value !== 'string' || value === '') {
      throw new ConfigError(`master_job_cache: postgres needs postgres.${key} (or postgres.url)`, { key: `postgres.${key}` })
    }
  }
  if (typeof connection.port !== 'number' || !Number.isInteger(connection.port) || connection.port < 1 || connection.port > 65535) {
    throw new ConfigError(`postgres.port must be a port number 1..65535, got ${String(connection.port)}`, { key: 'postgres.port' })
  }
  return connection
}
