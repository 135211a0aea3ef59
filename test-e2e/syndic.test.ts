import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadTransport } from '@brine/common'
import { parseJobReturnTag, tags, type BusEvent, type JobLoad } from '@brine/protocol'
import { generateKeys } from '@brine/crypt'
import { MasterLink } from '@brine/link'
import { deadline } from '@brine/testkit'
import { type Fleet, type FleetMinion, type TransportName } from '@brine/harness'
import { TRANSPORTS, useFleets, useSharedFleets } from './helpers/fleets.js'
import { jidOf, json } from './helpers/output.js'

/** Bound on waiting for events that the tree produces within a job's timeout. */
const EVENTS_MS = 30_000

const startFleet = useFleets()

/** Things a test opened outside fleets (a hand-made syndic link, its directory), closed after it. */
const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
})

/** How many `salt/job/<jid>/ret/<id>` events each minion has among `events`. */
function returnCounts(events: readonly BusEvent[], jid: string): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const event of events) {
    const parsed = parseJobReturnTag(event.tag)
    if (parsed?.jid === jid) counts[parsed.id] = (counts[parsed.id] ?? 0) + 1
  }
  return counts
}

/**
 * Reads `fleet`'s bus from now on; `until(predicate)` resolves with everything read once the events so far
 * satisfy it, failing after EVENTS_MS with what was seen.
 */
function record(
  fleet: Fleet,
  match: string,
): { events: BusEvent[]; until: (done: (events: BusEvent[]) => boolean, what: string) => Promise<BusEvent[]>; stop: () => void } {
  const controller = new AbortController()
  const events: BusEvent[] = []
  const watchers = new Set<() => void>()
  void (async () => {
    for await (const event of fleet.bus.iter({ match, matchType: 'regex', signal: controller.signal, hwm: 1_000_000 })) {
      events.push(event)
      for (const watcher of watchers) watcher()
    }
  })()
  const until = (done: (events: BusEvent[]) => boolean, what: string): Promise<BusEvent[]> =>
    deadline(
      new Promise<BusEvent[]>((resolve) => {
        const check = (): void => {
          if (!done(events)) return
          watchers.delete(check)
          resolve(events)
        }
        watchers.add(check)
        check()
      }),
      EVENTS_MS,
      what,
    )
  return { events, until, stop: () => controller.abort() }
}

/** A minion link made by hand, with keys of its own, to the top's ports: a peer that then misbehaves. Closed after the test. */
async function handMadeLink(top: Fleet, transport: TransportName, id: string): Promise<MasterLink> {
  const dir = await mkdtemp(join(tmpdir(), `${id}-`))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const ports = top.ports.get(transport)!
  const link = new MasterLink({
    id,
    keys: generateKeys(),
    transport: await loadTransport(transport),
    client: { broker: top.broker },
    host: top.host,
    port: ports.ret,
    publishPort: ports.publish,
    pkiDir: join(dir, 'pki'),
    authTimeoutMs: 5000,
    acceptanceWaitMs: 200,
    acceptanceWaitMaxMs: 0,
    spoolDir: join(dir, 'spool'),
    returnRetryDelayMs: () => 1000,
    returnRetryTries: 1,
  })
  cleanups.push(() => link.close())
  return link
}

/** The tree of the issue: a top master (order_masters) with one minion of its own, and two syndic nodes with two minions each. */
async function startTree(
  transport: TransportName,
  topConfig: Record<string, unknown> = {},
  nodeConfig: Record<string, unknown> = {},
  start: typeof startFleet = startFleet,
): Promise<{ top: Fleet; nodes: Fleet[] }> {
  const top = await start({ minions: [{ id: 'direct1', transport, grains: { role: 'web' } }], masterConfig: { order_masters: true, ...topConfig } })
  const node = (name: string, minions: FleetMinion[]) => start({ minions, masterConfig: nodeConfig, syndic: { id: name, upper: top, transport } })
  const nodes = await Promise.all([
    node('syndic1', [
      { id: 's1-web', transport, grains: { role: 'web' } },
      { id: 's1-db', transport, grains: { role: 'db' } },
    ]),
    node('syndic2', [
      { id: 's2-web', transport, grains: { role: 'web' } },
      { id: 's2-db', transport, grains: { role: 'db' } },
    ]),
  ])
  return { top, nodes }
}

