import { globToRegExp } from './glob.js'

/** A `jobs.list_jobs` entry, as far as the console reads it. */
export type JobSummary = Record<string, unknown>

/**
 * Whether a listed job's target names minion `id`: a glob (by pattern) or a list. Other target types
 * (grain, compound, …) need the minions' data to resolve and are not counted.
 */
export function targetNames(job: JobSummary, id: string): boolean {
  const target = job['Target']
  if (Array.isArray(target)) return target.includes(id)
  if (typeof target !== 'string') return false
  const type = job['Target-type'] ?? 'glob'
  if (type === 'list') return target.split(',').includes(id)
  return type === 'glob' && globToRegExp(target).test(id)
}

/** The newest of the most recent `recent` jobs whose target names each of `ids` (jids sort by time). */
export function lastJobs(jobs: Record<string, JobSummary>, ids: readonly string[], recent = 200): Map<string, string> {
  const newest = Object.keys(jobs).sort().reverse().slice(0, recent)
  const out = new Map<string, string>()
  for (const jid of newest) {
    const job = jobs[jid]!
    for (const id of ids) if (!out.has(id) && targetNames(job, id)) out.set(id, jid)
    if (out.size === ids.length) break
  }
  return out
}
