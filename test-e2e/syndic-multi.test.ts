import { describe, expect, it } from 'vitest'
import { parseJobReturnTag } from '@brine/protocol'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { jidOf, json } from './helpers/output.js'
import { record, returnCounts, startTree } from './helpers/syndic.js'

const startFleet = useFleets()

describe.each(TRANSPORTS)('multi-syndic over %s', (transport) => {
  it('multi-syndic with master_id: one lower master under two upper masters; each job runs once on each minion and returns to the master that asked', async () => {
    const a = await startFleet({ minions: [], transports: [transport], masterConfig: { order_masters: true, master_id: 'A' } })
    // On the socket transports B binds A's ports on another loopback address; on a broker two masters on one port
    // pair would be one queue group, so B is on A's nats-server with ports of its own (syndic_master names host:port).
    const apart = transport === 'nats' ? { natsFrom: a } : { interface: '127.0.0.2', portsFrom: a }
    const b = await startFleet({ minions: [], transports: [transport], ...apart, masterConfig: { order_masters: true, master_id: 'B' } })
    const lower = await startFleet({
      minions: [
        { id: 'm1', transport },
        { id: 'm2', transport },
      ],
      syndic: { id: 'syn', upper: [a, b], transport },
    })
    const below = record(lower, '^salt/job/')
    const atA = record(a, '^salt/job/')
    const fromA = await a.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])
    const fromB = await b.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])
    const [jidA, jidB] = [jidOf(fromA.stdout), jidOf(fromB.stdout)]
    expect(json(fromA.stdout.replace(/^jid: .*\n/, ''))).toEqual({ m1: true, m2: true })
    expect(json(fromB.stdout.replace(/^jid: .*\n/, ''))).toEqual({ m1: true, m2: true })
    // Each master has its own job's returns and not the other's.
    expect(json((await a.run('brine-run', ['jobs.lookup_jid', jidB, '--out', 'json'])).stdout)).toEqual({})
    expect(json((await b.run('brine-run', ['jobs.lookup_jid', jidA, '--out', 'json'])).stdout)).toEqual({})
    await below.until((events) => Object.keys(returnCounts(events, jidB)).length === 2, `the returns of ${jidB} below`)
    below.stop()
    atA.stop()
    expect(returnCounts(below.events, jidA)).toEqual({ m1: 1, m2: 1 })
    expect(returnCounts(below.events, jidB)).toEqual({ m1: 1, m2: 1 })
    const atAReturns = atA.events.filter((event) => parseJobReturnTag(event.tag)?.jid === jidA)
    expect(atAReturns.map((event) => event.data['master_id'])).toEqual(['A', 'A'])
    expect(returnCounts(atA.events, jidB)).toEqual({})
  })
})

describe.each(TRANSPORTS)('two syndic nodes and the top on one PostgreSQL job cache over %s', (transport) => {
  it('jobs.lookup_jid at the top shows every return of the tree once, and the top fires one event per minion', async () => {
    const pg = { master_job_cache: 'postgres', 'postgres.url': process.env['BRINE_TEST_PG_URL'] ?? 'postgres://brine:brine@127.0.0.1:5432/brine_test' }
    const { top } = await startTree(startFleet, transport, pg, pg)
    const returns = record(top, '^salt/job/')
    const jid = jidOf((await top.run('brine', ['*', 'test.echo', 'shared', '--async'])).stdout)
    await returns.until((events) => Object.keys(returnCounts(events, jid)).length === 5, `the 5 returns of ${jid} at the top`)
    const barrier = jidOf((await top.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])).stdout)
    await returns.until((events) => Object.keys(returnCounts(events, barrier)).length === 5, `the 5 returns of ${barrier}`)
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, 's1-web': 1, 's1-db': 1, 's2-web': 1, 's2-db': 1 })
    const lookup = await top.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual({ direct1: 'shared', 's1-web': 'shared', 's1-db': 'shared', 's2-web': 'shared', 's2-db': 'shared' })
    const listed = json((await top.run('brine-run', ['jobs.list_job', jid, '--out', 'json'])).stdout)
    expect(listed['Minions']).toEqual(['direct1', 's1-db', 's1-web', 's2-db', 's2-web'])
  })
})
