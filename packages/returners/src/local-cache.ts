import { constants, promises as fs, writeSync, type Stats } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import {
  LAZY_JOB_SYNC_MS,
  selectJobs,
  type JobCache,
  type JobRecord,
  type JobSummary,
  type ListJobsFilter,
  type SaveJobOptions,
  type SaveReturnOptions,
} from '@brine/common'
import { isJid, jidToDate, type ReturnLoad } from '@brine/protocol'
import { validateMinionId } from '@brine/crypt'
import { decode, encodeWithHeadroom, FRAME_HEADER_BYTES, FrameReader, LruMap, type Logger, type WireValue } from '@brine/core'
import { FutureJidError, JobCacheError } from './errors.js'
import { decodeSnapshot, encodeSnapshot, type Snapshot, type SnapshotSegment } from './index-snapshot.js'
import { ReturnLocations, type Location } from './return-locations.js'
import { lockOwnerGone, lockText, parseLockText } from './process-identity.js'

const CHECKSUM_BYTES = 4
/** A frame's length field is 32 bits and its body holds the checksum before the msgpack record. */
const MAX_RECORD_BYTES = 0xffff_ffff - CHECKSUM_BYTES
/** Validated minion ids saveReturn remembers (the least recently validated go first). */
const VALID_IDS_HELD = 65_536
/**
 * Minion ids the index keeps one string of: a fleet's ids recur in every job (its minion list and its returns),
 * and each record decodes a fresh copy (~40 bytes of heap each). Past this many the table starts over, which
 * costs only sharing.
 */
const IDS_SHARED = 262_144
const SEGMENT_FILE = /^(\d{8})\.log$/
const OLD_LAYOUT_DAY_DIR = /^\d{8}$/
/** Jids are checked as before the log format: Salt's 20 digits, optionally `_suffix` of safe characters. */
const SAFE_JID = /^\d{20}(?:_[A-Za-z0-9.-]+)?$/
const LOCK_FILE = '.lock'
/** The persisted index (index-snapshot.ts), written at close. */
const INDEX_FILE = 'index'
const SCAN_CHUNK_BYTES = 1 << 20
/**
 * getJob reads neighbouring records in one span, skipping gaps up to READ_GAP_BYTES (other jobs' records), into
 * one buffer the cache keeps for it. A job whose returns came amid a burst of others' has a gap of other
 * records after each of its own, so a lookup reads far more than it keeps: a fresh buffer per span made each
 * lookup's whole region garbage outside the V8 heap, piling up over many lookups until a collection freed it.
 * Reading into the kept one, and copying out only the records it needs, leaves a lookup the size of its returns.
 */
const READ_SPAN_BYTES = 1 << 20
const READ_GAP_BYTES = 64 << 10

export interface LocalJobCacheOptions {
  /** Salt's `cachedir`; jobs live under `<cachedir>/jobs`. */
  cachedir: string
  logger?: Logger
  /**
   * Let open() resolve once the lock is taken and rebuild the index in the background; every call
   * waits for it. A master restarting over hundreds of thousands of returns then serves minions
   * (authentication needs no job cache) while the log is read. If the rebuild fails, every later
   * call rejects with the reason, which is also logged. Default false: open() waits.
   */
  indexInBackground?: boolean
  /**
   * Refuse (FutureJidError) a return whose jid is dated more than this many ms ahead of `now()` (or of the
   * newest jid held) and whose job the cache neither holds nor is writing, so a flood of future jids opens no
   * day file (the master passes `clock_skew`). Jobs themselves come from the master's own publish path and
   * are taken as they are. Default: no limit.
   */
  maxFutureMs?: number
  /** The master's clock, ms since the epoch (default Date.now). */
  now?: () => number
}

/** A batch's records in one segment, written and waiting for their sync. */
interface WrittenUnit {
  day: string
  segment: Segment
  handle: FileHandle
  start: number
  length: number
  batch: Pending[]
  shown: Written[]
}

/** A return put in the index once written, before its batch was durable (see #showWritten). */
interface Written {
  jid: string
  id: string
  location: Location
  /** Its job had no entry before: the entry goes too if the return is taken out. */
  created: boolean
}

interface JobEntry {
  load: Record<string, unknown>
  minions: string[]
  returns: ReturnLocations
}

interface Segment {
  day: string
  path: string
  /** Bytes written: known good, durable or waiting for their batch's sync (the next batch is written after them). */
  size: number
  /**
   * Bytes a sync has made durable: a sync takes along every batch written before it began, so a later batch it
   * covered needs none of its own (under a steady stream of returns one fdatasync serves many batches).
   */
  durable: number
  handle: Promise<FileHandle> | undefined
  /** Set by prune: the file is gone, the handle must not be reopened. */
  deleted: boolean
  /** CRC-32 of the file's first `size` bytes, kept as batches are written (the persisted index names it); undefined: not known, read back when needed. */
  crc: number | undefined
  /** The file appeared while the cache was open and its records before ours were never indexed: no index is persisted over it. */
  unindexed?: boolean
}

type LogRecord = { t: 'job'; jid: string; load: Record<string, unknown>; minions: string[] } | { t: 'ret'; jid: string; id: string; ret: ReturnLoad }

/** One record waiting for the writer: its bytes, and what to do once they are durable (or not). */
interface Pending {
  day: string
  bytes: Buffer
  record: { t: 'job'; jid: string; load: Record<string, unknown>; minions: string[] } | { t: 'ret'; jid: string; id: string }
  /** A return's {@link SaveReturnOptions.onWritten}, or a job record's {@link SaveJobOptions.onWritten}. */
  onWritten?: (() => void) | undefined
  /** A job record saved with {@link SaveJobOptions.lazy}. */
  lazy?: boolean
  resolve(): void
  reject(error: unknown): void
}

/**
 * Salt's `local_cache` as an append-only log: one segment per day, `<cachedir>/jobs/<YYYYMMDD>.log`
 * (the day of the jid's time), each a sequence of frames — 4-byte big-endian length, then a body of
 * a 4-byte CRC32 and the msgpack record `{t:'job', jid, load, minions}` or `{t:'ret', jid, id, ret}`.
 *
 * Writes are group-committed: saveJob/saveReturn queue their record; one writer takes everything
 * queued, appends it with one write and one fdatasync per segment touched, then resolves the whole
 * batch, while later calls queue for the next batch. What a call resolved for survives kill -9 and
 * power loss. Per-return files cost ~1,000–2,500 returns/s here; the log does tens of thousands.
 *
 * The index (jobs with their loads and minions, and where each return's record is) lives in memory;
 * return bodies stay on disk until getJob reads them. close() persists it to `<cachedir>/jobs/index`
 * (index-snapshot.ts); open() reads that back if the segments still begin with the bytes it was built
 * from and scans only what lies past them, else scans the segments whole. So exactly one process may
 * own a cachedir: open() takes `<cachedir>/jobs/.lock`.
 */
