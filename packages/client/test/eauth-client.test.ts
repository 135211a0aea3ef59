import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { deadline } from '@brine/transport-compliance'
// Tests only: a real master in-process and fake minions.
import { Master } from '../../master/src/index.js'
import { addressOf, cleanups, EventLog, FakeMinion, masterConfig, runCleanups, stopNatsServer, tempDir, watchSubscribers } from '../../master/test/helpers.js'
import { EauthClient, LocalClient, RunnerClient, WheelClient } from '../src/index.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const WAIT_MS = 10_000

describe.each(['zeromq', 'tcp', 'nats'])('eauth credentials against a real master over %s', (transport) => {
  it('mkToken, then LocalClient, RunnerClient and WheelClient as that user without the root key; rmToken revokes', async () => {
    const dir = await tempDir()
    await writeFile(join(dir, 'users'), 'alice:wonder\n')
    const opts = await masterConfig(dir, {
      transport,
      auto_accept: true,
      token_dir: join(dir, 'tokens'),
      external_auth: { file: { '^filename': join(dir, 'users'), alice: [{ 'web*': ['test.*'] }, '@jobs', { '@wheel': ['key.list_all'] }] } },
    })
    const master = new Master(opts)
    cleanups.push(() => master.stop())
    const events = new EventLog(master)
    await master.start()
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const address = addressOf(master)
    const minions = await Promise.all(['web1', 'db1'].map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
    const web1 = minions[0]
    await subscribers(2)

    const eauth = new EauthClient({ opts })
    cleanups.push(() => eauth.close())
    const refused = await eauth.mkToken({ eauth: 'file', username: 'alice', password: 'nope' }).catch((error: unknown) => error)
    expect(refused).toMatchObject({ name: 'EauthError', context: { remoteName: 'EauthAuthenticationError' } })
    const made = await eauth.mkToken({ eauth: 'file', username: 'alice', password: 'wonder' })
    expect(made).toMatchObject({ name: 'alice', eauth: 'file' })
    expect(await eauth.getToken(made.token)).toMatchObject({ name: 'alice', token: made.token })

    // Credentials given: the root key is never read (a cachedir without it would do).
    const credentials = { token: made.token }
    const local = new LocalClient({ opts: { ...opts, cachedir: join(dir, 'no-such-cachedir') }, credentials })
    const runner = new RunnerClient({ opts, credentials })
    const wheel = new WheelClient({ opts, credentials })
    cleanups.push(
      () => local.close(),
      () => runner.close(),
      () => wheel.close(),
    )
    for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
    const job = await local.runJob('web1', 'test.ping', [], { listen: true, timeout: WAIT_MS })
    expect(job.minions).toEqual(['web1'])
    await web1!.nthPublish(1)
    expect(await web1!.returnJob(job.jid, true)).toEqual({ ok: true })
    const returns = []
    for await (const item of job.returns({ timeout: WAIT_MS })) returns.push(item)
    expect(returns).toEqual([{ id: 'web1', status: 'returned', ret: true, retcode: 0, success: true, jid: job.jid }])
    expect((await events.next(`salt/job/${job.jid}/new`)).data['user']).toBe('alice')
    const denied = await local.runJob('db1', 'test.ping').catch((error: unknown) => error)
    expect((denied as Error).message).toContain('user "alice" may not run "test.ping" on db1')

    expect(await runner.cmd('jobs.list_jobs')).toHaveProperty(job.jid)
    const asyncRun = await runner.cmdAsync('jobs.list_jobs')
    expect(asyncRun.tag).toBe(`salt/run/${asyncRun.jid}`)
    await deadline(events.next(`salt/run/${asyncRun.jid}/ret`), WAIT_MS, 'the async runner return')
    expect(await wheel.cmdFull('key.list_all')).toMatchObject({ user: 'alice', success: true, return: { minions: ['db1', 'web1'] } })
    await expect(wheel.cmd('key.delete', { match: 'db1' })).rejects.toThrow('user "alice" may not run wheel "key.delete"')

    expect(await eauth.rmToken(made.token)).toBe(true)
    await expect(runner.cmd('jobs.list_jobs')).rejects.toMatchObject({ context: { remoteName: 'TokenAuthenticationError' } })
  })
})
