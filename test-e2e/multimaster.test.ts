/**
 * A minion with two masters, as real processes over each transport: `master_type: str` (both
 * masters reach it; one killed mid-run, the other's jobs still work, the killed one gets its return
 * when it is back; a jid published by both runs once and answers both) and `master_type: failover`
 * (the first master killed: the second takes over; the first back: its return delivered, then
 * `master_failback` returns to it). On the socket transports the second master binds 127.0.0.2 on the first
 * one's ports: all of 127.0.0.0/8 is loopback on Linux. On NATS both masters are on one nats-server with ports of
 * their own, and the minion names each as `host:port` (issue 28, topology 3).
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalClient } from '@brine/client'
import { generateJid } from '@brine/protocol'
import { withClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()
// Named from the helper, not from the package that holds Fleet (moving to @brine/testkit).
type Fleet = Awaited<ReturnType<typeof startFleet>>
type TransportName = (typeof TRANSPORTS)[number]

const WAIT_MS = 30_000
const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Two masters: the first on 127.0.0.1 (whose fleet runs the minion, logging at info), the second on 127.0.0.2 on the same ports (on NATS: the same nats-server, its own ports). */
async function twoMasters(transport: TransportName): Promise<[Fleet, Fleet]> {
  // A short gather_job_timeout keeps "did not return" rounds short.
  const one = await startFleet({ minions: [], transports: [transport], logLevel: 'info', masterConfig: { gather_job_timeout: 1 } })
  const ports = one.ports.get(transport)!
  // On NATS both masters are on the first one's nats-server, each on ports of its own: the ports are their names there.
  if (transport === 'nats') return [one, await startFleet({ minions: [], transports: [transport], natsFrom: one, masterConfig: { gather_job_timeout: 1 } })]
  const two = await startFleet({
    minions: [],
    transports: [transport],
    masterConfig: { interface: '127.0.0.2', publish_port: ports.publish, ret_port: ports.ret, gather_job_timeout: 1 },
  })
  return [one, two]
}

/** Quick timers, so a dead master is noticed and returns are retried within seconds. */
const QUICK = { auth_timeout: 2, recon_default: 200, recon_max: 1000, return_retry_timer: 1, return_retry_timer_max: 1, return_retry_tries: 1 }

// The pings, the lookups in the job cache and an echo go through clients in this process (a `brine` or `brine-run`
// process each cost more than the call), made for each call: these tests kill and restart masters. The CLI's own answers
// (no minion matched, a minion that does not return) stay the CLI's. The jobs published to be killed mid-run go through
// a client too: the master writes a job's record before publishing it, so the restarted master knows it (jobsave).
/** `brine <id> test.ping`: the returns, once every expected minion returned with retcode 0 (as the CLI exits 0). */
async function ping(fleet: Fleet, id: string): Promise<Record<string, unknown>> {
  const { returns, allSucceeded } = await withClients(fleet, (clients) => clients.run(fleet, id, 'test.ping'))
  expect(allSucceeded, JSON.stringify(returns)).toBe(true)
  return returns
}

/** Pings after a master came back, at most this many jobs: see {@link pingWhenBack}. */
const PINGS_WHEN_BACK = 3

/**
 * `ping` for a minion whose publish link to `fleet` just came back (a restart, a failover, a failback): the minion logs the link on its
 * connect, and on ZeroMQ its subscription reaches the master's socket after that (a publish in between misses it, as
 * test-e2e/restart.test.ts's pings allow for); the `brine` process this replaced started later than a client does. The
 * next job reaches it: up to PINGS_WHEN_BACK jobs, the last one asserted.
 */
async function pingWhenBack(fleet: Fleet, id: string): Promise<Record<string, unknown>> {
  for (let attempt = 1; attempt < PINGS_WHEN_BACK; attempt++) {
    const { returns, allSucceeded } = await withClients(fleet, (clients) => clients.run(fleet, id, 'test.ping'))
    if (allSucceeded) return returns
  }
  return ping(fleet, id)
}