export class LocalJobCache implements JobCache {
  readonly root: string
  readonly #logger: Logger | undefined
  readonly #lockPath: string
  readonly #jobs = new Map<string, JobEntry>()
  readonly #segments = new Map<string, Segment>()
  /** Returns queued or being written, by `jid\0id`: a duplicate waits for the first and answers false. */
  readonly #inFlight = new Map<string, Promise<void>>()
  #queue: Pending[] = []
  /** Serialises batches' writes and prune's file deletions; never rejects. */
  #chain: Promise<void> = Promise.resolve()
  /** The syncs of written batches, one after another in the order they were written; never rejects. */
  #syncing: Promise<void> = Promise.resolve()
  /** Written batches of lazy job records only, whose syncs wait for the next batch (or the timer). */
  #deferred: WrittenUnit[] = []
  #deferTimer: NodeJS.Timeout | undefined
  /** Batches between the start of their write and its end. */
  #writesInFlight = 0
  /** A failed batch's bytes being cut off: the next write waits for it. */
  #cutting: Promise<void> = Promise.resolve()
  #batchScheduled = false
  /**
   * Set once a batch was begun in the task that queued it (a job record's), until this turn of the event loop ends:
   * later saves of the turn wait for its end and share one batch.
   */
  #begunThisTurn = false
  /** Set when a failed write could not be rolled back: the log's tail is unknown, so nothing more is written. */
  #broken: JobCacheError | undefined
  #state: 'new' | 'open' | 'closed' = 'new'
  readonly #indexInBackground: boolean
  /** Settles once the index is rebuilt; rejects (handled) if it could not be. */
  #indexed: Promise<void> = Promise.resolve()
  /** True once #indexed has fulfilled: a return need not wait a turn for it (it is saved on every return). */
  #indexReady = false
  /** Minion ids already checked by validateMinionId (the same fleet returns again and again). */
  readonly #validIds = new LruMap<string, true>(VALID_IDS_HELD)
  /** One string per minion id the index holds (see IDS_SHARED). */
  readonly #sharedIds = new Map<string, string>()
  readonly #maxFutureMs: number | undefined
  readonly #now: () => number
  /** The greatest jid in the index (jids sort by time), or undefined; recomputed when prune removes it. */
  #newest: string | undefined
  /** Jobs queued for writing, by jid: a return for one of them is not "for a jid nobody issued". */
  readonly #jobsQueued = new Map<string, number>()
  /** getJob's spans are read into this (READ_SPAN_BYTES, made on the first lookup); a concurrent lookup makes its own. */
  #readBuffer: Buffer | undefined
  #readBufferBusy = false

  constructor(options: LocalJobCacheOptions) {
    this.root = join(options.cachedir, 'jobs')
    this.#logger = options.logger
    this.#lockPath = join(this.root, LOCK_FILE)
    this.#indexInBackground = options.indexInBackground === true
    this.#maxFutureMs = options.maxFutureMs
    this.#now = options.now ?? Date.now
  }

