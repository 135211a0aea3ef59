import type { ReturnLoad } from '@brine/common'

/** What the master records about a job when it publishes it. */
export interface JobRecord {
  jid: string
  /** The published load (`{jid, fun, arg, kwarg, tgt, tgt_type, ret, user, …}`). */
  load: Record<string, unknown>
  /** The minions expected to answer. */
  minions: string[]
  /** Returns received, by minion id. */
  returns: Map<string, ReturnLoad>
}

/**
 * Where the master keeps jobs and their returns. The in-memory store below is the first
 * implementation; the persistent job cache (DESIGN §7) replaces it behind this interface.
 */
export interface JobStore {
  saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[]): Promise<void>
  /** Stores `id`'s return for `jid`; false (and nothing stored) when that pair was already stored. */
  saveReturn(jid: string, id: string, ret: ReturnLoad): Promise<boolean>
  getJob(jid: string): Promise<JobRecord | undefined>
}

/**
 * Jobs in memory, lost with the process. A return for a jid the store never saw (a job started by
 * another master, or before a restart) is kept under a record with no load.
 */
export class MemoryJobStore implements JobStore {
  readonly #jobs = new Map<string, JobRecord>()

  async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[]): Promise<void> {
    const existing = this.#jobs.get(jid)
    this.#jobs.set(jid, { jid, load, minions: [...minions], returns: existing?.returns ?? new Map() })
  }

  async saveReturn(jid: string, id: string, ret: ReturnLoad): Promise<boolean> {
    let job = this.#jobs.get(jid)
    if (job === undefined) {
      job = { jid, load: {}, minions: [], returns: new Map() }
      this.#jobs.set(jid, job)
    }
    if (job.returns.has(id)) return false
    job.returns.set(id, ret)
    return true
  }

  async getJob(jid: string): Promise<JobRecord | undefined> {
    return this.#jobs.get(jid)
  }
}
