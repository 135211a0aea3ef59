import { jidToDate, type ReturnLoad } from '@brine/protocol'
import { globToRegExp } from '@brine/targeting'

/** A job as the cache holds it: the published load, the minions expected, and the returns so far. */
export interface JobRecord {
  jid: string
  /** The published load (`{jid, fun, arg, kwarg, tgt, tgt_type, ret, user, …}`); `{}` when only returns are known. */
  load: Record<string, unknown>
  /** The minions expected to answer. */
  minions: string[]
  /** Returns received, by minion id. */
  returns: Record<string, ReturnLoad>
}

/** Filters for {@link JobCache.listJobs}, as Salt's `jobs.list_jobs` takes them. */
export interface ListJobsFilter {
  /** Glob on the function name (`search_function`). */
  fun?: string
  /** Glob on the target (`search_target`); a list target matches if any of its entries matches. */
  target?: string
  user?: string
  /** Jobs started at or after this time (`start_time`). */
  startTime?: Date
  /** Jobs started at or before this time (`end_time`). */
  endTime?: Date
  /** Newest first, at most this many. */
  limit?: number
}

/** One line of `jobs.list_jobs`: the job's load, without its returns. */
export interface JobSummary {
  jid: string
  load: Record<string, unknown>
  minions: string[]
}

/**
 * Where a master keeps jobs and returns (DESIGN §7): the embedded default and PostgreSQL in
 * `@brine/returners`, and an in-memory one for tests. Writing the same (jid, id) return twice stores it
 * once; `saveReturn` says whether this call was the first, so the master fires one event.
 */
export interface SaveReturnOptions {
  /**
   * Called (at most once, before the save resolves) as soon as `getJob` reads the return and a crash of
   * this process can no longer lose it, if the cache knows that moment before the return is durable
   * (the local cache: written, not yet synced). The master fires the return's event then; a save
   * that then fails still rejects. A cache that does not call it leaves that to the save's resolution.
   */
  onWritten?: () => void
}

export interface SaveJobOptions {
  /**
   * Nobody waits for this record to be durable (the master's publish path): a cache that group-commits may
   * hold its sync briefly for the next save's, so a job and its first returns share one (the local cache:
   * {@link LAZY_JOB_SYNC_MS}). The write, and what a `kill -9` cannot lose, are not delayed.
   */
  lazy?: boolean
  /**
   * Called (at most once, before the save resolves) as soon as a crash of this process can no longer lose the
   * record, if the cache knows that moment before the record is durable (the local cache: written, not yet
   * synced). The master publishes the job then: a master killed right after its publish, and started again,
   * must still find the job its minions return for. A cache that does not call it leaves that to the save's resolution.
   */
  onWritten?: () => void
}

/** How long the local cache holds a lazy job record's sync for the next save's (a job's first return, at N=1). */
export const LAZY_JOB_SYNC_MS = 20

export interface JobCache {
  saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[], options?: SaveJobOptions): Promise<void>
  /** Stores `id`'s return for `jid` durably before resolving; false (nothing stored) when already stored. */
  saveReturn(jid: string, id: string, ret: ReturnLoad, options?: SaveReturnOptions): Promise<boolean>
  getJob(jid: string): Promise<JobRecord | undefined>
  listJobs(filter?: ListJobsFilter): Promise<JobSummary[]>
  /** Removes jobs that started before `before` (keep_jobs); returns how many were removed. */
  prune(before: Date): Promise<number>
  /**
   * The newest jid the cache holds (a job or a return), or undefined when empty: the master prunes
   * against it rather than its own clock alone, so a clock jump does not empty the cache.
   */
  newestJid(): Promise<string | undefined>
  close(): Promise<void>
}

/** Applies `jobs.list_jobs` filters to job records, newest first. */
export function selectJobs<T extends { jid: string; load: Record<string, unknown> }>(jobs: T[], filter: ListJobsFilter): T[] {
  const fun = filter.fun === undefined ? undefined : globToRegExp(filter.fun)
  const target = filter.target === undefined ? undefined : globToRegExp(filter.target)
  const selected = jobs.filter(({ jid, load }) => {
    const started = jidToDate(jid)
    if (filter.startTime !== undefined && started < filter.startTime) return false
    if (filter.endTime !== undefined && started > filter.endTime) return false
    if (fun !== undefined && !fun.test(String(load['fun'] ?? ''))) return false
    if (filter.user !== undefined && load['user'] !== filter.user) return false
    if (target !== undefined) {
      const tgt = load['tgt']
      const targets = Array.isArray(tgt) ? tgt.map(String) : [String(tgt ?? '')]
      if (!targets.some((t) => target.test(t))) return false
    }
    return true
  })
  selected.sort((a, b) => (a.jid < b.jid ? 1 : a.jid > b.jid ? -1 : 0))
  return filter.limit === undefined ? selected : selected.slice(0, filter.limit)
}
