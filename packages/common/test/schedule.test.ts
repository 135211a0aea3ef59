import { describe, expect, it } from 'vitest'
import { nextScheduleRun, parseScheduleEntry, ScheduleError, Scheduler, type ScheduleEntry } from '../src/index.js'

describe('schedule entries', () => {
  it("reads Salt's keys: the interval units add up, defaults as Salt's", () => {
    const entry = parseScheduleEntry('job1', { function: 'test.ping', minutes: 1, seconds: 30, job_args: ['a'], kwargs: { k: 1 } })
    expect(entry).toMatchObject({
      name: 'job1',
      function: 'test.ping',
      intervalMs: 90_000,
      cron: undefined,
      maxrunning: 1,
      returnJob: true,
      enabled: true,
      args: ['a'],
      kwargs: { k: 1 },
    })
    expect(parseScheduleEntry('d', { function: 'jobs.list_jobs', days: 1, hours: 1 }).intervalMs).toBe(90_000_000)
  })

  it('refuses what cannot run, naming the entry and the key', () => {
    expect(() => parseScheduleEntry('j', { seconds: 5 })).toThrow(/schedule job "j": function must be/)
    expect(() => parseScheduleEntry('j', { function: 'test.ping' })).toThrow(/needs seconds, minutes, hours, days or cron/)
    expect(() => parseScheduleEntry('j', { function: 'test.ping', seconds: 5, cron: '* * * * *' })).toThrow(/not both/)
    expect(() => parseScheduleEntry('j', { function: 'test.ping', cron: 'every tuesday' })).toThrow(ScheduleError)
    expect(() => parseScheduleEntry('j', { function: 'test.ping', seconds: -1 })).toThrow(/seconds must be a non-negative number/)
    expect(() => parseScheduleEntry('j', { function: 'test.ping', when: '5pm' })).toThrow(/when is not supported/)
    expect(() => parseScheduleEntry('j', { function: 'test.ping', seconds: 5, maxrunning: 0 })).toThrow(/maxrunning/)
  })

  it('computes the next run: the interval, the next cron time, plus a splay inside its bounds', () => {
    const from = Date.UTC(2026, 10, 26, 10, 7, 30)
    expect(nextScheduleRun(parseScheduleEntry('i', { function: 'test.ping', seconds: 2 }), from)).toBe(from + 2000)
    const cron = nextScheduleRun(parseScheduleEntry('c', { function: 'test.ping', cron: '*/5 * * * *' }), from)!
    expect(new Date(cron).getUTCMinutes() % 5).toBe(0)
    expect(cron - from).toBeGreaterThan(0)
    expect(cron - from).toBeLessThanOrEqual(5 * 60_000)
    const splayed = parseScheduleEntry('s', { function: 'test.ping', seconds: 10, splay: { start: 2, end: 4 } })
    expect(nextScheduleRun(splayed, from, () => 0)).toBe(from + 12_000)
    expect(nextScheduleRun(splayed, from, () => 0.999)).toBeLessThanOrEqual(from + 14_000)
  })
})

describe('the scheduler', () => {
  it('skips a run while maxrunning runs are going, and skips disabled entries unless forced', async () => {
    const releases: Array<() => void> = []
    const ran: string[] = []
    const scheduler = new Scheduler({
      run: (entry: ScheduleEntry) => {
        ran.push(entry.name)
        return new Promise<void>((resolve) => releases.push(resolve))
      },
    })
    scheduler.set(parseScheduleEntry('busy', { function: 'test.sleep', hours: 1 }))
    scheduler.set(parseScheduleEntry('off', { function: 'test.ping', hours: 1, enabled: false }))
    scheduler.runNow('busy')
    scheduler.runNow('busy') // maxrunning 1: skipped
    expect(ran).toEqual(['busy'])
    releases.shift()!()
    await Promise.resolve()
    await Promise.resolve()
    scheduler.runNow('busy')
    scheduler.runNow('off') // forced: runs although disabled
    expect(ran).toEqual(['busy', 'busy', 'off'])
    expect(scheduler.runNow('nothing')).toBe(false)
    scheduler.stop()
    for (const release of releases) release()
  })
})