describe.each(TRANSPORTS)('a tree of masters over %s', (transport) => {
  // One tree for this describe's tests: none stops a daemon; the last one adds a plain minion to the top.
  const startShared = useSharedFleets()
  let shared: ReturnType<typeof startTree> | undefined
  const tree = (): ReturnType<typeof startTree> => (shared ??= startTree(transport, {}, {}, startShared))

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
    const queued = await top.run('brine', ['*', 'test.echo', 'later', '--async'])
    const jid = /job ID: (\d{20})/.exec(queued.stdout)?.[1]
    expect(jid, queued.stdout + queued.stderr).toBeDefined()
    // Every return is stored at the top before its event; lookup_jid reads the job cache, so wait for the last event.
    const expected = { direct1: 'later', 's1-web': 'later', 's1-db': 'later', 's2-web': 'later', 's2-db': 'later' }
    await returns.until((events) => events.filter((event) => event.data['jid'] === jid).length >= 5, `the 5 returns of ${jid!} on the top's bus`)
    returns.stop()
    const lookup = await top.run('brine-run', ['jobs.lookup_jid', jid!, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual(expected)
  })

  it('a minion whose key is not accepted as a syndic cannot speak for minions: refused, logged, nothing stored; brine-key -L shows the real syndic', async () => {
    const { top } = await tree()
    const link = await handMadeLink(top, transport, 'plain')
    const publishes = link.publishes()[Symbol.asyncIterator]()
    await link.start()
    await deadline(link.authenticated, EVENTS_MS, 'the plain minion accepted by the top (auto_accept)')
    const jid = jidOf((await top.run('brine', ['*', 'test.ping', '--async'])).stdout)
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
    const lookup = async () => json((await top.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])).stdout) as Record<string, unknown>
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
    const syndics = json((await top.run('brine-run', ['syndics.list', '--out', 'json'])).stdout) as Record<string, { syndic_key: boolean; minions: string[] }>
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
    const top = await startFleet({ minions: [{ id: 'direct1', transport }], masterConfig: { order_masters: true } })
    const node = await startFleet({
      minions: [
        { id: 's1-a', transport },
        { id: 's1-b', transport },
      ],
      syndic: { id: 'syndic1', upper: top, transport },
    })
    const below = record(node, '^salt/job/')
    const announced = record(top, '^syndic/')
    const jid = jidOf((await top.run('brine', ['*', 'cmd.run', 'sleep 3; echo slept', '--async'])).stdout)
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
    await top.run('brine-run', ['jobs.list_jobs', '--out', 'json'])
    await returns.until(
      (events) => events.some((event) => /^salt\/run\/\d+\/ret$/.test(event.tag) && event.data['fun'] === 'runner.jobs.list_jobs'),
      'the events of the jobs.list_jobs runner',
    )
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, 's1-a': 1, 's1-b': 1 })
    const lookup = await top.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual({ direct1: 'slept', 's1-a': 'slept', 's1-b': 'slept' })
  })

  it('kill a syndic: manage.status, manage.up and manage.down include the minions behind syndics, never the syndics; with -v its minions are reported "Minion did not return", the rest return, the exit code says so, and the syndic itself is not reported', async () => {
    const { top, nodes } = await startTree(transport, { syndic_wait: 1, gather_job_timeout: 2 })
    const status = await top.run('brine-run', ['manage.status', '--out', 'json'])
    expect(json(status.stdout)).toEqual({ up: ['direct1', 's1-db', 's1-web', 's2-db', 's2-web'], down: [] })
    // The top learns which minions are behind each syndic from their announcements.
    const first = await top.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(Object.keys(json(first.stdout)).sort()).toEqual(['direct1', 's1-db', 's1-web', 's2-db', 's2-web'])
    await nodes[1]!.syndic!.stop('SIGKILL')
    const ping = await top.run('brine', ['*', 'test.ping', '-v', '-t', '2'])
    expect(ping.stdout).toContain('Executing job with jid')
    for (const id of ['direct1', 's1-web', 's1-db']) expect(ping.stdout).toContain(`${id}:\n    True\n`)
    for (const id of ['s2-web', 's2-db']) expect(ping.stdout).toMatch(new RegExp(`${id}:\\n +Minion did not return\\. \\[No response\\]`))
    expect(ping.stdout.match(/Minion did not return/g)).toHaveLength(2)
    expect(ping.stdout).not.toContain('syndic')
    expect(ping.code).toBe(1)
    const down = await top.run('brine-run', ['manage.down', '-t', '1', '--out', 'json'])
    expect(JSON.parse(down.stdout)).toEqual(['s2-db', 's2-web'])
    const up = await top.run('brine-run', ['manage.up', '-t', '1', '--out', 'json'])
    expect(JSON.parse(up.stdout)).toEqual(['direct1', 's1-db', 's1-web'])
  })

  it('a syndic that sends a return for a minion it did not announce, or for a minion of the master itself, is refused and logged', async () => {
    const top = await startFleet({ minions: [{ id: 'direct1', transport }], masterConfig: { order_masters: true } })
    // A syndic made by hand: a real link with its own keys, which then misbehaves.
    const link = await handMadeLink(top, transport, 'rogue')
    const publishes = link.publishes()[Symbol.asyncIterator]()
    const mark = top.startEventCount
    await link.start()
    await deadline(link.authenticated, EVENTS_MS, 'the rogue syndic accepted by the top')
    // A syndic the operator accepted as one, then compromised: it may lie about its own subtree only.
    await top.acceptSyndic('rogue')
    await link.send({ cmd: '_syndic_event', id: 'rogue', events: [{ tag: tags.syndicStart('rogue'), data: { id: 'rogue' } }] })
    await top.waitForSyndicStart('rogue', mark)

    const returns = record(top, '^salt/job/')
    const jid = jidOf((await top.run('brine', ['*', 'test.ping', '--async'])).stdout)
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
    const lookup = await top.run('brine-run', ['jobs.lookup_jid', jid, '--out', 'json'])
    expect(json(lookup.stdout)).toEqual({ direct1: true, ghost1: 'forged' })
    await top.master.waitForOutput(
      /refused a return from syndic rogue for minion "ghost2" of job \d+: syndic rogue did not announce minion "ghost2"/,
      EVENTS_MS,
    )
    await top.master.waitForOutput(/refused a return from syndic rogue for minion "direct1" of job \d+: "direct1" is a minion of this master/, EVENTS_MS)
    returns.stop()
    expect(returnCounts(returns.events, jid)).toEqual({ direct1: 1, ghost1: 1 })
  })
})

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
    const { top } = await startTree(transport, pg, pg)
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
