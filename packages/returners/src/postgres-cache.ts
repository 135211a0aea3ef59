import type pg from 'pg'
import { selectJobs, type JobCache, type JobRecord, type JobSummary, type ListJobsFilter } from '@brine/common'
import { jidToDate, type ReturnLoad } from '@brine/protocol'
import type { Logger } from '@brine/core'
import { JobCacheError } from './errors.js'
import { fromJsonValue, toJsonValue } from './json.js'

/** Where the PostgreSQL job cache connects: Salt's `postgres.*` keys, or one URL. */
export interface PostgresConnection {
  /** `postgres://user:pass@host:port/db`; when set, the other fields are ignored. */
  url?: string | null
  host?: string
  port?: number
  db?: string
  user?: string
  pass?: string
}

export interface PostgresJobCacheOptions {
  connection: PostgresConnection
  /** Schema holding the tables (default `public`); tests use a throwaway one. */
  schema?: string
  /** Connections in the pool (default 5). */
  poolSize?: number
  /** How long to wait for a connection before failing (default 10 s). */
  connectTimeoutMs?: number
  logger?: Logger
}

/** Any constant: every Brine master serialises schema creation on this advisory lock. */
const SCHEMA_LOCK = 0x6272696e65 // "brine"
/** Rows fetched per round trip when listJobs filters in JS (globs, user). */
const PAGE = 500

/**
 * The job cache in PostgreSQL (`master_job_cache: postgres`), shared by several masters (a syndic tree's
 * top and its syndic nodes' masters): a jid saved by several keeps the first load and the union of their
 * expected minions. Tables follow
 * Salt's pgjsonb returner: `jids` (one row per job, its load and expected minions) and `salt_returns`
 * (one row per (jid, id), primary key on both, so a return written twice, by any master, is stored
 * once: `INSERT … ON CONFLICT DO NOTHING RETURNING 1` tells the writer whether it was first).
 * Loads are stored as jsonb; see json.ts for how binary and NUL strings are kept.
 */
export class PostgresJobCache implements JobCache {
  /** Made at the first query: the driver loads only in a master that uses this cache, not in every one that could. */
  #pool: Promise<pg.Pool> | undefined
  readonly #poolConfig: pg.PoolConfig
  readonly #schema: string
  readonly #logger: Logger | undefined
  readonly #jids: string
  readonly #returns: string
  readonly #where: string

