import { randomBytes } from 'node:crypto'
import { constants, promises as fs } from 'node:fs'
import { join } from 'node:path'
import { isJid, jidToDate, selectJobs, type JobCache, type JobRecord, type JobSummary, type ListJobsFilter, type ReturnLoad } from '@brine/common'
import { validateMinionId } from '@brine/crypt'
import { decode, encode, type Logger } from '@brine/transport'
import { JobCacheError } from './errors.js'

/** Returns can be far larger than a request frame; the cache stores whatever the master accepted. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER
const DAY_DIR = /^\d{8}$/
/** Jids become directory names: Salt's 20 digits, optionally `_suffix` of safe characters. */
const SAFE_JID = /^\d{20}(?:_[A-Za-z0-9.-]+)?$/
const LOAD_FILE = 'load.msgpack'
const MINIONS_FILE = 'minions.msgpack'
const RETURNS_DIR = 'returns'
const TMP_DIR = '.tmp'
/** Temp files this old were left by a process killed mid-write; younger ones may belong to a live writer. */
const STALE_TMP_MS = 60 * 60 * 1000

export interface LocalJobCacheOptions {
  /** Salt's `cachedir`; jobs live under `<cachedir>/jobs`. */
  cachedir: string
  logger?: Logger
}

/**
 * Salt's `local_cache` in spirit: one directory per job under `<cachedir>/jobs/<YYYYMMDD>/<jid>/`
 * holding `load.msgpack`, `minions.msgpack` and `returns/<minion id>` (msgpack). The file name is the
 * bare id because ids may be 255 bytes, a file name's limit.
 *
 * A return is written to a temp file, fsync'd, hard-linked into place (link fails with EEXIST when
 * the return is already there, which is how two masters sharing the directory store it once), and the
 * directory is fsync'd before saveReturn resolves: what it resolved for survives kill -9 and power loss.
 * Directory fsyncs are shared (group commit): every link made while one fsync runs waits for the next.
 */
export class LocalJobCache implements JobCache {
  readonly root: string
  readonly #logger: Logger | undefined
  readonly #syncer = new DirSyncer()
  /** Directories this process has made (or seen) and made durable in their parent. */
  readonly #known = new Set<string>()
  #closed = false

  constructor(options: LocalJobCacheOptions) {
    this.root = join(options.cachedir, 'jobs')
    this.#logger = options.logger
  }

  /** Creates the directory tree and removes temp files left by a killed writer. */
  async open(): Promise<this> {
    await this.#ensureDir(this.root, undefined)
    const tmp = join(this.root, TMP_DIR)
    await this.#ensureDir(tmp, this.root)
    const cutoff = Date.now() - STALE_TMP_MS
    for (const name of await fs.readdir(tmp)) {
      const path = join(tmp, name)
      const stat = await fs.stat(path).catch(() => undefined)
      if (stat !== undefined && stat.mtimeMs < cutoff) await fs.rm(path, { force: true })
    }
    return this
  }

