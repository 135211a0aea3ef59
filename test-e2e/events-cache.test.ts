import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets, useSharedFleets } from './helpers/fleets.js'
import { jidOf, json } from './helpers/output.js'
import { MasterEvent } from '@brine/client'
import type { BusEvent } from '@brine/protocol'
import { deadline, deferred } from '@brine/testkit'
import { binPath, type TransportName } from '@brine/harness'
import { FakeMinion, runCleanups } from '../packages/master/test/helpers.js'

const PG_URL = process.env['BRINE_TEST_PG_URL'] ?? 'postgres://brine:brine@127.0.0.1:5432/brine_test'
const startFleet = useFleets(runCleanups)

// A master and its minions per transport, shared by the tests that stop no daemon: the first two of each transport's
// describe, whose jobs after the first test's '*' job name their minions (the second's fake minion closes after it),
// then event.listen, which counts the events of its own job on the tcp one. They are stopped after the file.
const startShared = useSharedFleets()
const quietFleets = new Map<TransportName, ReturnType<typeof startShared>>()
function quietFleet(transport: TransportName): ReturnType<typeof startShared> {
  let fleet = quietFleets.get(transport)
  if (fleet === undefined) {
    fleet = startShared({
      minions: [
        { id: 'web1', transport },
        { id: 'db1', transport },
      ],
    })
    quietFleets.set(transport, fleet)
  }
  return fleet
}

describe.each(TRANSPORTS)('events and the job cache over %s', (transport) => {
  const quiet = (): ReturnType<typeof startShared> => quietFleet(transport)

  it("a MasterEvent program sees the job's new event with its minions and one return per minion, in Salt's shapes", async () => {
    const fleet = await quiet()
    const events = new MasterEvent({ sockDir: fleet.sockDir })
    await events.connect()
    const seen: BusEvent[] = []
    const controller = new AbortController()
    const reading = (async () => {
      for await (const event of events.iter({ match: 'salt/job/', signal: controller.signal })) seen.push(event)
    })()
    const result = await fleet.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])
    const jid = jidOf(result.stdout)
    // The CLI printed both returns, so both ret events were fired; the bus delivers in order.
    await fleet.run('brine', ['web1', 'test.echo', 'marker', '--out', 'json', '--static'])
    controller.abort()
    await reading
    await events.close()

    const ofJob = seen.filter((event) => event.tag.startsWith(`salt/job/${jid}/`))
    const created = ofJob.filter((event) => event.tag === `salt/job/${jid}/new`)
    expect(created).toHaveLength(1)
    expect((created[0]!.data['minions'] as string[]).sort()).toEqual(['db1', 'web1'])
    expect(created[0]!.data).toMatchObject({ jid, fun: 'test.ping', tgt: '*', tgt_type: 'glob', arg: [] })
    const returns = ofJob.filter((event) => event.tag.startsWith(`salt/job/${jid}/ret/`))
    expect(returns.map((event) => event.tag).sort()).toEqual([`salt/job/${jid}/ret/db1`, `salt/job/${jid}/ret/web1`])
    for (const event of returns) {
      // Salt's iter_events seed: exactly these keys.
      expect(Object.keys(event.data).sort()).toEqual(['_stamp', 'cmd', 'fun', 'fun_args', 'id', 'jid', 'retcode', 'return', 'success'])
      expect(event.data).toMatchObject({ cmd: '_return', fun: 'test.ping', fun_args: [], jid, return: true, retcode: 0, success: true })
      expect(new Date(event.data['_stamp'] as string).toISOString()).toBe(event.data['_stamp'])
    }
  })

  it('a return delivered twice is stored once and fires one event', async () => {
    const fleet = await quiet()
    const ports = fleet.ports.get(transport)!
    const fake = await FakeMinion.start(
      transport,
      'retry-minion',
      { host: '127.0.0.1', publishPort: ports.publish, retPort: ports.ret, broker: fleet.broker },
      `${fleet.root}/fake-pki`,
    )
    expect((await fake.auth()).ok).toBe(true)
    const events = new MasterEvent({ sockDir: fleet.sockDir })
    await events.connect()
    const seen: BusEvent[] = []
    const controller = new AbortController()
    const reading = (async () => {
      for await (const event of events.iter({ match: 'salt/job/', signal: controller.signal })) seen.push(event)
    })()
    const jid = jidOf((await fleet.run('brine', ['retry-minion', 'test.ping', '--async'])).stdout)
    // The minion's first delivery was stored but its acknowledgement "lost": it sends the same return again.
    expect(await fake.returnJob(jid)).toEqual({ ok: true })
    expect(await fake.returnJob(jid)).toEqual({ ok: true })
    await fleet.run('brine', ['web1', 'test.echo', 'marker', '--out', 'json', '--static'])
    controller.abort()
    await reading
    await events.close()
    expect(seen.filter((event) => event.tag === `salt/job/${jid}/ret/retry-minion`)).toHaveLength(1)
    const lookup = await fleet.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual({ 'retry-minion': true })
  })

  it('returns acknowledged before a kill -9 of the master are all there after its restart', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'web2', transport },
        { id: 'db1', transport },
      ],
    })
    const result = await fleet.run('brine', ['*', 'test.echo', 'kept', '--show-jid', '--out', 'json', '--static'])
    const jid = jidOf(result.stdout)
    expect(result.code).toBe(0)
    expect((await fleet.master.stop('SIGKILL')).signal).toBe('SIGKILL')
    await fleet.launchMaster()
    const lookup = await fleet.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual({ web1: 'kept', web2: 'kept', db1: 'kept' })
  })

  it('manage.down lists a killed minion and manage.up the live ones; --async then jobs.lookup_jid shows the returns', async () => {
    // manage.* ask unanswered minions find_job as Salt does; a short gather_job_timeout keeps the killed minion's round short.
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'web2', transport },
        { id: 'db1', transport },
      ],
      masterConfig: { gather_job_timeout: 1 },
    })
    // Listen before publishing: --async returns at once and the returns arrive on their own.
    const returns = new MasterEvent({ sockDir: fleet.sockDir })
    await returns.connect()
    const seen: string[] = []
    let jid = ''
    const allIn = deferred()
    const controller = new AbortController()
    const reading = (async () => {
      for await (const event of returns.iter({ match: 'salt/job/*/ret/*', matchType: 'glob', signal: controller.signal })) {
        seen.push(event.tag)
        if (jid !== '' && seen.filter((tag) => tag.startsWith(`salt/job/${jid}/`)).length === 3) allIn.resolve()
      }
    })()
    const asynchronous = await fleet.run('brine', ['*', 'test.echo', 'later', '--async'])
    jid = jidOf(asynchronous.stdout)
    if (seen.filter((tag) => tag.startsWith(`salt/job/${jid}/`)).length === 3) allIn.resolve()
    await deadline(allIn.promise, 20_000, `three returns of ${jid} on the bus`)
    controller.abort()
    await reading
    await returns.close()
    const lookup = await fleet.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual({ web1: 'later', web2: 'later', db1: 'later' })

    await fleet.minions.get('db1')!.stop('SIGKILL')
    const down = await fleet.run('brine-run', ['manage.down', '-t', '1', '--out', 'json'])
    expect(JSON.parse(down.stdout)).toEqual(['db1'])
    const up = await fleet.run('brine-run', ['manage.up', '-t', '1', '--out', 'json'])
    expect(JSON.parse(up.stdout)).toEqual(['web1', 'web2'])
  })
})

