import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { RemoteError, type RequestClient } from '@brine/transport'
import { masterVersion, type Master } from '../src/index.js'
import { jidToTime, parseTimeArgument } from '../src/runners/jobs.js'
import { compareVersions } from '../src/runners/manage.js'
import { clearClient, cleanups, FakeMinion, runCleanups, startMaster, tempDir, watchSubscribers, type EventLog } from './helpers.js'

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp'] as const

/** Answers each publish whose fun is in `answers` (others are ignored: a minion that stays silent). */
function respond(minion: FakeMinion, answers: Record<string, unknown>): void {
  let stopped = false
  cleanups.push(async () => (stopped = true))
  void (async () => {
    for (let count = 1; !stopped; count++) {
      let job: Record<string, unknown>
      try {
        job = minion.open(await minion.nthPublish(count))
      } catch {
        return
      }
      const fun = String(job['fun'])
      if (stopped || !Object.hasOwn(answers, fun)) continue
      await minion
        .sealed({ cmd: '_return', id: minion.id, jid: job['jid'], fun, fun_args: job['arg'], return: answers[fun], retcode: 0, success: true })
        .catch(() => {})
    }
  })()
}

interface Setup {
  master: Master
  events: EventLog
  client: RequestClient
  minions: FakeMinion[]
  runner: (fun: string, arg?: unknown[], kwarg?: Record<string, unknown>) => Promise<{ jid: string; return: unknown; success: boolean }>
  publish: (load: Record<string, unknown>) => Promise<{ jid: string; minions: string[] }>
}

async function setup(transport: string, ids: string[]): Promise<Setup> {
  const dir = await tempDir()
  const { master, events } = await startMaster(dir, { transport, auto_accept: true })
  const address = { host: '127.0.0.1', publishPort: master.opts.publish_port, retPort: master.opts.ret_port }
  const subscribers = watchSubscribers(master.endpoints[0]!.publish)
  const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
  await subscribers(ids.length)
  for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
  const client = await clearClient(transport, address)
  const key = master.rootKey
  const runner = async (fun: string, arg: unknown[] = [], kwarg: Record<string, unknown> = {}) =>
    (await client.send({ enc: 'clear', load: { cmd: 'runner', key, fun, arg, kwarg, user: 'alice' } })) as { jid: string; return: unknown; success: boolean }
  const publish = async (load: Record<string, unknown>) =>
    (await client.send({ enc: 'clear', load: { cmd: 'publish', key, tgt_type: 'glob', arg: [], kwarg: {}, ret: '', user: 'root', ...load } })) as { jid: string; minions: string[] }
  return { master, events, client, minions, runner, publish }
}

describe('runner helpers', () => {
  it("formats and parses Salt's job times", () => {
    expect(jidToTime('20261122170903123456')).toBe('2026, Nov 22 17:09:03.123456')
    expect(parseTimeArgument('2026, Nov 22 17:09', 'start_time').toISOString()).toBe('2026-11-22T17:09:00.000Z')
    expect(parseTimeArgument('2026-11-22T17:09:03', 'start_time').toISOString()).toBe('2026-11-22T17:09:03.000Z')
    expect(parseTimeArgument('20261122170903123456', 'start_time').toISOString()).toBe('2026-11-22T17:09:03.123Z')
    expect(() => parseTimeArgument('yesterday-ish', 'end_time')).toThrow(/'end_time' is not a time/)
    expect([compareVersions('0.10.0', '0.9.9'), compareVersions('1.0.0', '1.0.0'), compareVersions('0.1.0', '0.2.0')]).toEqual([1, 0, -1])
  })
})

