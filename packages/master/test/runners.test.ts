import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { type RequestClient } from '@brine/transport'
import { RemoteError } from '@brine/core'
import { masterVersion, type Master } from '../src/index.js'
import { jidToTime, parseTimeArgument } from '../src/runners/jobs.js'
import { compareVersions } from '../src/runners/manage.js'
import { addressOf, cleanups, clearClient, type EventLog, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

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
  const address = addressOf(master)
  const subscribers = watchSubscribers(master.endpoints[0]!.publish)
  const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
  await subscribers(ids.length)
  for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
  const client = await clearClient(transport, address)
  const key = master.rootKey
  const runner = async (fun: string, arg: unknown[] = [], kwarg: Record<string, unknown> = {}) =>
    (await client.send({ enc: 'clear', load: { cmd: 'runner', key, fun, arg, kwarg, user: 'alice' } })) as { jid: string; return: unknown; success: boolean }
  const publish = async (load: Record<string, unknown>) =>
    (await client.send({ enc: 'clear', load: { cmd: 'publish', key, tgt_type: 'glob', arg: [], kwarg: {}, ret: '', user: 'root', ...load } })) as {
      jid: string
      minions: string[]
    }
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
    expect(
      await web1.sealed({ cmd: '_return', id: 'web1', jid: job.jid, fun: 'test.echo', fun_args: ['hi'], return: 'hi', retcode: 0, success: true }),
    ).toEqual({ ok: true })

    const lookup = await runner('jobs.lookup_jid', [job.jid])
    expect(lookup.return).toEqual({ web1: 'hi' })
    expect(lookup.success).toBe(true)
    expect((await runner('jobs.lookup_jid', [job.jid], { missing: 'True' })).return).toEqual({ web1: 'hi', db1: 'Minion did not return' })
    expect((await runner('jobs.lookup_jid', ['20200101000000000000'])).return).toEqual({})

    // The run's events, Salt's shapes.
    const created = await events.next(`salt/run/${lookup.jid}/new`)
    expect(created.data).toEqual({ fun: 'runner.jobs.lookup_jid', fun_args: [job.jid], jid: lookup.jid, user: 'alice', _stamp: expect.any(String) })
    const done = await events.next(`salt/run/${lookup.jid}/ret`)
    expect(done.data).toEqual({
      fun: 'runner.jobs.lookup_jid',
      fun_args: [job.jid],
      jid: lookup.jid,
      return: { web1: 'hi' },
      success: true,
      user: 'alice',
      _stamp: expect.any(String),
    })

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
    expect((unknown as Error).message).toMatch(
      /unknown runner "jobs.nope" \(available: cache.grains, event.send, fileserver.dir_list, fileserver.envs, fileserver.file_list, fileserver.stats, jobs.active, jobs.audit, jobs.exit_success, jobs.last_run, jobs.list_job, jobs.list_jobs, jobs.lookup_jid, jobs.print_job, manage.alived, manage.allowed, manage.down/,
    )
  })

  it('manage.up/down/status/versions ping the accepted minions; down removekeys deletes and rotates; jobs.active', async () => {
    const { runner, minions, master, events } = await setup(transport, ['web1', 'web2', 'db1'])
    const running = [
      { jid: '20260101000000000001', fun: 'test.sleep', arg: [30], pid: 4242, tgt: '*', tgt_type: 'glob', user: 'root', _stamp: '2026-01-01T00:00:00Z' },
    ]
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

describe.each(TRANSPORTS)("Salt's test, jobs, manage and cache runners over %s", (transport) => {
  it('test.arg/raw_arg/metasyntactic/sleep/stream answer as Salt; stream fires salt/run/<jid>/progress', async () => {
    const { runner, events } = await setup(transport, [])
    expect((await runner('test.arg', [1, 'two'], { three: 3, __pub_user: 'x' })).return).toEqual({ args: [1, 'two'], kwargs: { three: 3 } })
    expect((await runner('test.raw_arg', [1], { __pub_user: 'x' })).return).toEqual({ args: [1], kwargs: { __pub_user: 'x' } })
    expect((await runner('test.metasyntactic', [], { locality: 'uk' })).return).toEqual(['wibble', 'wobble', 'wubble', 'flob'])
    expect((await runner('test.metasyntactic', ['fr'])).return).toBeNull()
    expect((await runner('test.sleep', [0.01])).return).toBe(true)
    expect((await runner('test.stdout_print')).return).toBe('bar')
    expect((await runner('test.get_opts')).return).toMatchObject({ transport, unique_jid: false })
    const bad = await runner('test.sleep', ['soon'])
    expect(bad).toMatchObject({ success: false, return: expect.stringMatching(/MalformedRequestError: .*'s_time' must be a number of seconds/) })
    const stream = await runner('test.stream')
    expect(stream.return).toBe(true)
    const progress = events.tagged(`salt/run/${stream.jid}/progress`)
    expect(progress.length).toBe(99)
    expect(progress[0]!.data).toMatchObject({ message: 'Runner is 1% done' })
    expect(progress[98]!.data).toMatchObject({ message: 'Runner is 99% done' })
  })

  it('jobs.exit_success, jobs.last_run; manage.present/not_present/list_state/alived; cache.grains', async () => {
    const { runner, publish, minions, master } = await setup(transport, ['web1', 'web2', 'db1'])
    const [web1, web2] = minions as [FakeMinion, FakeMinion, FakeMinion]
    const job = await publish({ tgt: '*', fun: 'test.echo', arg: ['x'] })
    await web1.nthPublish(1)
    await web2.nthPublish(1)
    expect(await web1.sealed({ cmd: '_return', id: 'web1', jid: job.jid, fun: 'test.echo', fun_args: ['x'], return: 'x', retcode: 0, success: true })).toEqual({
      ok: true,
    })
    expect(await web2.sealed({ cmd: '_return', id: 'web2', jid: job.jid, fun: 'test.echo', fun_args: ['x'], return: '', retcode: 0, success: true })).toEqual({
      ok: true,
    })
    expect((await runner('jobs.exit_success', [job.jid])).return).toEqual({ web1: true, web2: false, db1: false })
    expect((await runner('jobs.exit_success', ['20200101000000000000'])).return).toEqual({})
    const other = await publish({ tgt: 'db1', fun: 'test.ping', metadata: { ticket: 8, team: { name: 'ops' } } })
    const db1 = minions[2]!
    expect(db1.open(await db1.nthPublish(2))['metadata']).toEqual({ ticket: 8, team: { name: 'ops' } })
    expect(Object.keys((await runner('jobs.last_run')).return as object)).toEqual([other.jid])
    expect(Object.keys((await runner('jobs.last_run', [], { function: 'test.echo' })).return as object)).toEqual([job.jid])
    // A metadata filter finds the jobs with any of its keys equal (Salt's search_metadata); one that is not a mapping is refused with false, as in Salt.
    expect((await runner('jobs.last_run', [], { metadata: { ticket: 7 } })).return).toBe(false)
    expect((await runner('jobs.last_run', [], { metadata: 'ticket' })).return).toBe(false)
    expect((await runner('jobs.last_run', [], { metadata: { ticket: 7, team: { name: 'ops' } } })).return).toMatchObject({
      [other.jid]: { Function: 'test.ping', Metadata: { ticket: 8, team: { name: 'ops' } } },
    })
    expect(Object.keys((await runner('jobs.list_jobs', [], { search_metadata: { ticket: 8 } })).return as object)).toEqual([other.jid])
    expect(Object.keys((await runner('jobs.list_jobs', [], { search_metadata: { ticket: '8' } })).return as object)).toEqual([])
    expect(Object.keys((await runner('jobs.list_jobs', [], { search_metadata: {} })).return as object).sort()).toEqual([job.jid, other.jid].sort())
    // A publish whose metadata is not a mapping is refused, naming the field.
    await expect(publish({ tgt: 'db1', fun: 'test.ping', metadata: 'ticket 8' })).rejects.toThrow(/field 'metadata' must be a mapping \(got "ticket 8"\)/)
    expect((await runner('jobs.last_run', [], { target: 'nobody*' })).return).toBe(false)

    // Every minion authenticated in setup: all are connected. A deleted key is no longer.
    expect((await runner('manage.present')).return).toEqual(['db1', 'web1', 'web2'])
    expect((await runner('manage.list_state', [], { subset: ['web1', 'ghost'] })).return).toEqual(['web1'])
    expect((await runner('manage.not_present')).return).toEqual([])
    const timeout = { timeout: 0.3, gather_job_timeout: 0.3 }
    respond(web1, { 'test.ping': true })
    expect((await runner('manage.alived', [], timeout)).return).toEqual(['web1'])
    expect((await runner('manage.not_alived', [], { ...timeout, subset: 'web2,db1' })).return).toEqual(['db1', 'web2'])

    expect(await web1.sealed({ cmd: '_grains', id: 'web1', grains: { os: 'Debian', id: 'web1' } })).toEqual({ ok: true })
    expect((await runner('cache.grains', ['*'])).return).toEqual({ web1: { os: 'Debian', id: 'web1' } })
    expect((await runner('cache.grains', ['db*'])).return).toEqual({})
    expect((await runner('cache.grains')).success).toBe(false)
  })
})

describe.each(TRANSPORTS)("Salt's wheel functions over %s", (transport) => {
  it('key.list, key.list_all with the local keys, key.gen, minions.connected, config.values', async () => {
    const { client, master, minions } = await setup(transport, ['web1'])
    const wheel = async (fun: string, extra: Record<string, unknown> = {}) =>
      ((await client.send({ enc: 'clear', load: { cmd: 'wheel', key: master.rootKey, fun, ...extra } })) as { return: unknown }).return
    expect(await wheel('key.list', { match: 'acc' })).toEqual({ minions: ['web1'] })
    expect(await wheel('key.list', { match: 'unaccepted' })).toEqual({ minions_pre: [] })
    expect(await wheel('key.list', { match: 'nonsense' })).toEqual({})
    const all = { minions: ['web1'], minions_pre: [], minions_rejected: [], minions_denied: [], local: ['master.key', 'master.pub'] }
    expect(await wheel('key.list_all')).toEqual(all)
    expect(await wheel('key.list', { match: 'all' })).toEqual(all)
    const generated = (await wheel('key.gen', { id_: 'spare' })) as { pub: string; priv: string }
    expect(Object.keys(generated).sort()).toEqual(['priv', 'pub'])
    expect(generated.pub).not.toBe(generated.priv)
    expect(((await wheel('key.list_all')) as { minions_pre: string[] }).minions_pre).toEqual([])
    const masterFinger = ((await wheel('key.finger_master')) as { local: { 'master.pub': string } }).local['master.pub']
    expect(await wheel('key.finger', { match: '*' })).toEqual({ minions: { web1: expect.any(String) }, local: { 'master.pub': masterFinger } })
    expect(Object.keys((await wheel('key.finger', { match: 'web1' })) as object)).toEqual(['minions'])
    expect(await wheel('minions.connected')).toEqual(['web1'])
    await wheel('key.delete', { match: 'web1' })
    expect(await wheel('minions.connected')).toEqual([])
    expect(minions).toHaveLength(1)
    expect(await wheel('config.values')).toMatchObject({ transport, ret_port: master.opts.ret_port, unique_jid: false })
  })

  it('unique_jid: True gives jids ending in _<pid>, and returns to them are stored', async () => {
    const dir = await tempDir()
    const { master } = await startMaster(dir, { transport, auto_accept: true, unique_jid: true })
    const address = addressOf(master)
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const minion = await FakeMinion.start(transport, 'web1', address, join(dir, 'm-web1'))
    await subscribers(1)
    expect(await minion.auth()).toEqual({ ok: true })
    const client = await clearClient(transport, address)
    const job = (await client.send({
      enc: 'clear',
      load: { cmd: 'publish', key: master.rootKey, tgt: 'web1', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' },
    })) as { jid: string }
    expect(job.jid).toMatch(new RegExp(`^\\d{20}_${process.pid}$`))
    expect(minion.open(await minion.nthPublish(1))['jid']).toBe(job.jid)
    expect(await minion.returnJob(job.jid)).toEqual({ ok: true })
    expect((await master.jobs.getJob(job.jid))?.returns['web1']?.return).toBe(true)
  })
})

describe.each(TRANSPORTS)('list targets over %s', (transport) => {
  it("names the listed ids that are not accepted minions in the reply and the new-job event (Salt's missing)", async () => {
    const { publish, events } = await setup(transport, ['web1'])
    const job = await publish({ tgt: 'web1,ghost,,ghost', tgt_type: 'list', fun: 'test.ping' })
    expect(job).toEqual({ jid: job.jid, minions: ['web1'], missing: ['ghost'] })
    expect((await events.next(`salt/job/${job.jid}/new`)).data).toMatchObject({ minions: ['web1'], missing: ['ghost'] })
    const listed = await publish({ tgt: ['web1'], tgt_type: 'list', fun: 'test.ping' })
    expect(listed).toEqual({ jid: listed.jid, minions: ['web1'] })
    // Nothing accepted: nothing published, as Salt's "No minions matched".
    expect((await publish({ tgt: 'ghost', tgt_type: 'list', fun: 'test.ping' })).minions).toEqual([])
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
    await minions[0]!.sealed({
      cmd: '_return',
      id: 'web1',
      jid: job.jid,
      fun: 'test.ping',
      fun_args: [],
      return: true,
      retcode: 0,
      success: true,
      extra: 'dropped',
      out: 'nested',
    })
    const ret = await events.next(`salt/job/${job.jid}/ret/web1`)
    expect(Object.keys(ret.data).sort()).toEqual(['_stamp', 'cmd', 'fun', 'fun_args', 'id', 'jid', 'out', 'retcode', 'return', 'success'])
    expect(new Date(ret.data._stamp!).toISOString()).toBe(ret.data._stamp)
  })
})
