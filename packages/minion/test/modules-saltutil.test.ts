import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { collectGrains } from '../src/modules/grains.js'
import { deadline, makeFixture } from './modules-fixture.js'

const scratch = mkdtempSync(join(tmpdir(), 'brine-saltutil-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('saltutil module', () => {
  it('running, find_job and kill_job on a running test.sleep', async () => {
    const { run, start, jobs } = makeFixture()
    const sleeper = start('test.sleep', [60])

    const running = (await run('saltutil.running')).return as Record<string, unknown>[]
    expect(running).toEqual([expect.objectContaining({ jid: sleeper.jid, fun: 'test.sleep', arg: [60], pid: process.pid })])

    expect((await run('saltutil.find_job', [sleeper.jid])).return).toMatchObject({ jid: sleeper.jid, fun: 'test.sleep', pid: process.pid })
    expect((await run('saltutil.is_running', ['test.*'])).return).toHaveLength(1)
    expect((await run('saltutil.is_running', ['cmd.*'])).return).toEqual([])

    expect(await run('saltutil.kill_job', [sleeper.jid])).toEqual({
      return: `Signal 9 sent to job ${sleeper.jid} at pid ${process.pid}`,
      retcode: 0,
      success: true,
    })
    const result = await deadline(sleeper.result, 10_000, 'the killed test.sleep to return')
    expect(result).toMatchObject({ retcode: 1, success: false, killed: true })
    expect((await run('saltutil.find_job', [sleeper.jid])).return).toEqual({})
    expect(jobs.size).toBe(0)
  })

  it('find_job and kill_job of an unknown jid return {} and ""', async () => {
    const { run } = makeFixture()
    expect((await run('saltutil.find_job', ['20990101000000000000'])).return).toEqual({})
    expect((await run('saltutil.kill_job', ['20990101000000000000'])).return).toBe('')
    expect((await run('saltutil.running')).return).toEqual([])
  })

  it('term_job and signal_job report the signal number sent', async () => {
    const { run, start } = makeFixture()
    const first = start('test.sleep', [60])
    expect((await run('saltutil.term_job', [first.jid])).return).toBe(`Signal 15 sent to job ${first.jid} at pid ${process.pid}`)
    await deadline(first.result, 10_000, 'the terminated test.sleep')
    const second = start('test.sleep', [60])
    expect((await run('saltutil.signal_job', [second.jid, 'SIGINT'])).return).toBe(`Signal 2 sent to job ${second.jid} at pid ${process.pid}`)
    await deadline(second.result, 10_000, 'the interrupted test.sleep')
  })

  it('sync_grains recomputes grains in place (keeping persisted ones) and returns []', async () => {
    const cachedir = join(scratch, 'cache')
    const shared = await collectGrains('m1', { cachedir })
    const { run } = makeFixture({ cachedir }, {}, shared)
    await run('grains.setval', ['role', 'db'])
    shared.stale = 'gone after sync'
    expect(await run('saltutil.sync_grains')).toEqual({ return: [], retcode: 0, success: true })
    expect(shared.stale).toBeUndefined()
    expect(shared.role).toBe('db')
    expect(shared.kernel).toBe('Linux')
  })
})