  /** Creates `<cachedir>/jobs`, takes its lock and rebuilds the index from the segments. */
  async open(): Promise<this> {
    if (this.#state !== 'new') throw new JobCacheError('local_cache', 'open() called twice', { dir: this.root })
    await this.#makeRoot()
    await this.#lock()
    if (this.#indexInBackground) {
      this.#indexed = this.#buildIndex().catch((error: unknown) => {
        const failure = new JobCacheError(
          'local_cache',
          `the index of ${this.root} could not be rebuilt: ${(error as Error).message}`,
          { dir: this.root },
          { cause: error },
        )
        this.#broken = failure
        this.#logger?.error(failure.message)
        throw failure
      })
      this.#indexed.then(
        () => (this.#indexReady = true),
        () => {}, // reported through every call that waits for it
      )
      // Batches (and prune's deletions) run after the scan, which may truncate a torn tail.
      this.#chain = this.#indexed.then(
        () => undefined,
        () => undefined,
      )
      this.#state = 'open'
      return this
    }
    try {
      await this.#buildIndex()
    } catch (error) {
      await this.#closeHandles()
      await fs.rm(this.#lockPath, { force: true })
      throw error
    }
    this.#indexReady = true
    this.#state = 'open'
    return this
  }

  /** Resolves once the index is rebuilt (at once unless `indexInBackground`). */
  ready(): Promise<void> {
    return this.#indexed
  }

  async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[], options: SaveJobOptions = {}): Promise<void> {
    this.#checkWritable()
    // Once indexed, the job counts as queued before this call returns, as a return saved right after it expects.
    if (!this.#indexReady) await this.#indexed
    const day = this.#dayOf(jid)
    const bytes = encodeRecord({ t: 'job', jid, load, minions: [...minions] })
    // The index keeps the decoded copy, what a restart would read, not the caller's (mutable) object.
    const record = parseBody(bytes.subarray(FRAME_HEADER_BYTES))
    if (typeof record === 'string' || record.t !== 'job')
      throw new JobCacheError('local_cache', `job ${jid} did not survive encoding (${typeof record === 'string' ? record : record.t})`, { jid })
    this.#jobsQueued.set(jid, (this.#jobsQueued.get(jid) ?? 0) + 1)
    try {
      await this.#enqueue(day, record, bytes, options.onWritten, options.lazy === true)
    } finally {
      const left = (this.#jobsQueued.get(jid) ?? 1) - 1
      if (left > 0) this.#jobsQueued.set(jid, left)
      else this.#jobsQueued.delete(jid)
    }
  }

  async saveReturn(jid: string, id: string, ret: ReturnLoad, options: SaveReturnOptions = {}): Promise<boolean> {
    this.#checkWritable()
    if (!this.#indexReady) await this.#indexed
    const day = this.#dayOf(jid)
    this.#checkFuture(jid)
    if (!this.#validIds.has(id)) {
      validateMinionId(id)
      this.#validIds.set(id, true)
    }
    const key = `${jid}\0${id}`
    for (;;) {
      const earlier = this.#inFlight.get(key)
      if (earlier === undefined) {
        // Not in flight: in the index means durable (one written and not yet synced is still in flight).
        if (this.#jobs.get(jid)?.returns.has(id) === true) return false
        break
      }
      // Queued by another call: "already stored" must mean durable, so wait for it. If it failed,
      // this call writes the return itself.
      const stored = await earlier.then(
        () => true,
        () => false,
      )
      if (stored) return false
      this.#checkWritable()
    }
    const bytes = encodeRecord({ t: 'ret', jid, id, ret })
    const written = this.#enqueue(day, { t: 'ret', jid, id }, bytes, options.onWritten)
    this.#inFlight.set(key, written)
    try {
      await written
    } finally {
      if (this.#inFlight.get(key) === written) this.#inFlight.delete(key)
    }
    return true
  }

  /** The job with its returns read back from disk. `load` and `minions` are the index's own objects: read-only. */
  async getJob(jid: string): Promise<JobRecord | undefined> {
    this.#checkOpen()
    await this.#indexed
    this.#dayOf(jid)
    const entry = this.#jobs.get(jid)
    if (entry === undefined) return undefined
    let returns: Record<string, ReturnLoad>
    try {
      returns = await this.#readReturns([...entry.returns])
    } catch (error) {
      // Pruned while we read (its segment deleted): the job is gone.
      if (this.#jobs.get(jid) !== entry) return undefined
      throw error
    }
    return { jid, load: entry.load, minions: entry.minions, returns }
  }

  /** From the index alone; `load` and `minions` are the index's own objects: read-only. */
  async listJobs(filter: ListJobsFilter = {}): Promise<JobSummary[]> {
    this.#checkOpen()
    await this.#indexed
    const jobs: JobSummary[] = []
    for (const [jid, { load, minions }] of this.#jobs) jobs.push({ jid, load, minions })
    return selectJobs(jobs, filter)
  }

  /**
   * Drops every job older than `before` from the index and deletes the segments of days entirely
   * before it. A segment of the boundary day is kept (it holds younger jobs too), so its pruned jobs
   * come back into the index if the process restarts before that day is pruned whole; the master
   * prunes when it starts, so they are gone again at once.
   */
  async prune(before: Date): Promise<number> {
    this.#checkOpen()
    await this.#indexed
    const boundary = dayName(before)
    return this.#serial(async () => {
      // Batches written before this still syncing: their segment's handle must not be closed under them.
      this.#chainSyncs(this.#takeDeferred())
      await this.#syncing
      let removed = 0
      for (const jid of [...this.#jobs.keys()]) {
        if (jidToDate(jid) < before) {
          this.#jobs.delete(jid)
          removed++
        }
      }
      if (this.#newest !== undefined && !this.#jobs.has(this.#newest)) {
        this.#newest = undefined
        for (const jid of this.#jobs.keys()) this.#noteJid(jid)
      }
      let deleted = 0
      for (const segment of [...this.#segments.values()]) {
        if (segment.day >= boundary) continue
        segment.deleted = true
        this.#segments.delete(segment.day)
        const handle = segment.handle
        segment.handle = undefined
        if (handle !== undefined) await (await handle.catch(() => undefined))?.close()
        await fs.rm(segment.path, { force: true })
        deleted++
      }
      if (deleted > 0) await fsyncDir(this.root)
      if (removed > 0 || deleted > 0) {
        this.#logger?.debug(`pruned ${removed} job(s) started before ${before.toISOString()}, ${deleted} segment(s) deleted`)
      }
      return removed
    })
  }

  async newestJid(): Promise<string | undefined> {
    this.#checkOpen()
    await this.#indexed
    return this.#newest
  }

  /** Writes what is queued, fsyncs and closes the segments and releases the lock. */
  async close(): Promise<void> {
    if (this.#state === 'closed') return
    const wasOpen = this.#state === 'open'
    this.#state = 'closed'
    if (!wasOpen) return
    await this.#chain
    this.#chainSyncs(this.#takeDeferred())
    await this.#syncing
    for (const segment of this.#segments.values()) {
      if (segment.handle === undefined) continue
      const handle = await segment.handle.catch(() => undefined)
      await handle?.sync().catch((error: unknown) => this.#logger?.error(`job cache: fsync of ${segment.path} failed at close`, error))
    }
    await this.#closeHandles()
    await this.#persistIndex()
    await fs.rm(this.#lockPath, { force: true })
  }

  // ---- writing ----

  #enqueue(day: string, record: Pending['record'], bytes: Buffer, onWritten?: () => void, lazy = false): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ day, bytes, record, onWritten, lazy, resolve, reject })
      if (this.#batchScheduled) return
      this.#batchScheduled = true
      // A job record that begins a turn's first batch is written in the task that queued it (after that task's
      // microtasks, so the batch takes what the task queues): the publish waiting for it goes out without waiting for
      // the turn's end, and a turn makes at most one write more. Returns wait for the end of the turn and share one
      // batch, the returns of every connection read in it (written as each came, they doubled the bus's writes at N=10).
      if (this.#begunThisTurn || record.t !== 'job') {
        void this.#serial(async () => {
          await endOfTurn()
          return this.#writeBatch()
        })
        return
      }
      this.#begunThisTurn = true
      setImmediate(() => (this.#begunThisTurn = false))
      void this.#serial(() => this.#writeBatch())
    })
  }

  /** Runs `task` after every batch and task queued before it; the chain itself never rejects. */
  #serial<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#chain.then(task)
    this.#chain = result.then(
      () => undefined,
      () => undefined,
    )
    return result
  }

  /**
   * One group commit: everything queued, one write and one fdatasync per segment, in parallel across segments.
   * The chain moves on once the batch is written: the next batch is written while this one syncs (a save
   * queued behind a slow sync need not wait for it to be written and shown), and the syncs run, and resolve
   * their saves, in the order the batches were written.
   */
  async #writeBatch(): Promise<void> {
    this.#batchScheduled = false
    const batch = this.#queue
    this.#queue = []
    if (batch.length === 0) return
    this.#writesInFlight++
    let units: WrittenUnit[]
    try {
      await this.#cutting
      if (this.#broken !== undefined) {
        for (const pending of batch) pending.reject(this.#broken)
        return
      }
      const byDay = new Map<string, Pending[]>()
      for (const pending of batch) {
        const list = byDay.get(pending.day)
        if (list === undefined) byDay.set(pending.day, [pending])
        else list.push(pending)
      }
      const written = await Promise.all([...byDay].map(([day, list]) => this.#writeToSegment(day, list)))
      units = written.filter((unit): unit is WrittenUnit => unit !== undefined)
    } finally {
      this.#writesInFlight--
    }
    if (units.length > 0 && batch.every((pending) => pending.lazy === true)) {
      // Only job records nobody waits on: their sync rides the next batch's (a return's, at N=1), or the timer's.
      this.#deferred.push(...units)
      this.#deferTimer ??= setTimeout(() => this.#chainSyncs(this.#takeDeferred()), LAZY_JOB_SYNC_MS).unref()
      return
    }
    // The deferred batches' sync first, on its own: it takes this batch along (written by now), which then needs none.
    this.#chainSyncs(this.#takeDeferred())
    this.#chainSyncs(units)
  }

  /** Queues the syncs of `units` after those queued before, in the order their batches were written. */
  #chainSyncs(units: readonly WrittenUnit[]): void {
    if (units.length === 0) return
    const synced = this.#syncing.then(() => Promise.all(units.map((unit) => this.#sync(unit))))
    this.#syncing = synced.then(
      () => undefined,
      () => undefined,
    )
  }

  /** The deferred lazy units, taken (written before any batch written now: their syncs go first). */
  #takeDeferred(): WrittenUnit[] {
    if (this.#deferTimer !== undefined) clearTimeout(this.#deferTimer)
    this.#deferTimer = undefined
    const units = this.#deferred
    this.#deferred = []
    return units
  }

  /** Appends a batch's records for one day and shows its returns; undefined (the batch rejected, its bytes cut off) if the write failed. */
  async #writeToSegment(day: string, batch: Pending[]): Promise<WrittenUnit | undefined> {
    let segment: Segment | undefined
    let start = 0
    let handle: FileHandle | undefined
    try {
      segment = await this.#writableSegment(day)
      handle = await this.#handle(segment)
      start = segment.size
      const bytes = batch.length === 1 ? batch[0]!.bytes : Buffer.concat(batch.map((p) => p.bytes))
      writeAllNow(handle, bytes, start)
      segment.size = start + bytes.length
      if (segment.crc !== undefined) segment.crc = crc32(bytes, segment.crc)
      return { day, segment, handle, start, length: bytes.length, batch, shown: this.#showWritten(day, start, batch) }
    } catch (error) {
      const failure = writeFailure(batch, segment?.path ?? day, error)
      if (segment !== undefined && handle !== undefined) await this.#rollBack(segment, handle, start, failure)
      for (const pending of batch) pending.reject(failure)
      return undefined
    }
  }

  /**
   * Syncs a written batch and resolves its saves. A failed sync rejects them and takes their returns out of
   * the index; their bytes are cut off if nothing was written after them, else the cache is broken (the
   * log's tail is no longer known good: restart to recover, the scan keeps what is whole).
   */
  async #sync(unit: WrittenUnit): Promise<void> {
    const { day, segment, handle, start, batch } = unit
    let failure = this.#broken
    if (failure === undefined && segment.durable < start + unit.length) {
      try {
        // Every batch written by now is in the file: this sync makes them all durable.
        const through = segment.size
        await handle.datasync()
        segment.durable = Math.max(segment.durable, through)
      } catch (error) {
        failure = writeFailure(batch, segment.path, error)
        await this.#afterFailedSync(unit, failure)
      }
    }
    if (failure !== undefined) {
      for (const shown of unit.shown) this.#unshow(shown)
      for (const pending of batch) pending.reject(failure)
      return
    }
    let offset = start
    for (const pending of batch) {
      this.#apply(pending.record, { day, offset, length: pending.bytes.length })
      offset += pending.bytes.length
      pending.resolve()
    }
  }

  async #afterFailedSync(unit: WrittenUnit, failure: JobCacheError): Promise<void> {
    const { segment, handle, start, length } = unit
    if (this.#writesInFlight === 0 && segment.size === start + length && !segment.deleted) {
      this.#cutting = this.#rollBack(segment, handle, start, failure)
      await this.#cutting
      return
    }
    this.#broken = new JobCacheError(
      'local_cache',
      `${failure.message}, after later records were written behind it; restart to recover`,
      { file: segment.path },
      { cause: failure },
    )
    this.#logger?.error(this.#broken.message, failure)
  }

  /**
   * The returns of a batch whose write has completed (the bytes are the file's: a kill -9 of this process no
   * longer loses them) and whose fdatasync has not: each is put in the index, so getJob reads it, and its
   * `onWritten` is called (and a job record's, which is indexed once durable). Their saves still resolve only once
   * durable; a failed sync takes the returns out again.
   */
  #showWritten(day: string, start: number, batch: readonly Pending[]): Written[] {
    const shown: Written[] = []
    let offset = start
    for (const pending of batch) {
      const location = { day, offset, length: pending.bytes.length }
      offset += pending.bytes.length
      if (pending.onWritten === undefined) continue
      // A job record goes into the index once durable (its save counts it as queued until then): only its caller is told.
      if (pending.record.t === 'ret') {
        const created = !this.#jobs.has(pending.record.jid)
        this.#apply(pending.record, location)
        shown.push({ jid: pending.record.jid, id: pending.record.id, location, created })
      }
      try {
        pending.onWritten()
      } catch (error) {
        const what = pending.record.t === 'ret' ? `${pending.record.jid}/${pending.record.id}` : pending.record.jid
        this.#logger?.error(`job cache: onWritten of ${what} failed`, error)
      }
    }
    return shown
  }

  /** Takes a return {@link #showWritten} put in the index out again (its batch failed). */
  #unshow({ jid, id, location, created }: Written): void {
    const entry = this.#jobs.get(jid)
    if (entry === undefined || entry.returns.get(id) !== location) return
    entry.returns.delete(id)
    if (!created || entry.returns.size > 0 || entry.minions.length > 0 || Object.keys(entry.load).length > 0) return
    this.#jobs.delete(jid)
    if (this.#newest === jid) {
      this.#newest = undefined
      for (const held of this.#jobs.keys()) this.#noteJid(held)
    }
  }

  /** Cuts a failed batch's partial bytes off so the log stays a clean sequence of records. */
  async #rollBack(segment: Segment, handle: FileHandle, size: number, failure: JobCacheError): Promise<void> {
    segment.size = size
    segment.durable = Math.min(segment.durable, size)
    segment.crc = undefined // read back if an index is persisted: cheaper than keeping each batch's
    try {
      await handle.truncate(size)
      await handle.datasync()
    } catch (error) {
      this.#broken = new JobCacheError(
        'local_cache',
        `${segment.path} could not be rolled back after a failed write; restart to recover`,
        { file: segment.path },
        { cause: error },
      )
      this.#logger?.error(this.#broken.message, failure)
    }
  }

  /** The segment for `day`, creating its file (0600, then the directory fsync'd) on first use. */
  async #writableSegment(day: string): Promise<Segment> {
    const existing = this.#segments.get(day)
    if (existing !== undefined) return existing
    const path = join(this.root, `${day}.log`)
    const segment: Segment = { day, path, size: 0, durable: 0, handle: undefined, deleted: false, crc: 0 }
    let handle: FileHandle
    try {
      handle = await fs.open(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o600)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      // Not there at open() and we hold the lock: someone put it there by hand. Append after it.
      handle = await fs.open(path, constants.O_RDWR)
      segment.size = (await handle.stat()).size
      segment.crc = undefined
      segment.unindexed = true
      this.#logger?.warning(`job cache: ${path} appeared while the cache was open; appending to it unscanned`)
    }
    await fsyncDir(this.root)
    segment.handle = Promise.resolve(handle)
    this.#segments.set(day, segment)
    return segment
  }

  #apply(record: Pending['record'], location: Location): void {
    let entry = this.#jobs.get(record.jid)
    if (entry === undefined) {
      entry = { load: {}, minions: [], returns: new ReturnLocations() }
      this.#jobs.set(record.jid, entry)
      this.#noteJid(record.jid)
    }
    if (record.t === 'job') {
      entry.load = record.load
      entry.minions = record.minions.map((id) => this.#sharedId(id))
    } else {
      entry.returns.set(this.#sharedId(record.id), location)
    }
  }

  /** The index's one string for minion id `id`. */
  #sharedId(id: string): string {
    const held = this.#sharedIds.get(id)
    if (held !== undefined) return held
    if (this.#sharedIds.size >= IDS_SHARED) this.#sharedIds.clear()
    this.#sharedIds.set(id, id)
    return id
  }

  // ---- reading ----

  /**
   * The return records at `locations`, read with as few positioned reads as possible: records close
   * together in one segment (a batch is contiguous) are read as one span of up to READ_SPAN_BYTES.
   */
  async #readReturns(locations: [string, Location][]): Promise<Record<string, ReturnLoad>> {
    const sorted = [...locations].sort(([, a], [, b]) => (a.day === b.day ? a.offset - b.offset : a.day < b.day ? -1 : 1))
    const found = new Map<string, ReturnLoad>()
    for (let i = 0; i < sorted.length;) {
      const first = sorted[i]![1]
      let end = first.offset + first.length
      let j = i + 1
      for (; j < sorted.length; j++) {
        const next = sorted[j]![1]
        if (next.day !== first.day || next.offset - end > READ_GAP_BYTES || next.offset + next.length - first.offset > READ_SPAN_BYTES) break
        end = Math.max(end, next.offset + next.length)
      }
      const segment = this.#segments.get(first.day)
      if (segment === undefined) throw new JobCacheError('local_cache', `segment ${first.day}.log is gone`, { file: first.day })
      const handle = await this.#handle(segment)
      const into = this.#takeReadBuffer(end - first.offset)
      try {
        const span = await readSpan(handle, first.offset, end - first.offset, into)
        for (; i < j; i++) {
          const [id, location] = sorted[i]!
          const at = location.offset - first.offset
          // A copy: what the return decodes to may be views of its bytes (msgpack bin), and the span's buffer is read into again.
          found.set(id, returnFromFrame(Buffer.from(span.subarray(at, at + location.length)), segment.path, location.offset))
        }
      } finally {
        if (into === this.#readBuffer) this.#readBufferBusy = false
      }
    }
    // In the order the returns arrived, as the index holds them.
    const returns: Record<string, ReturnLoad> = {}
    for (const [id] of locations) returns[id] = found.get(id)!
    return returns
  }

  /** The kept read buffer when it is free and large enough (taken until released), else a buffer of its own for this span. */
  #takeReadBuffer(length: number): Buffer {
    if (length > READ_SPAN_BYTES || this.#readBufferBusy) return Buffer.allocUnsafeSlow(length)
    this.#readBuffer ??= Buffer.allocUnsafeSlow(READ_SPAN_BYTES)
    this.#readBufferBusy = true
    return this.#readBuffer
  }

  async #handle(segment: Segment): Promise<FileHandle> {
    if (segment.deleted) throw new JobCacheError('local_cache', `${segment.path} was pruned`, { file: segment.path })
    if (segment.handle === undefined) {
      const opening = fs.open(segment.path, constants.O_RDWR)
      segment.handle = opening
      // Deleted by prune while opening: do not leak the descriptor.
      void opening.then(
        (handle) => (segment.deleted ? handle.close() : undefined),
        () => {
          if (segment.handle === opening) segment.handle = undefined
        },
      )
    }
    return segment.handle
  }

  // ---- open: lock and scan ----

  async #makeRoot(): Promise<void> {
    let created = false
    try {
      await fs.mkdir(this.root, { mode: 0o700 })
      created = true
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') {
        await fs.mkdir(this.root, { mode: 0o700, recursive: true })
        created = true
      } else if (code !== 'EEXIST') {
        throw error
      }
    }
    if (created) await fsyncDir(join(this.root, '..'))
  }

  /**
   * `<cachedir>/jobs/.lock` holding our pid, start time and boot id (process-identity.ts), made
   * atomically (a temp file linked into place, so it is never seen empty). A lock whose owner is
   * gone is stale and taken over: its pid is not running, or it runs but is another process (the
   * pid was reused, or the lock is from an earlier boot). Two processes taking over the same stale
   * lock at the same instant could both succeed; that needs two masters started together on one
   * cachedir after a crash, which the lock exists to report, not to arbitrate.
   */
  async #lock(): Promise<void> {
    const tmp = join(this.root, `${LOCK_FILE}.${process.pid}.${Math.random().toString(36).slice(2)}`)
    try {
      await fs.writeFile(tmp, lockText(), { mode: 0o600, flag: 'wx' })
    } catch (error) {
      // A write that failed half-way (a full disk) must not leave its temporary file behind.
      await fs.rm(tmp, { force: true })
      throw error
    }
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await fs.link(tmp, this.#lockPath)
          return
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw error
        }
        const text = await fs.readFile(this.#lockPath, 'utf8').catch((error: NodeJS.ErrnoException) => {
          if (error.code === 'ENOENT') return undefined // released meanwhile: try again
          throw error
        })
        if (text === undefined) continue
        const owner = parseLockText(text)
        const gone = owner === undefined ? 'an unreadable lock' : lockOwnerGone(owner, this.#lockPath)
        if (owner !== undefined && gone === undefined) {
          const pid = owner.pid
          throw new JobCacheError(
            'local_cache',
            `job cache ${this.root} is in use by pid ${pid} (remove ${this.#lockPath} only if that process is not a Brine master)`,
            { dir: this.root, file: this.#lockPath, pid },
          )
        }
        this.#logger?.warning(`job cache: taking over ${this.#lockPath} left by ${gone}`)
        await fs.rm(this.#lockPath, { force: true })
      }
    } finally {
      await fs.rm(tmp, { force: true })
    }
  }

  /**
   * The index: the persisted one (written at the last clean close) if the segments it names still begin with the
   * bytes it was built from, then each segment's records past what it covered (the whole of a segment it does not
   * name: a later day, or one written by a run killed before it could close). Without one, the whole log is read.
   */
  async #buildIndex(): Promise<void> {
    const names = (await fs.readdir(this.root)).sort() // oldest day first: later records win
    const oldLayout = names.filter((name) => OLD_LAYOUT_DAY_DIR.test(name))
    if (oldLayout.length > 0) {
      this.#logger?.warning(
        `job cache: ignoring ${oldLayout.length} day director${oldLayout.length === 1 ? 'y' : 'ies'} of the old one-file-per-return layout under ${this.root}`,
      )
    }
    const days = names.flatMap((name) => SEGMENT_FILE.exec(name)?.[1] ?? [])
    const snapshot = await this.#readSnapshot(new Set(days))
    if (snapshot !== undefined) {
      for (const name of snapshot.names) this.#sharedId(name)
      for (const { jid, load, minions, returns } of snapshot.jobs) {
        this.#jobs.set(jid, { load, minions, returns })
        this.#noteJid(jid)
      }
    }
    const covered = new Map(snapshot?.segments.map((segment) => [segment.day, segment]))
    let scanned = 0
    for (const day of days) scanned += await this.#scanSegment(day, join(this.root, `${day}.log`), covered.get(day))
    if (snapshot !== undefined) {
      this.#logger?.debug(
        `job cache: index of ${snapshot.jobs.length} job(s) read from ${join(this.root, INDEX_FILE)}, then ${scanned} byte(s) of the log past it`,
      )
    }
  }

  /** The persisted index if there is one and it matches the log (see #buildIndex), else undefined, saying why. */
  async #readSnapshot(days: ReadonlySet<string>): Promise<Snapshot | undefined> {
    const path = join(this.root, INDEX_FILE)
    let problem: string
    try {
      const snapshot = decodeSnapshot(await fs.readFile(path))
      problem = typeof snapshot === 'string' ? `corrupt (${snapshot})` : ((await this.#staleness(snapshot.segments, days)) ?? '')
      if (problem === '') return snapshot as Snapshot
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        if (days.size > 0) this.#logger?.info(`job cache: no index persisted in ${this.root} (the last run did not close it): reading the whole log`)
        return undefined
      }
      problem = `unreadable (${(error as Error).message})`
    }
    this.#logger?.warning(`job cache: the persisted index ${path} is ${problem}; rebuilding the index from the whole log`)
    await fs.rm(path, { force: true })
    return undefined
  }

  /** Why `segments` (what the persisted index covered) no longer describe the files, or undefined if each still begins with those bytes. */
  async #staleness(segments: readonly SnapshotSegment[], days: ReadonlySet<string>): Promise<string | undefined> {
    for (const { day, size, crc } of segments) {
      if (!days.has(day)) return `stale (${day}.log is gone)`
      const handle = await fs.open(join(this.root, `${day}.log`), constants.O_RDONLY)
      try {
        const actual = (await handle.stat()).size
        if (actual < size) return `stale (${day}.log holds ${actual} bytes, fewer than the ${size} it covered)`
        if ((await crcOfPrefix(handle, size)) !== crc) return `stale (the first ${size} bytes of ${day}.log are not those it was built from)`
      } finally {
        await handle.close()
      }
    }
    return undefined
  }

  /**
   * Writes the index to `jobs/index` (through a temporary file renamed over it) so that the next open reads it
   * instead of the whole log. Not when the index is not the log's (a failed rebuild, a tail left unknown, a segment
   * that appeared unscanned): the one persisted before stays, and the next open checks it against the files. Never
   * fails close: the next open then reads the log.
   */
  async #persistIndex(): Promise<void> {
    const segments = [...this.#segments.values()]
    if (!this.#indexReady || this.#broken !== undefined || segments.some((segment) => segment.unindexed === true)) return
    const path = join(this.root, INDEX_FILE)
    const tmp = `${path}.tmp`
    try {
      const covered: SnapshotSegment[] = []
      for (const segment of segments) covered.push({ day: segment.day, size: segment.size, crc: segment.crc ?? (await crcOfFile(segment.path, segment.size)) })
      const bytes = encodeSnapshot(
        covered,
        [...this.#jobs].map(([jid, { load, minions, returns }]) => ({ jid, load, minions, returns })),
      )
      await fs.writeFile(tmp, bytes, { mode: 0o600, flush: true })
      await fs.rename(tmp, path)
      await fsyncDir(this.root)
    } catch (error) {
      await fs.rm(tmp, { force: true })
      this.#logger?.warning(`job cache: could not persist the index to ${path}: ${(error as Error).message}; the next start reads the log instead`)
    }
  }

  /**
   * Indexes one segment from `from` (what the persisted index covered of it; else from its start) and returns how many
   * bytes it read. The first bad record (length beyond the file, checksum mismatch, not a
   * record) ends the scan and the file is truncated there, so appends after it stay readable: a torn
   * tail (nothing but zeros or a partial frame after it) with a warning; anything else is corruption,
   * logged as an error, and the whole file is first copied to `<day>.log.corrupt-<time>` for inspection.
   */
  async #scanSegment(day: string, path: string, from?: SnapshotSegment): Promise<number> {
    const handle = await fs.open(path, constants.O_RDWR)
    const segment: Segment = { day, path, size: 0, durable: 0, handle: undefined, deleted: false, crc: undefined }
    const start = from?.size ?? 0
    try {
      const stat: Stats = await handle.stat()
      let good = start
      let crc = from?.crc ?? 0
      let bad: string | undefined
      const reader = new FrameReader(
        {
          onFrame: (body) => {
            if (bad !== undefined) return
            const record = indexOnlyReturn(body) ?? parseBody(body)
            if (typeof record === 'string') {
              bad = record
              return
            }
            const location = { day, offset: good, length: FRAME_HEADER_BYTES + body.length }
            // Loads are kept: copy them out of the read chunk so it is not retained by Buffer views.
            if (record.t === 'job') {
              const copy = parseBody(Buffer.from(body)) as typeof record
              this.#apply(copy, location)
            } else {
              this.#apply(record, location)
            }
            good += location.length
          },
          onOversize: () => {
            bad ??= 'length beyond the end of the file'
          },
        },
        Math.max(0, stat.size - FRAME_HEADER_BYTES),
      )
      for (let position = start; position < stat.size && bad === undefined;) {
        const chunk = Buffer.allocUnsafe(Math.min(SCAN_CHUNK_BYTES, stat.size - position))
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, position)
        if (bytesRead === 0) break
        crc = crc32(chunk.subarray(0, bytesRead), crc)
        reader.push(chunk.subarray(0, bytesRead))
        position += bytesRead
      }
      if (bad === undefined && good < stat.size) bad = 'partial frame at the end'
      if (bad !== undefined) await this.#truncateBad(handle, path, good, stat.size, bad)
      else segment.crc = crc
      segment.size = good
      this.#segments.set(day, segment)
      return stat.size - start
    } finally {
      await handle.close()
    }
  }

  async #truncateBad(handle: FileHandle, path: string, good: number, size: number, problem: string): Promise<void> {
    const rest = Buffer.alloc(Math.min(size - good, SCAN_CHUNK_BYTES))
    const { bytesRead } = await handle.read(rest, 0, rest.length, good)
    const header = bytesRead >= FRAME_HEADER_BYTES ? rest.readUInt32BE(0) : 0
    const torn = bytesRead < FRAME_HEADER_BYTES || good + FRAME_HEADER_BYTES + header >= size || (size - good <= rest.length && rest.every((b) => b === 0))
    const what = `${path}: ${problem} at offset ${good} of ${size}`
    if (torn) {
      this.#logger?.warning(`job cache: ${what}; truncating the torn tail (${size - good} bytes)`)
    } else {
      const copy = `${path}.corrupt-${Date.now()}`
      await fs.copyFile(path, copy)
      this.#logger?.error(`job cache: ${what}; records after it are dropped (file kept as ${copy})`)
    }
    await handle.truncate(good)
    await handle.datasync()
  }

  // ---- helpers ----

  #dayOf(jid: string): string {
    if (typeof jid !== 'string' || !isJid(jid) || !SAFE_JID.test(jid))
      throw new JobCacheError('local_cache', `'${String(jid)}' is not a jid`, { jid: String(jid) })
    // A valid jid starts with its UTC date, YYYYMMDD: the segment's name.
    return jid.slice(0, 8)
  }

  /** Jids sort by time (20 digits first; a `_suffix` after them only breaks ties). */
  #noteJid(jid: string): void {
    if (this.#newest === undefined || jid > this.#newest) this.#newest = jid
  }

  /**
   * A return for a jid dated beyond maxFutureMs from now (or from the newest jid held: a master's jids keep
   * increasing when its clock is set back) whose job the cache neither holds nor is writing is refused
   * before any file is touched.
   */
  #checkFuture(jid: string): void {
    if (this.#maxFutureMs === undefined || this.#jobs.has(jid) || this.#jobsQueued.has(jid)) return
    const at = jidToDate(jid)
    const now = this.#now()
    const reference = Math.max(now, this.#newest === undefined ? now : jidToDate(this.#newest).getTime())
    if (at.getTime() > reference + this.#maxFutureMs) throw new FutureJidError('local_cache', jid, at, new Date(now), this.#maxFutureMs)
  }

  #checkOpen(): void {
    if (this.#state !== 'open') throw new JobCacheError('local_cache', this.#state === 'new' ? 'used before open()' : 'used after close()', { dir: this.root })
  }

  #checkWritable(): void {
    this.#checkOpen()
    if (this.#broken !== undefined) throw this.#broken
  }

  async #closeHandles(): Promise<void> {
    for (const segment of this.#segments.values()) {
      const handle = segment.handle
      segment.handle = undefined
      if (handle !== undefined) await (await handle.catch(() => undefined))?.close()
    }
  }
}

