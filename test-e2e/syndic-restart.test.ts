import { describe, expect, it } from 'vitest'
import { tags } from '@brine/protocol'
import { withClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { jidOf, json } from './helpers/output.js'
import { record, returnCounts, EVENTS_MS } from './helpers/syndic.js'

const startFleet = useFleets()

describe.each(TRANSPORTS)('syndic acceptance over %s', (transport) => {
  it('three levels deep (top → syndic → syndic → minions): every minion answers, and the top bus carries one return event per minion', async () => {
    const top = await startFleet({ minions: [{ id: 'direct1', transport }], masterConfig: { order_masters: true } })
    const mid = await startFleet({
      minions: [{ id: 'mid-m1', transport }],
      masterConfig: { order_masters: true },
      syndic: { id: 'mid', upper: top, transport },
    })
    await startFleet({
      minions: [
        { id: 'low-m1', transport },
        { id: 'low-m2', transport },
      ],
      syndic: { id: 'low', upper: mid, transport },
    })
    const returns = record(top, '^salt/job/')
    const ping = await top.run('brine', ['*', 'test.ping', '--show-jid', '--out', 'json', '--static'])
    const jid = jidOf(ping.stdout)
    expect(json(ping.stdout.replace(/^jid: .*\n/, ''))).toEqual({ direct1: true, 'mid-m1': true, 'low-m1': true, 'low-m2': true })
    expect(ping.code).toBe(0)
    // A second job through the whole tree: anything the first could still send up would have come before its returns.
    const barrier = jidOf((await top.run('brine', ['*', 'test.echo', 'after', '--show-jid', '--out', 'json', '--static'])).stdout)
    await returns.until((events) => Object.keys(returnCounts(events, barrier)).length === 4, `the 4 returns of ${barrier}`)
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, 'mid-m1': 1, 'low-m1': 1, 'low-m2': 1 })
  })

  it("stop the top master while cmd.run 'sleep 3' runs below, start it again: every return arrives at the top exactly once", async () => {
    // direct1 tries its spooled return again as soon as the syndic (QUICK_SYNDIC in helpers/fleets.ts) does: over NATS no
    // reconnect hurries either, and Salt's 5–10 s would be most of the test.
    const direct1 = { id: 'direct1', transport, config: { return_retry_timer: 0.2, return_retry_timer_max: 0.5 } }
    const top = await startFleet({ minions: [direct1], masterConfig: { order_masters: true } })
    const node = await startFleet({
      minions: [
        { id: 's1-a', transport },
        { id: 's1-b', transport },
      ],
      syndic: { id: 'syndic1', upper: top, transport },
    })
    const below = record(node, '^salt/job/')
    const announced = record(top, '^syndic/')
    // The job, the runner and the lookup go through clients in this process (the top restarts in between: one each).
    const jid = await withClients(top, (_, made) => made.local.cmdAsync('*', 'cmd.run', ['sleep 3; echo slept']))
    await announced.until((events) => events.some((event) => event.tag === tags.syndicJobNew('syndic1', jid)), `syndic1's announcement of ${jid}`)
    announced.stop()
    await top.master.stop()
    // Both returns reach the syndic's master while the top is down: the syndic must keep them.
    await below.until((events) => Object.keys(returnCounts(events, jid)).length === 2, `the returns of ${jid} on the syndic's master`)
    below.stop()
    const returns = record(top, '^salt/(job|run)/')
    await top.launchMaster()
    await returns.until((events) => Object.keys(returnCounts(events, jid)).length === 3, `the 3 returns of ${jid} at the restarted top`)
    // The syndic's spooled batch is acknowledged (so never sent again); a runner's events, fired after that on the same
    // bus, come after any event the batch caused.
    await node.syndic!.waitForOutput(/delivered spooled batch .* to /, EVENTS_MS)
    await withClients(top, (clients) => clients.runner(top, 'jobs.list_jobs'))
    await returns.until(
      (events) => events.some((event) => /^salt\/run\/\d+\/ret$/.test(event.tag) && event.data['fun'] === 'runner.jobs.list_jobs'),
      'the events of the jobs.list_jobs runner',
    )
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, 's1-a': 1, 's1-b': 1 })
    expect(await withClients(top, (clients) => clients.runner(top, 'jobs.lookup_jid', [jid]))).toEqual({ direct1: 'slept', 's1-a': 'slept', 's1-b': 'slept' })
  })
})