describe.each(TRANSPORTS)('runners over %s', (transport) => {
  it('jobs.lookup_jid, list_jobs, print_job read the job cache; runs fire salt/run events', async () => {
    const { runner, publish, minions, events } = await setup(transport, ['web1', 'db1'])
    const job = await publish({ tgt: '*', fun: 'test.echo', arg: ['hi'], kwarg: { loud: true } })
    expect(job.minions.sort()).toEqual(['db1', 'web1'])
    const web1 = minions[0]!
    await web1.nthPublish(1)
    expect(await web1.sealed({ cmd: '_return', id: 'web1', jid: job.jid, fun: 'test.echo', fun_args: ['hi'], return: 'hi', retcode: 0, success: true })).toEqual({ ok: true })

    const lookup = await runner('jobs.lookup_jid', [job.jid])
    expect(lookup.return).toEqual({ web1: 'hi' })
    expect(lookup.success).toBe(true)
    expect((await runner('jobs.lookup_jid', [job.jid], { missing: 'True' })).return).toEqual({ web1: 'hi', db1: 'Minion did not return' })
    expect((await runner('jobs.lookup_jid', ['20200101000000000000'])).return).toEqual({})

    // The run's events, Salt's shapes.
    const created = await events.next(`salt/run/${lookup.jid}/new`)
    expect(created.data).toEqual({ fun: 'runner.jobs.lookup_jid', fun_args: [job.jid], jid: lookup.jid, user: 'alice', _stamp: expect.any(String) })
    const done = await events.next(`salt/run/${lookup.jid}/ret`)
    expect(done.data).toEqual({ fun: 'runner.jobs.lookup_jid', fun_args: [job.jid], jid: lookup.jid, return: { web1: 'hi' }, success: true, user: 'alice', _stamp: expect.any(String) })

    const other = await publish({ tgt: 'db1', fun: 'test.ping' })
    const described = {
      Function: 'test.echo',
      Arguments: ['hi', { loud: true, __kwarg__: true }],
      Target: '*',
      'Target-type': 'glob',
      User: 'root',
      StartTime: jidToTime(job.jid),
    }
    const all = (await runner('jobs.list_jobs')).return as Record<string, unknown>
    expect(Object.keys(all)).toEqual([job.jid, other.jid])
    expect(all[job.jid]).toEqual(described)
    expect(Object.keys((await runner('jobs.list_jobs', [], { search_function: 'test.e*' })).return as object)).toEqual([job.jid])
    expect(Object.keys((await runner('jobs.list_jobs', [], { search_target: 'db*' })).return as object)).toEqual([other.jid])
    expect((await runner('jobs.list_jobs', [], { start_time: '2999, Jan 01 00:00' })).return).toEqual({})
    expect(Object.keys((await runner('jobs.list_jobs', [], { end_time: other.jid, start_time: job.jid })).return as object)).toEqual([job.jid, other.jid])

    expect((await runner('jobs.print_job', [job.jid])).return).toEqual({
      [job.jid]: { ...described, Minions: ['db1', 'web1'], Result: { web1: { return: 'hi', retcode: 0, success: true } } },
    })

    // A failing runner answers Salt's exception text with success false; an unknown one is refused with the list.
    const bad = await runner('jobs.lookup_jid')
    expect(bad.success).toBe(false)
    expect(bad.return).toMatch(/^Exception occurred in runner jobs.lookup_jid: MalformedRequestError: .*'jid' is required/)
    expect((await events.next(`salt/run/${bad.jid}/ret`)).data).toMatchObject({ success: false })
    const unknown = await runner('jobs.nope').then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(unknown).toBeInstanceOf(RemoteError)
    expect((unknown as RemoteError).remoteName).toBe('UnknownRunnerError')
    expect((unknown as Error).message).toMatch(/unknown runner "jobs.nope" \(available: event.send, fileserver.dir_list, fileserver.envs, fileserver.file_list, fileserver.stats, jobs.active, jobs.audit, jobs.list_job, jobs.list_jobs, jobs.lookup_jid, jobs.print_job, manage.down/)
  })

  it('manage.up/down/status/versions ping the accepted minions; down removekeys deletes and rotates; jobs.active', async () => {
    const { runner, minions, master, events } = await setup(transport, ['web1', 'web2', 'db1'])
    const running = [{ jid: '20260101000000000001', fun: 'test.sleep', arg: [30], pid: 4242, tgt: '*', tgt_type: 'glob', user: 'root', _stamp: '2026-01-01T00:00:00Z' }]
    respond(minions[0]!, { 'test.ping': true, 'test.version': masterVersion(), 'saltutil.running': running })
    respond(minions[1]!, { 'test.ping': true, 'test.version': '0.0.1', 'saltutil.running': [] })
    // db1 never answers, not even find_job. timeout and gather_job_timeout (seconds) bound each wait for it.
    const timeout = { timeout: 0.3, gather_job_timeout: 0.3 }
    expect((await runner('manage.status', [], timeout)).return).toEqual({ up: ['web1', 'web2'], down: ['db1'] })
    expect((await runner('manage.up', [], timeout)).return).toEqual(['web1', 'web2'])
    expect((await runner('manage.versions', [], timeout)).return).toEqual({
      'Minion offline': { db1: false },
      'Minion requires update': { web2: '0.0.1' },
      'Up to date': { web1: masterVersion() },
      Master: masterVersion(),
    })
    expect((await runner('jobs.active', [], timeout)).return).toEqual({
      '20260101000000000001': {
        Function: 'test.sleep',
        Arguments: [30],
        Target: '*',
        'Target-type': 'glob',
        User: 'root',
        StartTime: '2026, Jan 01 00:00:00.000001',
        Running: [{ web1: 4242 }],
        Returned: [],
      },
    })
    expect((await runner('manage.down', [], timeout)).return).toEqual(['db1'])
    expect((await master.store.list()).minions).toContain('db1')
    const gen = master.session.gen
    expect((await runner('manage.down', [], { ...timeout, removekeys: 'True' })).return).toEqual(['db1'])
    expect((await master.store.list()).minions.sort()).toEqual(['web1', 'web2'])
    expect(events.tagged('salt/key').at(-1)?.data).toMatchObject({ act: 'delete', id: 'db1', result: true })
    expect(master.session.gen).not.toBe(gen)
  })
})

describe('events keep Salt shapes', () => {
  it('salt/job/<jid>/new carries minions; a return event has exactly the return load keys', async () => {
    const { publish, minions, events } = await setup('tcp', ['web1'])
    const job = await publish({ tgt: 'web1', fun: 'test.ping' })
    expect((await events.next(`salt/job/${job.jid}/new`)).data).toEqual({
      jid: job.jid,
      tgt_type: 'glob',
      tgt: 'web1',
      user: 'root',
      fun: 'test.ping',
      arg: [],
      minions: ['web1'],
      missing: [],
      _stamp: expect.any(String),
    })
    await minions[0]!.nthPublish(1)
    await minions[0]!.sealed({ cmd: '_return', id: 'web1', jid: job.jid, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true, extra: 'dropped', out: 'nested' })
    const ret = await events.next(`salt/job/${job.jid}/ret/web1`)
    expect(Object.keys(ret.data).sort()).toEqual(['_stamp', 'cmd', 'fun', 'fun_args', 'id', 'jid', 'out', 'retcode', 'return', 'success'])
    expect(new Date(ret.data._stamp!).toISOString()).toBe(ret.data._stamp)
  })
})