/** A record's frame: length, then CRC32 of the msgpack, then the msgpack. */
function writeFailure(batch: readonly Pending[], file: string, error: unknown): JobCacheError {
  return new JobCacheError('local_cache', `writing ${batch.length} record(s) to ${file} failed: ${(error as Error).message}`, { file }, { cause: error })
}

function encodeRecord(record: LogRecord): Buffer {
  // The msgpack written behind room for the frame's length and the checksum, which are filled in: no copy of the body.
  const out = encodeWithHeadroom(record as unknown as WireValue, FRAME_HEADER_BYTES + CHECKSUM_BYTES, MAX_RECORD_BYTES)
  const body = out.subarray(FRAME_HEADER_BYTES + CHECKSUM_BYTES)
  out.writeUInt32BE(CHECKSUM_BYTES + body.length, 0)
  out.writeUInt32BE(crc32(body), FRAME_HEADER_BYTES)
  return out
}

/** A frame body's record, or what is wrong with it. */
function parseBody(body: Buffer): LogRecord | string {
  if (body.length <= CHECKSUM_BYTES) return 'frame too short for a record'
  const payload = body.subarray(CHECKSUM_BYTES)
  if (crc32(payload) !== body.readUInt32BE(0)) return 'checksum mismatch'
  let value: unknown
  try {
    value = decode(payload)
  } catch {
    return 'undecodable record'
  }
  if (typeof value !== 'object' || value === null) return 'not a record'
  const r = value as Record<string, unknown>
  if (typeof r['jid'] !== 'string') return 'record without a jid'
  if (r['t'] === 'job' && typeof r['load'] === 'object' && r['load'] !== null && Array.isArray(r['minions'])) return value as LogRecord
  if (r['t'] === 'ret' && typeof r['id'] === 'string' && typeof r['ret'] === 'object' && r['ret'] !== null) return value as LogRecord
  return `unknown record type ${String(r['t'])}`
}

