import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { defaultsFor, type MasterConfig } from '@brine/config'
import { LocalJobCache } from '@brine/returners'
import { createLogger } from '@brine/core'
import { Master, MemoryJobStore } from '../src/index.js'
import { masterConfig } from './helpers.js'

const HOUR_MS = 3_600_000

/** Salt's jid for a time (UTC, microseconds from `micro`). */
function jidAt(ms: number, micro = 0): string {
  return (
    new Date(ms)
      .toISOString()
      .replace(/[-:TZ.]/g, '')
      .slice(0, 14) + String(micro).padStart(6, '0')
  )
}

describe('keep_jobs', () => {
  it('prunes jobs older than keep_jobs hours and keeps recent ones, with the time injected', async () => {
    const jobs = new MemoryJobStore()
    const master = new Master({ ...defaultsFor('master'), keep_jobs: 24 } as MasterConfig, { jobs })
    const now = new Date('2026-11-22T12:00:00Z')
    await jobs.saveJob('20261120120000000000', { fun: 'test.ping' }, ['web1']) // two days old
    await jobs.saveJob('20261121115959000000', { fun: 'test.ping' }, ['web1']) // a second over a day
    await jobs.saveJob('20261121120001000000', { fun: 'test.ping' }, ['web1']) // a second under a day
    await jobs.saveJob('20261122115900000000', { fun: 'test.ping' }, ['web1']) // a minute old
    expect(await master.pruneJobs(now)).toBe(2)
    expect((await jobs.listJobs()).map((job) => job.jid)).toEqual(['20261122115900000000', '20261121120001000000'])
    expect(await master.pruneJobs(now)).toBe(0)
  })

  it('a master started with its clock three days fast prunes nothing it should keep, and says why once', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bm-'))
    try {
      const config = await masterConfig(dir, { transport: 'tcp', keep_jobs: 24 })
      // The cache as the master left it (real time): a job of 30 h ago, of 20 h, of an hour, and one just now.
      const real = Date.now()
      const kept = [jidAt(real, 4), jidAt(real - HOUR_MS, 3), jidAt(real - 20 * HOUR_MS, 2)]
      const old = jidAt(real - 30 * HOUR_MS, 1)
      const seeded = await new LocalJobCache({ cachedir: config.cachedir }).open()
      for (const jid of [old, ...kept]) {
        await seeded.saveJob(jid, { jid, fun: 'test.ping' }, ['web1'])
        await seeded.saveReturn(jid, 'web1', { cmd: '_return', id: 'web1', jid, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true })
      }
      await seeded.close()
      const segments = (await readdir(join(config.cachedir, 'jobs'))).filter((name) => name.endsWith('.log')).sort()

      const lines: string[] = []
      const fast = () => Date.now() + 72 * HOUR_MS
      const master = new Master(config, { now: fast, logger: createLogger({ level: 'warning', write: (line) => lines.push(line) }) })
      await master.start()
      try {
        // Started, it prunes once by itself; again here (serialised after that one), as its timer would.
        expect(await master.pruneJobs()).toBe(0)
        expect((await master.jobs.listJobs()).map((job) => job.jid)).toEqual(kept)
        for (const jid of kept) expect((await master.jobs.getJob(jid))?.returns['web1']).toMatchObject({ return: true })
        expect(await master.jobs.getJob(old)).toBeUndefined()
        // Measured against the cache's newest job, not the clock: every day file of the kept jobs is still there.
        const left = (await readdir(join(config.cachedir, 'jobs'))).filter((name) => name.endsWith('.log')).sort()
        for (const jid of kept) expect(left).toContain(`${jid.slice(0, 8)}.log`)
        expect(segments.length).toBeGreaterThanOrEqual(left.length)
        const warnings = lines.filter((line) => line.includes('past the newest job'))
        expect(warnings).toHaveLength(1)
        expect(warnings[0]).toMatch(
          new RegExp(
            `the master's clock \\(.*\\) is 3 d 0\\.0 h past the newest job \\(${kept[0]}\\), more than keep_jobs \\(24 h\\); keeping the jobs of keep_jobs before that job`,
          ),
        )
      } finally {
        await master.stop()
      }
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