const lookupJid = (fleet: Fleet, jid: string): Promise<unknown> => withClients(fleet, (clients) => clients.runner(fleet, 'jobs.lookup_jid', [jid]))

/**
 * The minion's `master` entries for the two masters, and the `host:port` its link to each is named by. On the
 * socket transports they share ports on two hosts; on a broker a master is named by its prefix and ports, not a
 * host (two masters on one port would be one queue group), so the entries name each one's port (`host:port`).
 */
function mastersFor(transport: TransportName, one: Fleet, two: Fleet): { master: [string, string]; names: [string, string] } {
  const first = one.ports.get(transport)!.ret
  if (transport === 'nats') {
    const second = two.ports.get(transport)!.ret
    return { master: [`127.0.0.1:${first}`, `127.0.0.1:${second}`], names: [`127.0.0.1:${first}`, `127.0.0.1:${second}`] }
  }
  // The second fleet serves the first one's ports (its masterConfig), whatever its own port table says.
  return { master: ['127.0.0.1', '127.0.0.2'], names: [`127.0.0.1:${first}`, `127.0.0.2:${first}`] }
}

/**
 * The minion's config for two masters: the fleet writes the first master's publish_port, which would win over
 * what each auth reply names; on NATS the masters' publish ports differ, so it is left out there.
 */
function twoMasterConfig(transport: TransportName, master: [string, string], rest: Record<string, unknown>): Record<string, unknown> {
  return { master, ...(transport === 'nats' ? { publish_port: undefined } : {}), ...rest }
}

