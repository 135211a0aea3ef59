import { selectJobs, type JobCache, type JobRecord, type JobSummary, type ListJobsFilter } from '@brine/common'
import { jidToDate, type ReturnLoad } from '@brine/protocol'

// selectJobs moved to @brine/common (job-cache.ts) so @brine/returners can share the filter semantics.
export { selectJobs }

/**
 * Jobs in memory, lost with the process: a cache tests inject (`new Master(opts, {jobs})`); a master left to
 * itself opens the one `master_job_cache` names. A
 * return for a jid the store never saw (a job started by another master, or before a restart) is kept
 * under a record with no load.
 */
export class MemoryJobStore implements JobCache {
  readonly #jobs = new Map<string, JobRecord>()

  async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[]): Promise<void> {
    const existing = this.#jobs.get(jid)
    this.#jobs.set(jid, { jid, load, minions: [...minions], returns: existing?.returns ?? {} })
  }

  async saveReturn(jid: string, id: string, ret: ReturnLoad): Promise<boolean> {
    let job = this.#jobs.get(jid)
    if (job === undefined) {
      job = { jid, load: {}, minions: [], returns: {} }
      this.#jobs.set(jid, job)
    }
    if (Object.hasOwn(job.returns, id)) return false
    job.returns[id] = ret
    return true
  }

  async getJob(jid: string): Promise<JobRecord | undefined> {
    return this.#jobs.get(jid)
  }

  async listJobs(filter: ListJobsFilter = {}): Promise<JobSummary[]> {
    return selectJobs([...this.#jobs.values()], filter).map(({ jid, load, minions }) => ({ jid, load, minions }))
  }

  async prune(before: Date): Promise<number> {
    let removed = 0
    for (const jid of this.#jobs.keys()) {
      if (jidToDate(jid) < before) {
        this.#jobs.delete(jid)
        removed++
      }
    }
    return removed
  }

  async newestJid(): Promise<string | undefined> {
    let newest: string | undefined
    for (const jid of this.#jobs.keys()) if (newest === undefined || jid > newest) newest = jid
    return newest
  }

  async close(): Promise<void> {}
}