describe('two masters on one PostgreSQL job cache', () => {
  it('lists the jobs of both from either', async () => {
    const masterConfig = { master_job_cache: 'postgres', 'postgres.url': PG_URL }
    const a = await startFleet({ minions: [{ id: 'alpha', transport: 'zeromq' }], masterConfig })
    const b = await startFleet({ minions: [{ id: 'beta', transport: 'tcp' }], masterConfig })
    const jidA = jidOf((await a.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])).stdout)
    const jidB = jidOf((await b.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])).stdout)
    for (const fleet of [a, b]) {
      const listed = json((await fleet.run('brine-run', ['jobs.list_jobs', 'search_function=test.ping', '--out', 'json'])).stdout)
      expect(Object.keys(listed)).toEqual(expect.arrayContaining([jidA, jidB]))
      const viaOther = json((await fleet.run('brine-run', ['jobs.lookup_jid', fleet === a ? jidB : jidA, '--out', 'json'])).stdout)
      expect(viaOther).toEqual(fleet === a ? { beta: true } : { alpha: true })
    }
  })
})

describe('brine-run event.listen', () => {
  it('prints the bus events of a real job, one JSON object per line', async () => {
    const fleet = await quietFleet('tcp')
    const listener = fleet.spawnNode('brine-run event.listen', binPath('brine-run'), [
      '-c',
      fleet.masterConfigDir,
      '-l',
      'info',
      'event.listen',
      'salt/job/*',
      'count=2',
      '--out',
      'json',
    ])
    try {
      await listener.waitForOutput(/listening for events matching "salt\/job\/\*"/, 20_000)
      const jid = jidOf((await fleet.run('brine', ['web1', 'test.ping', '--show-jid'])).stdout)
      expect(await listener.exited).toEqual({ code: 0, signal: null })
      const lines = listener.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as BusEvent)
      expect(lines.map((event) => event.tag)).toEqual([`salt/job/${jid}/new`, `salt/job/${jid}/ret/web1`])
      expect(lines[1]!.data).toMatchObject({ id: 'web1', return: true, cmd: '_return' })
    } finally {
      await listener.stop('SIGKILL')
    }
  })
})