/** msgpack of the record prefix `{t: 'ret', jid: …` as encodeRecord writes it: a map of four, key t, value 'ret', key jid. */
const RETURN_PREFIX = Buffer.from([0x84, 0xa1, 0x74, 0xa3, 0x72, 0x65, 0x74, 0xa3, 0x6a, 0x69, 0x64])
const ID_KEY = Buffer.from([0xa2, 0x69, 0x64])
const RET_KEY = Buffer.from([0xa3, 0x72, 0x65, 0x74])

/** A msgpack string at `offset` of `bytes` (fixstr, str8 or str16) and the offset after it, or undefined. */
function readString(bytes: Buffer, offset: number): [string, number] | undefined {
  const marker = bytes[offset]
  let start: number
  let length: number
  if (marker === undefined) return undefined
  if (marker >= 0xa0 && marker <= 0xbf) [start, length] = [offset + 1, marker - 0xa0]
  else if (marker === 0xd9 && offset + 1 < bytes.length) [start, length] = [offset + 2, bytes[offset + 1]!]
  else if (marker === 0xda && offset + 2 < bytes.length) [start, length] = [offset + 3, bytes.readUInt16BE(offset + 1)]
  else return undefined
  if (start + length > bytes.length) return undefined
  return [bytes.toString('utf8', start, start + length), start + length]
}

