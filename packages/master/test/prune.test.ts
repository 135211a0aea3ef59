import { describe, expect, it } from 'vitest'
import { defaultsFor, type MasterConfig } from '@brine/common'
import { Master, MemoryJobStore } from '../src/index.js'

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
})
