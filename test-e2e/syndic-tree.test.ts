import { describe, expect, it } from 'vitest'
import { type JobLoad } from '@brine/protocol'
import { deadline } from '@brine/testkit'
import { FleetClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets, useSharedFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'
import { EVENTS_MS, record, returnCounts, startTree, useHandMadeLinks } from './helpers/syndic.js'

// The syndic's e2e tests are four files (syndic-*.test.ts) so that they run side by side.

const startFleet = useFleets()
const handMadeLink = useHandMadeLinks()
// Jobs published only for their jid, and the job cache's runners, go through the top's clients in this process (a
// `brine --async` or `brine-run` process each cost more than the call): what the top's CLI prints, the first test reads.
const clients = new FleetClients()

const PG = { master_job_cache: 'postgres', 'postgres.url': process.env['BRINE_TEST_PG_URL'] ?? 'postgres://brine:brine@127.0.0.1:5432/brine_test' }

describe.each(TRANSPORTS)('a tree of masters, the top and both syndic nodes on one PostgreSQL job cache, over %s', (transport) => {
  // One tree for this describe's tests: none stops a daemon; the last one adds a plain minion to the top.
  const startShared = useSharedFleets(() => clients.close())
  let shared: ReturnType<typeof startTree> | undefined
  const tree = (): ReturnType<typeof startTree> => (shared ??= startTree(startShared, transport, PG, PG))

  it('test.ping, cmd.run, a grain target and a compound target on the top reach exactly the right minions; --async then jobs.lookup_jid shows all', async () => {
    const { top } = await tree()
    const all = { direct1: true, 's1-web': true, 's1-db': true, 's2-web': true, 's2-db': true }

    const ping = await top.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(ping.stderr).toBe('')
    expect(json(ping.stdout)).toEqual(all)
    expect(ping.code).toBe(0)

    const echo = await top.run('brine', ['*', 'cmd.run', 'echo tree', '--out', 'json', '--static'])
    expect(json(echo.stdout)).toEqual({ direct1: 'tree', 's1-web': 'tree', 's1-db': 'tree', 's2-web': 'tree', 's2-db': 'tree' })

    const grain = await top.run('brine', ['-G', 'role:web', 'test.ping', '--out', 'json', '--static'])
    expect(json(grain.stdout)).toEqual({ direct1: true, 's1-web': true, 's2-web': true })
    expect(grain.code).toBe(0)

    const compound = await top.run('brine', ['-C', 'G@role:db or s1-web', 'test.ping', '--out', 'json', '--static'])
    expect(json(compound.stdout)).toEqual({ 's1-web': true, 's1-db': true, 's2-db': true })

    const returns = record(top, '^salt/job/\\d+/ret/')
    const jid = await clients.of(top).local.cmdAsync('*', 'test.echo', ['later'])
    // Every return is stored at the top before its event; lookup_jid reads the job cache, so wait for the last event.
    const expected = { direct1: 'later', 's1-web': 'later', 's1-db': 'later', 's2-web': 'later', 's2-db': 'later' }
    await returns.until((events) => events.filter((event) => event.data['jid'] === jid).length >= 5, `the 5 returns of ${jid} on the top's bus`)
    returns.stop()
    expect(await clients.runner(top, 'jobs.lookup_jid', [jid])).toEqual(expected)
  })

  it('jobs.lookup_jid at the top shows every return of the tree once, and the top fires one event per minion', async () => {
    const { top } = await tree()
    const returns = record(top, '^salt/job/')
    const jid = await clients.of(top).local.cmdAsync('*', 'test.echo', ['shared'])
    await returns.until((events) => Object.keys(returnCounts(events, jid)).length === 5, `the 5 returns of ${jid} at the top`)
    const { jid: barrier } = await clients.run(top, '*', 'test.ping')
    await returns.until((events) => Object.keys(returnCounts(events, barrier)).length === 5, `the 5 returns of ${barrier}`)
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, 's1-web': 1, 's1-db': 1, 's2-web': 1, 's2-db': 1 })
    expect(await clients.runner(top, 'jobs.lookup_jid', [jid])).toEqual({
      direct1: 'shared',
      's1-web': 'shared',
      's1-db': 'shared',
      's2-web': 'shared',
      's2-db': 'shared',
    })
    const listed = (await clients.runner(top, 'jobs.list_job', [jid])) as Record<string, unknown>
    expect(listed['Minions']).toEqual(['direct1', 's1-db', 's1-web', 's2-db', 's2-web'])
  })

  it('a minion whose key is not accepted as a syndic cannot speak for minions: refused, logged, nothing stored; brine-key -L shows the real syndic', async () => {
    const { top } = await tree()
    const link = await handMadeLink(top, transport, 'plain')
    const publishes = link.publishes()[Symbol.asyncIterator]()
    await link.start()
    await deadline(link.authenticated, EVENTS_MS, 'the plain minion accepted by the top (auto_accept)')
    const jid = await clients.of(top).local.cmdAsync('*', 'test.ping')
    let job: Readonly<JobLoad> | undefined
    while (job?.jid !== jid) job = (await deadline(publishes.next(), EVENTS_MS, `the publish of ${jid} at the plain minion`)).value?.job
    // It answers for a minion behind syndic1, and for one that does not exist.
    const forged = { return: 'forged', retcode: 0, success: true, fun_args: [] }
    const refusal = await link
      .send({
        cmd: '_syndic_return',
        id: 'plain',
        jobs: [{ jid, fun: 'test.ping', minions: ['s1-web', 'ghost'], pending: [], returns: { 's1-web': forged, ghost: forged } }],
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      )
    expect(refusal).toMatchObject({ name: 'NotAcknowledgedError', refusal: 'SyndicNotAcceptedError' })
    await top.master.waitForOutput(/_syndic_return refused: "plain" is not accepted as a syndic on this master \(brine-key --accept-syndic plain\)/, EVENTS_MS)
    // The real returns come up through syndic1; the forged ones never.
    const returns = record(top, '^salt/job/')
    const lookup = async () => (await clients.runner(top, 'jobs.lookup_jid', [jid])) as Record<string, unknown>
    let stored = await lookup()
    if (stored['s1-web'] === undefined) {
      await returns.until((events) => returnCounts(events, jid)['s1-web'] === 1, `the real return of s1-web for ${jid}`)
      stored = await lookup()
    }
    returns.stop()
    expect(stored['s1-web']).toBe(true)
    expect(stored['ghost']).toBeUndefined()
    // Later jobs wait for the real syndics only: 'plain' is an ordinary minion of the top.
    const listing = json((await top.run('brine-key', ['-L', '--out', 'json'])).stdout) as Record<string, string[]>
    expect(listing['syndics']).toEqual(['syndic1', 'syndic2'])
    expect(listing['minions']).toEqual(expect.arrayContaining(['plain', 'syndic1', 'syndic2', 'direct1']))
    const syndics = (await clients.runner(top, 'syndics.list')) as Record<string, { syndic_key: boolean; minions: string[] }>
    expect(Object.keys(syndics).sort()).toEqual(['syndic1', 'syndic2'])
    expect(syndics['syndic1']).toMatchObject({ syndic_key: true })
    expect(syndics['syndic1']!.minions).not.toContain('ghost')
  })
})