/**
 * What the index needs of a return record (jid and id) read straight off the front of its bytes,
 * checksum checked, without decoding the return itself: a restart indexes hundreds of thousands
 * of returns, and decoding them was most of its time. undefined for anything laid out otherwise
 * (a job record, another key order), which {@link parseBody} then reads in full.
 */
function indexOnlyReturn(body: Buffer): { t: 'ret'; jid: string; id: string } | undefined {
  if (body.length <= CHECKSUM_BYTES + RETURN_PREFIX.length) return undefined
  const payload = body.subarray(CHECKSUM_BYTES)
  if (payload.compare(RETURN_PREFIX, 0, RETURN_PREFIX.length, 0, RETURN_PREFIX.length) !== 0) return undefined
  const jid = readString(payload, RETURN_PREFIX.length)
  if (jid === undefined || payload.compare(ID_KEY, 0, ID_KEY.length, jid[1], jid[1] + ID_KEY.length) !== 0) return undefined
  const id = readString(payload, jid[1] + ID_KEY.length)
  if (id === undefined || payload.compare(RET_KEY, 0, RET_KEY.length, id[1], id[1] + RET_KEY.length) !== 0) return undefined
  // The return must be a map (fixmap, map16, map32), as parseBody requires.
  const marker = payload[id[1] + RET_KEY.length]
  if (marker === undefined || !((marker >= 0x80 && marker <= 0x8f) || marker === 0xde || marker === 0xdf)) return undefined
  if (crc32(payload) !== body.readUInt32BE(0)) return undefined
  return { t: 'ret', jid: jid[0], id: id[0] }
}