  constructor(options: PostgresJobCacheOptions) {
    const { connection } = options
    this.#logger = options.logger
    this.#schema = options.schema ?? 'public'
    if (!/^[a-z_][a-z0-9_]*$/.test(this.#schema))
      throw new JobCacheError('postgres', `schema name '${this.#schema}' must be lower-case letters, digits and _`, { schema: this.#schema })
    this.#jids = `"${this.#schema}".jids`
    this.#returns = `"${this.#schema}".salt_returns`
    const base = { max: options.poolSize ?? 5, connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000 }
    const url = connection.url ?? undefined
    this.#where =
      url !== undefined
        ? redactUrl(url)
        : `postgres://${connection.user ?? ''}@${connection.host ?? 'localhost'}:${connection.port ?? 5432}/${connection.db ?? ''}`
    this.#poolConfig =
      url !== undefined
        ? { ...base, connectionString: url }
        : { ...base, host: connection.host, port: connection.port, database: connection.db, user: connection.user, password: connection.pass }
  }

  #poolOf(): Promise<pg.Pool> {
    this.#pool ??= import('pg').then(({ default: driver }) => {
      const pool = new driver.Pool(this.#poolConfig)
      // An idle connection the server drops must not crash the master; the next query reconnects.
      pool.on('error', (error) => this.#logger?.warning(`postgres job cache: idle connection to ${this.#where} failed: ${error.message}`))
      return pool
    })
    return this.#pool
  }

  /** Where this cache connects, without the password. */
  get where(): string {
    return this.#where
  }

  /** Connects and creates the schema and tables if missing; safe when several masters start at once. */
  async open(): Promise<this> {
    await this.#transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK])
      await client.query(`CREATE SCHEMA IF NOT EXISTS "${this.#schema}"`)
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.#jids} (
          jid varchar(255) PRIMARY KEY,
          load jsonb NOT NULL,
          minions jsonb NOT NULL DEFAULT '[]',
          started timestamptz NOT NULL)`,
      )
      await client.query(`CREATE INDEX IF NOT EXISTS jids_started_idx ON ${this.#jids} (started)`)
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.#returns} (
          jid varchar(255) NOT NULL,
          id varchar(255) NOT NULL,
          fun varchar(255) NOT NULL,
          "return" jsonb,
          success boolean,
          full_ret jsonb NOT NULL,
          alter_time timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (jid, id))`,
      )
    })
    return this
  }

  async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[]): Promise<void> {
    const started = jidToDate(jid)
    // Several masters of a syndic tree save the same jid: the first real load stays (a placeholder `{}` from an early
    // return is replaced) and the expected minions are the union of what each master expected.
    await this.#query(
      `INSERT INTO ${this.#jids} AS j (jid, load, minions, started) VALUES ($1, $2, $3, $4)
       ON CONFLICT (jid) DO UPDATE SET
         load = CASE WHEN j.load = '{}'::jsonb THEN EXCLUDED.load ELSE j.load END,
         minions = (SELECT coalesce(jsonb_agg(DISTINCT m ORDER BY m), '[]'::jsonb) FROM jsonb_array_elements(j.minions || EXCLUDED.minions) AS m)`,
      [jid, json(toJsonValue(load, 'load')), json(toJsonValue([...minions], 'minions')), started],
    )
  }

  async saveReturn(jid: string, id: string, ret: ReturnLoad): Promise<boolean> {
    const started = jidToDate(jid)
    const full = toJsonValue(ret, 'return') as Record<string, unknown>
    // One statement: a placeholder job row (so a return for a job this master never saw is listed
    // and pruned like any other) and the return itself; only the first writer gets a row back.
    const result = await this.#query(
      `WITH job AS (
         INSERT INTO ${this.#jids} (jid, load, minions, started) VALUES ($1, '{}', '[]', $7) ON CONFLICT (jid) DO NOTHING)
       INSERT INTO ${this.#returns} (jid, id, fun, "return", success, full_ret) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (jid, id) DO NOTHING RETURNING 1`,
      [jid, id, ret.fun, json(full['return'] ?? null), ret.success, json(full), started],
    )
    return result.rowCount === 1
  }

  async getJob(jid: string): Promise<JobRecord | undefined> {
    const job = await this.#query(`SELECT load, minions FROM ${this.#jids} WHERE jid = $1`, [jid])
    const row = job.rows[0] as { load: unknown; minions: unknown } | undefined
    if (row === undefined) return undefined
    const rets = await this.#query(`SELECT id, full_ret FROM ${this.#returns} WHERE jid = $1 ORDER BY id`, [jid])
    const returns: Record<string, ReturnLoad> = {}
    for (const r of rets.rows as { id: string; full_ret: unknown }[]) returns[r.id] = fromJsonValue(r.full_ret) as ReturnLoad
    return { jid, load: fromJsonValue(row.load) as Record<string, unknown>, minions: fromJsonValue(row.minions) as string[], returns }
  }

  async listJobs(filter: ListJobsFilter = {}): Promise<JobSummary[]> {
    const { limit, ...rest } = filter
    // Time range and order in SQL; globs and user with selectJobs, so every backend filters alike.
    const inJs = rest.fun !== undefined || rest.target !== undefined || rest.user !== undefined
    const found: JobSummary[] = []
    let below: string | undefined
    for (;;) {
      const params: unknown[] = []
      const where: string[] = []
      if (rest.startTime !== undefined) where.push(`started >= $${params.push(rest.startTime)}`)
      if (rest.endTime !== undefined) where.push(`started <= $${params.push(rest.endTime)}`)
      if (below !== undefined) where.push(`jid < $${params.push(below)}`)
      const page = inJs || limit === undefined ? PAGE : Math.min(PAGE, limit - found.length)
      const sql = `SELECT jid, load, minions FROM ${this.#jids} ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY jid DESC LIMIT ${page}`
      const rows = (await this.#query(sql, params)).rows as { jid: string; load: unknown; minions: unknown }[]
      const jobs = rows.map((r) => ({ jid: r.jid, load: fromJsonValue(r.load) as Record<string, unknown>, minions: fromJsonValue(r.minions) as string[] }))
      found.push(...selectJobs(jobs, rest))
      if (rows.length < page || (limit !== undefined && found.length >= limit)) break
      below = rows[rows.length - 1]?.jid
    }
    return limit === undefined ? found : found.slice(0, limit)
  }

  async prune(before: Date): Promise<number> {
    const result = await this.#query(
      `WITH gone AS (DELETE FROM ${this.#jids} WHERE started < $1 RETURNING jid),
            rets AS (DELETE FROM ${this.#returns} r USING gone WHERE r.jid = gone.jid)
       SELECT count(*)::int AS n FROM gone`,
      [before],
    )
    const removed = (result.rows[0] as { n: number } | undefined)?.n ?? 0
    if (removed > 0) this.#logger?.debug(`pruned ${removed} job(s) started before ${before.toISOString()}`)
    return removed
  }

  async newestJid(): Promise<string | undefined> {
    const result = await this.#query(`SELECT max(jid) AS jid FROM ${this.#jids}`, [])
    const jid = (result.rows[0] as { jid: string | null } | undefined)?.jid
    return jid ?? undefined
  }

  async close(): Promise<void> {
    await (await this.#pool)?.end()
  }

  async #query(sql: string, params: unknown[]): Promise<pg.QueryResult> {
    try {
      return await (await this.#poolOf()).query(sql, params)
    } catch (error) {
      throw this.#wrap(error)
    }
  }

  async #transaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    let client: pg.PoolClient
    try {
      client = await (await this.#poolOf()).connect()
    } catch (error) {
      throw this.#wrap(error)
    }
    try {
      await client.query('BEGIN')
      await work(client)
      await client.query('COMMIT')
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined)
      throw this.#wrap(error)
    } finally {
      client.release()
    }
  }

  #wrap(error: unknown): Error {
    if (error instanceof JobCacheError) return error
    const message = error instanceof Error ? error.message || String((error as NodeJS.ErrnoException).code ?? error.name) : String(error)
    return new JobCacheError('postgres', `${this.#where}: ${message}`, { address: this.#where }, { cause: error })
  }
}

/** jsonb parameters go as JSON text; pg would send a JS array as a PostgreSQL array. */
function json(value: unknown): string {
  return JSON.stringify(value)
}

function redactUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparsable postgres.url)'
  }
}
