import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { OpenJobs } from '../src/index.js'

const dirs: string[] = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})
async function journal(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'oj-'))
  dirs.push(dir)
  return join(dir, 'syndic', 'jobs.journal')
}

const A = '20260101000000000001'
const B = '20260101000000000002'
const C = '20260101000000000003'

describe("the syndic's open jobs", () => {
  it('closes a job once every expected minion (and those lower syndics announced) went up and no lower syndic is pending', async () => {
    const jobs = new OpenJobs({ file: await journal(), ttlMs: 60_000 })
    await jobs.load()
    const job = await jobs.open(A, 'top:4506', ['m1', 'm2'], ['low'])
    expect(jobs.see(A, 'm1')).toBe(false)
    jobs.settle(A, ['m1', 'm2'])
    // Still waiting for the lower syndic's announcement.
    expect(jobs.get(A)).toBe(job)
    jobs.expect(A, ['low1'])
    job.pendingSyndics.delete('low')
    expect(jobs.closeIfComplete(job)).toBe(false)
    expect(jobs.see(A, 'm2')).toBe(false)
    expect(jobs.see(A, 'low1')).toBe(true)
    jobs.settle(A, ['low1'])
    expect(jobs.get(A)).toBeUndefined()
    await jobs.closeJournal()
  })

  it('reads back after a restart the jobs still open, with the minions they expect, and drops closed and expired ones', async () => {
    const file = await journal()
    const first = new OpenJobs({ file, ttlMs: 60_000 })
    await first.load()
    await first.open(A, 'top:4506', ['m1'], [])
    await first.open(B, 'other:4506', ['m2', 'm3'], [])
    first.expect(B, ['low1'])
    await first.open(C, 'top:4506', ['m4'], [])
    first.settle(A, ['m1'])
    await first.closeJournal()

    const again = new OpenJobs({ file, ttlMs: 60_000 })
    const open = await again.load()
    expect(open.map((job) => [job.jid, job.master, [...job.expected].sort(), job.known])).toEqual([
      [B, 'other:4506', ['low1', 'm2', 'm3'], false],
      [C, 'top:4506', ['m4'], false],
    ])
    // The journal was rewritten with only the open jobs.
    expect((await readFile(file, 'utf8')).trim().split('\n')).toHaveLength(2)
    expect(again.expire(Date.now() + 120_000)).toBe(2)
    await again.closeJournal()
    const later = new OpenJobs({ file, ttlMs: 60_000 })
    expect(await later.load()).toEqual([])
    await later.closeJournal()
  })

  it('watches at most `limit` jobs: the oldest is let go first', async () => {
    const jobs = new OpenJobs({ file: await journal(), ttlMs: 60_000, limit: 2 })
    await jobs.load()
    for (const jid of [A, B, C]) await jobs.open(jid, 'top:4506', ['m'], [])
    expect(jobs.all().map((job) => job.jid)).toEqual([B, C])
    await jobs.closeJournal()
  })
})
