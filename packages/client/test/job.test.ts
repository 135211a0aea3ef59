import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { deadline } from '@brine/transport-compliance'
import { FakeMinion, runCleanups, stopNatsServer } from '../../master/test/helpers.js'
import { JobClosedError } from '../src/errors.js'
import { setup } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const WAIT_MS = 10_000

describe.each(['zeromq', 'tcp', 'nats'])('Job against a real master over %s', (transport) => {
  it('holds no bus reader until collected; a late returns() catches up from the job cache, keeping retcode and success', async () => {
    const { events, client, minions } = await setup(transport, ['web1', 'db1'])
    const [web1, db1] = minions as [FakeMinion, FakeMinion]
    const job = await client.runJob('*', 'test.ping')
    expect([...job.minions].sort()).toEqual(['db1', 'web1'])
    expect(job.listening).toBe(false)
    expect(client.openReaders).toBe(0)

    // web1 fails before anyone reads: stored and fired while no reader is open.
    await web1.nthPublish(1)
    expect(
      await web1.sealed({ cmd: '_return', id: 'web1', jid: job.jid, fun: 'test.ping', fun_args: [], return: 'early', retcode: 2, success: false }),
    ).toEqual({ ok: true })
    await events.next(`salt/job/${job.jid}/ret/web1`)
    expect(client.openReaders).toBe(0)

    const returns = job.returns({ timeout: WAIT_MS })[Symbol.asyncIterator]()
    const first = await deadline(returns.next(), WAIT_MS, "web1's return from the job cache")
    expect(first.value).toEqual({ id: 'web1', status: 'returned', ret: 'early', retcode: 2, success: false, jid: job.jid, fromCache: true })
    expect(client.openReaders).toBe(1)
    expect(job.listening).toBe(true)

    // db1 returns while the reader is open: it arrives from the bus.
    await db1.nthPublish(1)
    expect(await db1.returnJob(job.jid, 'late')).toEqual({ ok: true })
    const second = await deadline(returns.next(), WAIT_MS, "db1's return from the bus")
    expect(second.value).toEqual({ id: 'db1', status: 'returned', ret: 'late', retcode: 0, success: true, jid: job.jid })
    expect((await deadline(returns.next(), WAIT_MS, 'the end of the returns')).done).toBe(true)
    expect(client.openReaders).toBe(0)
    expect(job.listening).toBe(false)
  })

  it('listen: true opens the reader before the publish and `await using` releases it; a closed Job refuses returns()', async () => {
    const { client } = await setup(transport, ['web1'])
    {
      await using job = await client.runJob('web1', 'test.ping', [], { listen: true })
      expect(job.minions).toEqual(['web1'])
      expect(job.listening).toBe(true)
      expect(client.openReaders).toBe(1)
    }
    expect(client.openReaders).toBe(0)
    const job = await client.runJob('web1', 'test.ping')
    await job.close()
    await expect(job.returns().next()).rejects.toBeInstanceOf(JobClosedError)
    // Nothing matched: a jid is still named, and the Job expects no one.
    const none = await client.runJob('nobody', 'test.ping', [], { listen: true })
    expect(none.jid).toMatch(/^\d{20}$/)
    expect(none.minions).toEqual([])
    expect(client.openReaders).toBe(0)
    expect(await client.cmdAsync('nobody', 'test.ping')).toBe('')
  })
})