  async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[]): Promise<void> {
    this.#checkOpen()
    const dir = await this.#jobDir(jid, true)
    await this.#replaceFile(join(dir, LOAD_FILE), encode(load, NO_LIMIT))
    await this.#replaceFile(join(dir, MINIONS_FILE), encode([...minions], NO_LIMIT))
    await this.#syncer.sync(dir)
  }

  async saveReturn(jid: string, id: string, ret: ReturnLoad): Promise<boolean> {
    this.#checkOpen()
    validateMinionId(id)
    const body = encode(ret, NO_LIMIT)
    return this.#retryOnVanishedDir(async () => {
      const returns = join(await this.#jobDir(jid, true), RETURNS_DIR)
      await this.#ensureDir(returns, join(returns, '..'))
      const tmp = await this.#writeTemp(body)
      let first = true
      try {
        await fs.link(tmp, join(returns, id))
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        first = false
      } finally {
        await fs.rm(tmp, { force: true })
      }
      // Also for a duplicate: "already stored" must mean durable, whoever linked it.
      await this.#syncer.sync(returns)
      return first
    })
  }

  async getJob(jid: string): Promise<JobRecord | undefined> {
    this.#checkOpen()
    const dir = await this.#jobDir(jid, false)
    const names = await readdirIfExists(dir)
    if (names === undefined) return undefined
    const job = await this.#readJob(jid, dir)
    const returns: Record<string, ReturnLoad> = {}
    const returnsDir = join(dir, RETURNS_DIR)
    for (const id of (await readdirIfExists(returnsDir)) ?? []) {
      returns[id] = (await this.#readMsgpack(join(returnsDir, id))) as ReturnLoad
    }
    return { ...job, returns }
  }

  async listJobs(filter: ListJobsFilter = {}): Promise<JobSummary[]> {
    this.#checkOpen()
    const first = filter.startTime === undefined ? undefined : dayName(filter.startTime)
    const last = filter.endTime === undefined ? undefined : dayName(filter.endTime)
    const found: JobSummary[] = []
    const { limit, ...rest } = filter
    for (const day of await this.#days()) {
      if ((last !== undefined && day > last) || (first !== undefined && day < first)) continue
      const dayDir = join(this.root, day)
      const jobs: JobSummary[] = []
      for (const jid of (await readdirIfExists(dayDir)) ?? []) {
        if (!SAFE_JID.test(jid)) continue
        const job = await this.#readJob(jid, join(dayDir, jid)).catch((error: unknown) => {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined // pruned meanwhile
          throw error
        })
        if (job !== undefined) jobs.push(job)
      }
      found.push(...selectJobs(jobs, rest))
      // Days are newest first and selectJobs sorts within a day, so the first `limit` are final.
      if (limit !== undefined && found.length >= limit) break
    }
    return limit === undefined ? found : found.slice(0, limit)
  }

  async prune(before: Date): Promise<number> {
    this.#checkOpen()
    const boundary = dayName(before)
    let removed = 0
    for (const day of await this.#days()) {
      if (day > boundary) continue
      const dayDir = join(this.root, day)
      const jids = ((await readdirIfExists(dayDir)) ?? []).filter((name) => SAFE_JID.test(name))
      if (day < boundary) {
        await fs.rm(dayDir, { recursive: true, force: true })
        removed += jids.length
        continue
      }
      for (const jid of jids) {
        if (jidToDate(jid) < before) {
          await fs.rm(join(dayDir, jid), { recursive: true, force: true })
          removed++
        }
      }
    }
    // Removed directories must be made again (and made durable) by the next write.
    this.#known.clear()
    await this.#syncer.sync(this.root)
    if (removed > 0) this.#logger?.debug(`pruned ${removed} job(s) started before ${before.toISOString()}`)
    return removed
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#syncer.idle()
  }

  #checkOpen(): void {
    if (this.#closed) throw new JobCacheError('local_cache', 'used after close()', { dir: this.root })
  }

  async #days(): Promise<string[]> {
    const names = (await readdirIfExists(this.root)) ?? []
    return names.filter((name) => DAY_DIR.test(name)).sort().reverse()
  }

  async #jobDir(jid: string, create: boolean): Promise<string> {
    if (!isJid(jid) || !SAFE_JID.test(jid)) throw new JobCacheError('local_cache', `'${jid}' is not a jid`, { jid })
    const dayDir = join(this.root, jid.slice(0, 8))
    const dir = join(dayDir, jid)
    if (create) {
      await this.#ensureDir(this.root, undefined)
      await this.#ensureDir(dayDir, this.root)
      await this.#ensureDir(dir, dayDir)
    }
    return dir
  }

  async #readJob(jid: string, dir: string): Promise<JobSummary> {
    const load = (await this.#readMsgpack(join(dir, LOAD_FILE), true)) as Record<string, unknown> | undefined
    const minions = (await this.#readMsgpack(join(dir, MINIONS_FILE), true)) as string[] | undefined
    // A job dir that vanished entirely (pruned) reads as ENOENT from the caller's readdir.
    if (load === undefined && minions === undefined) await fs.access(dir)
    return { jid, load: load ?? {}, minions: minions ?? [] }
  }

  async #readMsgpack(path: string, optional = false): Promise<unknown> {
    let bytes: Buffer
    try {
      bytes = await fs.readFile(path)
    } catch (error) {
      if (optional && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw error
    }
    try {
      return decode(bytes)
    } catch (error) {
      throw new JobCacheError('local_cache', `${path} is not a msgpack value`, { file: path }, { cause: error })
    }
  }

  async #ensureDir(dir: string, parent: string | undefined): Promise<void> {
    if (this.#known.has(dir)) return
    try {
      await fs.mkdir(dir, { mode: 0o700, recursive: parent === undefined })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    // Made by us or by another process that may not have synced yet: either way the entry must be durable.
    if (parent !== undefined) await this.#syncer.sync(parent)
    this.#known.add(dir)
  }

  /** A new file with `body`, fsync'd, 0600, under the temp dir; the caller links or renames it. */
  async #writeTemp(body: Uint8Array): Promise<string> {
    const tmpDir = join(this.root, TMP_DIR)
    await this.#ensureDir(tmpDir, this.root)
    const path = join(tmpDir, `${process.pid}-${randomBytes(8).toString('hex')}`)
    const handle = await fs.open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    try {
      await handle.writeFile(body)
      await handle.datasync()
    } finally {
      await handle.close()
    }
    return path
  }

  /** Atomically replaces `path` (rename); the caller syncs the directory. */
  async #replaceFile(path: string, body: Uint8Array): Promise<void> {
    const tmp = await this.#writeTemp(body)
    try {
      await fs.rename(tmp, path)
    } catch (error) {
      await fs.rm(tmp, { force: true })
      throw error
    }
  }

  /** Another process's prune may remove a directory this one remembers; forget and retry once. */
  async #retryOnVanishedDir<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work()
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      this.#known.clear()
      return work()
    }
  }
}

