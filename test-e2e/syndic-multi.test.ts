import { describe, expect, it } from 'vitest'
import { parseJobReturnTag } from '@brine/protocol'
import { withClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { jidOf, json } from './helpers/output.js'
import { record, returnCounts } from './helpers/syndic.js'

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
    // Each master has its own job's returns and not the other's (looked up through clients in this process).
    expect(await withClients(a, (clients) => clients.runner(a, 'jobs.lookup_jid', [jidB]))).toEqual({})
    expect(await withClients(b, (clients) => clients.runner(b, 'jobs.lookup_jid', [jidA]))).toEqual({})
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