describe.each(TRANSPORTS)('multi-master minions over %s', (transport) => {
  it('master_type str: jobs from either master; one killed mid-run, the other still works and the killed one gets its return once when back; a jid published by both runs once', async () => {
    const [one, two] = await twoMasters(transport)
    const { master } = mastersFor(transport, one, two)
    const minion = await one.startMinion({ id: 'mm', transport, config: twoMasterConfig(transport, master, { master_type: 'str', ...QUICK }) })
    await Promise.all([one.waitForMinionStart('mm'), two.waitForMinionStart('mm')])
    expect(await ping(one, 'mm')).toEqual({ mm: true })
    expect(await ping(two, 'mm')).toEqual({ mm: true })

    // The same jid published by both masters: it runs once, and each master's client gets the return.
    const shared = join(one.root, 'shared.txt')
    const jid = generateJid()
    const clients = [new LocalClient({ configDir: one.masterConfigDir }), new LocalClient({ configDir: two.masterConfigDir })]
    try {
      const answers = await Promise.all(clients.map((client) => client.cmd('mm', 'cmd.run', [`echo ran >> ${shared}; echo done`], { jid })))
      expect(answers).toEqual([{ mm: 'done' }, { mm: 'done' }])
    } finally {
      await Promise.all(clients.map((client) => client.close()))
    }
    expect(await readFile(shared, 'utf8')).toBe('ran\n')

    // A job of the first master runs while that master is killed.
    const slowFile = join(one.root, 'slow.txt')
    const slow = await withClients(one, (_clients, made) => made.local.cmdAsync('mm', 'cmd.run', [`echo ran >> ${slowFile}; sleep 3; echo slept`]))
    await minion.waitForOutput(new RegExp(`Executing command cmd.run with jid ${slow}`), WAIT_MS)
    expect((await one.master.stop('SIGKILL')).signal).toBe('SIGKILL')
    expect(await ping(two, 'mm')).toEqual({ mm: true })
    expect((await withClients(two, (clients) => clients.run(two, 'mm', 'test.echo', ['still here']))).returns).toEqual({ mm: 'still here' })
    await minion.waitForOutput(new RegExp(`return of job ${slow} \\(cmd.run\\) not acknowledged .*; spooled to `), WAIT_MS)

    // Back: the spooled return reaches it, once; it ran once.
    await one.launchMaster()
    await minion.waitForOutput(new RegExp(`spooled return of job ${slow} \\(cmd.run\\) delivered`), WAIT_MS)
    expect(await lookupJid(one, slow)).toEqual({ mm: 'slept' })
    expect(minion.stderr.match(new RegExp(`spooled return of job ${slow} \\(cmd.run\\) delivered`, 'g'))).toHaveLength(1)
    expect(await readFile(slowFile, 'utf8')).toBe('ran\n')
    // Its publishes reach the minion again once the minion's publish link is back (it says so). On NATS that link
    // is the broker's and never went away: the ping below is the whole check there.
    if (transport !== 'nats')
      await minion.waitForOutput(new RegExp(`publishes from \\S*127\\.0\\.0\\.1:${one.ports.get(transport)!.publish}: connected again`), WAIT_MS)
    expect(await pingWhenBack(one, 'mm')).toEqual({ mm: true })
    // The second master never saw that job's return.
    expect(await lookupJid(two, slow)).toEqual({})
  })

  it('master_type failover: the first master killed, the second takes over; the first back, its return is delivered and master_failback returns to it', async () => {
    const [one, two] = await twoMasters(transport)
    const { master, names } = mastersFor(transport, one, two)
    const minion = await one.startMinion({
      id: 'fo',
      transport,
      config: twoMasterConfig(transport, master, {
        master_type: 'failover',
        master_alive_interval: 1,
        master_failback: true,
        master_failback_interval: 1,
        ...QUICK,
      }),
    })
    await one.waitForMinionStart('fo')
    expect(await ping(one, 'fo')).toEqual({ fo: true })
    // One master at a time: the second has never heard of this minion.
    const none = await two.run('brine', ['fo', 'test.ping', '--out', 'json', '--static'])
    expect(none.code).toBe(2)
    expect(none.stderr).toContain('No minions matched the target')

    const slowFile = join(one.root, 'slow.txt')
    const slow = await withClients(one, (_clients, made) => made.local.cmdAsync('fo', 'cmd.run', [`echo ran >> ${slowFile}; sleep 3; echo slept`]))
    await minion.waitForOutput(new RegExp(`Executing command cmd.run with jid ${slow}`), WAIT_MS)
    const secondMark = two.startEventCount
    expect((await one.master.stop('SIGKILL')).signal).toBe('SIGKILL')

    // The alive check notices; the minion tunes in to the second master and announces itself there.
    await two.waitForMinionStart('fo', secondMark)
    // The line reaches this process through the minion's stderr pipe, which may trail the event through the second master.
    await minion.waitForOutput(
      new RegExp(`using the master ${escape(names[1])} \\(${escape(master[1])}\\) instead of ${escape(names[0])}; the one before is gone`),
      WAIT_MS,
    )
    expect(await pingWhenBack(two, 'fo')).toEqual({ fo: true })
    await minion.waitForOutput(new RegExp(`return of job ${slow} \\(cmd.run\\) not acknowledged .*; spooled to `), WAIT_MS)

    // The first master is back: the link kept for it delivers the return, then failback uses it again.
    await one.launchMaster()
    await minion.waitForOutput(new RegExp(`spooled return of job ${slow} \\(cmd.run\\) delivered`), WAIT_MS)
    await minion.waitForOutput(
      new RegExp(`using the master ${escape(names[0])} \\(${escape(master[0])}\\) instead of ${escape(names[1])}; failing back to the first master`),
      WAIT_MS,
    )
    expect(await lookupJid(one, slow)).toEqual({ fo: 'slept' })
    expect(await readFile(slowFile, 'utf8')).toBe('ran\n')
    expect(await pingWhenBack(one, 'fo')).toEqual({ fo: true })

    // The second master's link is closed once nothing is owed to it: its jobs no longer reach the minion.
    await minion.waitForOutput(new RegExp(`closed the link to ${escape(names[1])}`), WAIT_MS)
    const gone = await two.run('brine', ['fo', 'test.ping', '-t', '1', '--out', 'json', '--static'])
    expect(gone.code).toBe(1)
    expect(json(gone.stdout)).not.toHaveProperty('fo', true)
  })
})