/**
 * Group commit for directory fsyncs: a caller whose link finished while an fsync of the same
 * directory runs waits for the next one (that fsync may have started before its link); every caller
 * arriving meanwhile shares that next fsync.
 */
class DirSyncer {
  readonly #dirs = new Map<string, { running: Promise<void> | undefined; queued: Promise<void> | undefined }>()

  sync(dir: string): Promise<void> {
    let state = this.#dirs.get(dir)
    if (state === undefined) {
      state = { running: undefined, queued: undefined }
      this.#dirs.set(dir, state)
    }
    if (state.queued !== undefined) return state.queued
    const slot = state
    const queued = (slot.running ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => {
        slot.queued = undefined
        const run = fsyncDir(dir)
        slot.running = run
        void run
          .catch(() => undefined)
          .then(() => {
            if (slot.running === run) slot.running = undefined
            if (slot.running === undefined && slot.queued === undefined && this.#dirs.get(dir) === slot) this.#dirs.delete(dir)
          })
        return run
      })
    slot.queued = queued
    return queued
  }

  /** Resolves when no fsync is running or queued. */
  async idle(): Promise<void> {
    while (this.#dirs.size > 0) {
      await Promise.allSettled([...this.#dirs.values()].flatMap((s) => [s.running, s.queued]))
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

async function readdirIfExists(dir: string): Promise<string[] | undefined> {
  try {
    return await fs.readdir(dir)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined
    throw error
  }
}

/** `YYYYMMDD` in UTC, the day directory a jid of that time lands in. */
function dayName(date: Date): string {
  return date.toISOString().slice(0, 10).replaceAll('-', '')
}
