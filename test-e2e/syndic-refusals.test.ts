import { describe, expect, it } from 'vitest'
import { tags, type JobLoad } from '@brine/protocol'
import { deadline } from '@brine/testkit'
import { FleetClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { EVENTS_MS, record, returnCounts, startTree, useHandMadeLinks } from './helpers/syndic.js'

// The runners, the job published for its jid and the warm-up ping go through the top's clients in this process (a
// process each cost more than the call); what the CLI prints is checked where it is the point: the ping of a tree with
// a killed syndic, and `brine-key --accept-syndic`.
const clients = new FleetClients()
const startFleet = useFleets(() => clients.close())
const handMadeLink = useHandMadeLinks()

describe.each(TRANSPORTS)('syndic acceptance over %s', (transport) => {
  it('kill a syndic: manage.status, manage.up and manage.down include the minions behind syndics, never the syndics; with -v its minions are reported "Minion did not return", the rest return, the exit code says so, and the syndic itself is not reported', async () => {
    // Each wait below for the killed syndic's minions is timeout + syndic_wait + one find_job round that nobody answers.
    const { top, nodes } = await startTree(startFleet, transport, { syndic_wait: 1, gather_job_timeout: 1 })
    expect(await clients.runner(top, 'manage.status')).toEqual({ up: ['direct1', 's1-db', 's1-web', 's2-db', 's2-web'], down: [] })
    // The top learns which minions are behind each syndic from their announcements.
    const first = await clients.run(top, '*', 'test.ping')
    expect(Object.keys(first.returns).sort()).toEqual(['direct1', 's1-db', 's1-web', 's2-db', 's2-web'])
    await nodes[1]!.syndic!.stop('SIGKILL')
    // Each waits out the killed syndic's minions on its own: side by side, those waits overlap.
    // The runners' timeout is brine-run's `-t 1` (seconds).
    const [ping, down, up] = await Promise.all([
      top.run('brine', ['*', 'test.ping', '-v', '-t', '2']),
      clients.runner(top, 'manage.down', [], { timeout: 1 }),
      clients.runner(top, 'manage.up', [], { timeout: 1 }),
    ])
    expect(ping.stdout).toContain('Executing job with jid')
    for (const id of ['direct1', 's1-web', 's1-db']) expect(ping.stdout).toContain(`${id}:\n    True\n`)
    for (const id of ['s2-web', 's2-db']) expect(ping.stdout).toMatch(new RegExp(`${id}:\\n +Minion did not return\\. \\[No response\\]`))
    expect(ping.stdout.match(/Minion did not return/g)).toHaveLength(2)
    expect(ping.stdout).not.toContain('syndic')
    expect(ping.code).toBe(1)
    expect(down).toEqual(['s2-db', 's2-web'])
    expect(up).toEqual(['direct1', 's1-db', 's1-web'])
  })

  it('a syndic that sends a return for a minion it did not announce, or for a minion of the master itself, is refused and logged', async () => {
    const top = await startFleet({ minions: [{ id: 'direct1', transport }], masterConfig: { order_masters: true } })
    // A syndic made by hand: a real link with its own keys, which then misbehaves.
    const link = await handMadeLink(top, transport, 'rogue')
    const publishes = link.publishes()[Symbol.asyncIterator]()
    const mark = top.startEventCount
    await link.start()
    await deadline(link.authenticated, EVENTS_MS, 'the rogue syndic accepted by the top')
    // A syndic the operator accepted as one, then compromised: it may lie about its own subtree only. The command itself
    // here (the fleets' own syndic nodes are accepted through the same wheel call from this process).
    const accepted = await top.run('brine-key', ['--accept-syndic', 'rogue', '-y'])
    expect(accepted.stdout).toBe('The following keys are going to be accepted as syndics:\nAccepted Keys:\nrogue\nKey for syndic rogue accepted.\n')
    expect(accepted.code).toBe(0)
    await link.send({ cmd: '_syndic_event', id: 'rogue', events: [{ tag: tags.syndicStart('rogue'), data: { id: 'rogue' } }] })
    await top.waitForSyndicStart('rogue', mark)

    const returns = record(top, '^salt/job/')
    const jid = await clients.of(top).local.cmdAsync('*', 'test.ping')
    let job: Readonly<JobLoad> | undefined
    while (job?.jid !== jid) job = (await deadline(publishes.next(), EVENTS_MS, `the publish of ${jid} at the rogue syndic`)).value?.job
    const forged = { return: 'forged', retcode: 0, success: true, fun_args: [] }
    await link.send({
      cmd: '_syndic_return',
      id: 'rogue',
      jobs: [{ jid, fun: 'test.ping', minions: ['ghost1', 'direct1'], pending: [], returns: { ghost1: forged, ghost2: forged, direct1: forged } }],
    })

    await returns.until(
      (events) => returnCounts(events, jid)['direct1'] === 1 && returnCounts(events, jid)['ghost1'] === 1,
      `the returns of direct1 and ghost1 for ${jid}`,
    )
    expect(await clients.runner(top, 'jobs.lookup_jid', [jid])).toEqual({ direct1: true, ghost1: 'forged' })
    await top.master.waitForOutput(
      /refused a return from syndic rogue for minion "ghost2" of job \d+: syndic rogue did not announce minion "ghost2"/,
      EVENTS_MS,
    )
    await top.master.waitForOutput(/refused a return from syndic rogue for minion "direct1" of job \d+: "direct1" is a minion of this master/, EVENTS_MS)
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, ghost1: 1 })
  })
})