/** `length` bytes at `offset`, read into `bytes` (at least `length` long); fewer only at the end of the file. */
async function readSpan(handle: FileHandle, offset: number, length: number, bytes: Buffer): Promise<Buffer> {
  let read = 0
  while (read < length) {
    const { bytesRead } = await handle.read(bytes, read, length - read, offset + read)
    if (bytesRead === 0) break
    read += bytesRead
  }
  return bytes.subarray(0, read)
}

/** The return in one whole frame the index pointed at; anything else means the file changed under us. */
function returnFromFrame(bytes: Buffer, path: string, offset: number): ReturnLoad {
  const whole = bytes.length >= FRAME_HEADER_BYTES && bytes.readUInt32BE(0) === bytes.length - FRAME_HEADER_BYTES
  const record = whole ? parseBody(bytes.subarray(FRAME_HEADER_BYTES)) : 'short read'
  if (typeof record === 'string' || record.t !== 'ret') {
    throw new JobCacheError(
      'local_cache',
      `${path} at offset ${offset}: not the return record the index points at (${typeof record === 'string' ? record : record.t})`,
      { file: path, offset },
    )
  }
  return record.ret
}

/** Resolves once this turn of the event loop has run its I/O callbacks (setImmediate: no timer, no wake-up of its own). */
const endOfTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/**
 * Writes all of `bytes` at `position`, on this thread: a batch's write goes to the page cache and costs less than
 * the hand-off to a thread-pool thread and back, which put two thread wake-ups between a return's arrival and its
 * event. The fdatasync, which waits for the disk, stays on the pool.
 */
function writeAllNow(handle: FileHandle, bytes: Buffer, position: number): void {
  let written = 0
  while (written < bytes.length) written += writeSync(handle.fd, bytes, written, bytes.length - written, position + written)
}

/** CRC-32 of the first `size` bytes read through `handle` (of fewer if the file is shorter). */
async function crcOfPrefix(handle: FileHandle, size: number): Promise<number> {
  const chunk = Buffer.allocUnsafe(Math.max(1, Math.min(SCAN_CHUNK_BYTES, size)))
  let crc = 0
  for (let position = 0; position < size;) {
    const { bytesRead } = await handle.read(chunk, 0, Math.min(chunk.length, size - position), position)
    if (bytesRead === 0) break
    crc = crc32(chunk.subarray(0, bytesRead), crc)
    position += bytesRead
  }
  return crc
}

async function crcOfFile(path: string, size: number): Promise<number> {
  const handle = await fs.open(path, constants.O_RDONLY)
  try {
    return await crcOfPrefix(handle, size)
  } finally {
    await handle.close()
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

/** `YYYYMMDD` in UTC, the segment a jid of that time lands in. */
function dayName(date: Date): string {
  return date.toISOString().slice(0, 10).replaceAll('-', '')
}
