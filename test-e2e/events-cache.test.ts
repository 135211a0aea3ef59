import { describe, expect, it } from 'vitest'
import { FleetClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets, useSharedFleets } from './helpers/fleets.js'
import { MasterEvent } from '@brine/client'
import type { BusEvent } from '@brine/protocol'
import { deadline, deferred } from '@brine/testkit'
import { binPath, type Fleet, type TransportName } from '@brine/harness'
import { FakeMinion, runCleanups } from '../packages/master/test/helpers.js'

const PG_URL = process.env['BRINE_TEST_PG_URL'] ?? 'postgres://brine:brine@127.0.0.1:5432/brine_test'
// The jobs and runners go through a LocalClient and a RunnerClient per fleet, published and waited for as `brine` and
// `brine-run` do: what these tests check is the bus and the job cache, not the CLI's output (which has its own files).
const clients = new FleetClients()
const startFleet = useFleets(async () => {
  await clients.close()
  await runCleanups()
})
/**
 * A reader of the fleet's bus from now on, keeping its job events in `seen`; `through()` publishes a marker job and
 * stops once the marker's return has been read, so every event fired before it is in `seen` (the bus delivers in order).
 */
async function readJobEvents(fleet: Fleet): Promise<{ seen: BusEvent[]; through: () => Promise<void> }> {
  const events = new MasterEvent({ sockDir: fleet.sockDir })
  await events.connect()
  const seen: BusEvent[] = []
  const controller = new AbortController()
  const sawMarker = deferred()
  let markerTag: string | undefined
  const reading = (async () => {
    for await (const event of events.iter({ match: 'salt/job/', signal: controller.signal })) {
      seen.push(event)
      if (event.tag === markerTag) sawMarker.resolve()
    }
  })()
  const through = async (): Promise<void> => {
    const { jid } = await clients.run(fleet, 'web1', 'test.echo', ['marker'])
    markerTag = `salt/job/${jid}/ret/web1`
    if (seen.some((event) => event.tag === markerTag)) sawMarker.resolve()
    await deadline(sawMarker.promise, 20_000, `the marker job ${jid}'s return on the bus`)
    controller.abort()
    await reading
    await events.close()
  }
  return { seen, through }
}

// A master and its minions per transport, shared by the tests that stop no daemon: the first two of each transport's
// describe, whose jobs after the first test's '*' job name their minions (the second's fake minion closes after it),
// then event.listen, which counts the events of its own job on the tcp one. They are stopped after the file.
const startShared = useSharedFleets(() => clients.close())
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
    const { seen, through } = await readJobEvents(fleet)
    const { jid } = await clients.run(fleet, '*', 'test.ping')
    // Both returns came in, so both ret events were fired before the marker's.
    await through()

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
    const { seen, through } = await readJobEvents(fleet)
    const jid = await clients.of(fleet).local.cmdAsync('retry-minion', 'test.ping')
    // The minion's first delivery was stored but its acknowledgement "lost": it sends the same return again.
    expect(await fake.returnJob(jid)).toEqual({ ok: true })
    expect(await fake.returnJob(jid)).toEqual({ ok: true })
    await through()
    expect(seen.filter((event) => event.tag === `salt/job/${jid}/ret/retry-minion`)).toHaveLength(1)
    expect(await clients.runner(fleet, 'jobs.lookup_jid', [jid])).toEqual({ 'retry-minion': true })
  })

  it('returns acknowledged before a kill -9 of the master are all there after its restart', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'web2', transport },
        { id: 'db1', transport },
      ],
    })
    const result = await clients.run(fleet, '*', 'test.echo', ['kept'])
    const jid = result.jid
    expect(result.allSucceeded).toBe(true)
    expect((await fleet.master.stop('SIGKILL')).signal).toBe('SIGKILL')
    // Clients of the killed master's channel would reconnect; new ones read the restarted master's cache.
    await clients.close(fleet)
    await fleet.launchMaster()
    expect(await clients.runner(fleet, 'jobs.lookup_jid', [jid])).toEqual({ web1: 'kept', web2: 'kept', db1: 'kept' })
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
    jid = await clients.of(fleet).local.cmdAsync('*', 'test.echo', ['later'])
    if (seen.filter((tag) => tag.startsWith(`salt/job/${jid}/`)).length === 3) allIn.resolve()
    await deadline(allIn.promise, 20_000, `three returns of ${jid} on the bus`)
    controller.abort()
    await reading
    await returns.close()
    expect(await clients.runner(fleet, 'jobs.lookup_jid', [jid])).toEqual({ web1: 'later', web2: 'later', db1: 'later' })

    await fleet.minions.get('db1')!.stop('SIGKILL')
    // brine-run's -t 1 is the runner's timeout (seconds).
    expect(await clients.runner(fleet, 'manage.down', [], { timeout: 1 })).toEqual(['db1'])
    expect(await clients.runner(fleet, 'manage.up', [], { timeout: 1 })).toEqual(['web1', 'web2'])
  })
})

describe('two masters on one PostgreSQL job cache', () => {
  it('lists the jobs of both from either', async () => {
    const masterConfig = { master_job_cache: 'postgres', 'postgres.url': PG_URL }
    const a = await startFleet({ minions: [{ id: 'alpha', transport: 'zeromq' }], masterConfig })
    const b = await startFleet({ minions: [{ id: 'beta', transport: 'tcp' }], masterConfig })
    const jidA = (await clients.run(a, '*', 'test.ping')).jid
    const jidB = (await clients.run(b, '*', 'test.ping')).jid
    for (const fleet of [a, b]) {
      const listed = (await clients.runner(fleet, 'jobs.list_jobs', [], { search_function: 'test.ping' })) as Record<string, unknown>
      expect(Object.keys(listed)).toEqual(expect.arrayContaining([jidA, jidB]))
      const viaOther = await clients.runner(fleet, 'jobs.lookup_jid', [fleet === a ? jidB : jidA])
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
      const { jid } = await clients.run(fleet, 'web1', 'test.ping')
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