describe('a syndic whose upper link is NATS while its own minions use ZeroMQ', () => {
  it('jobs from the top reach the ZeroMQ minions below and every return comes back up once', async () => {
    const top = await startFleet({ minions: [{ id: 'direct1', transport: 'nats' }], masterConfig: { order_masters: true } })
    const node = await startFleet({
      minions: [
        { id: 'z-web', transport: 'zeromq' },
        { id: 'z-db', transport: 'zeromq' },
      ],
      syndic: { id: 'natsyndic', upper: top, transport: 'nats' },
    })
    expect(top.transports).toEqual(['nats'])
    expect(node.transports).toEqual(['zeromq'])
    expect(node.natsServer).toBe(top.natsServer)
    const returns = record(top, '^salt/job/\\d+/ret/')
    const ping = await top.run('brine', ['*', 'test.ping', '--out', 'json', '--static', '--show-jid'])
    const jid = /^jid: (\d{20})$/m.exec(ping.stdout)?.[1]
    expect(jid, ping.stdout + ping.stderr).toBeDefined()
    expect(json(ping.stdout.replace(/^jid: .*\n/, ''))).toEqual({ direct1: true, 'z-web': true, 'z-db': true })
    await returns.until((events) => events.filter((event) => event.data['jid'] === jid).length >= 3, `the 3 returns of ${jid!} on the top's bus`)
    returns.stop()
    expect(returnCounts(returns.events, jid!)).toEqual({ direct1: 1, 'z-web': 1, 'z-db': 1 })
  })
})
