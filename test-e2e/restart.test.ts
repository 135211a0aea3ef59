/**
 * A master restart, with real daemons: the master keeps its session key (docs/security.md, "The session key
 * across a restart"), so its minions answer the next job without authenticating again; a minion key deleted while
 * the master was down makes it start with a new key, which that minion cannot get.
 */
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { describe, expect, it } from 'vitest'
import type { Fleet } from '@brine/harness'
import { withClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

const startFleet = useFleets()

/** Each of a minion's successful `_auth`s logs this line (packages/link, MinionAuth). */
const AUTHENTICATED = /authenticated with the master at \S+ \(session key generation (\d+)\)/g
const PING_ATTEMPTS = 10
/** Each ping's wait for returns before asking the missing minions (the CLI's `-t 3`). */
const PING_TIMEOUT_MS = 3000
/** Each time a minion's publish link comes back to its master, it logs this line (packages/link, PublishSubscription). */
const RECONNECTED = /publishes from \S+: connected again/g
const RECONNECT_WAIT_MS = 30_000

/**
 * test.ping to every accepted minion until `expected` all answered in one job, at most PING_ATTEMPTS times: a
 * minion whose publish link has not reconnected to the restarted master yet misses a publish, and the next one
 * reaches it. Each job goes through clients in this process made for it (the master restarts between calls), not a
 * `brine` process: the ping is a means here. Returns the answering job's jid and returns.
 */
async function pingUntil(fleet: Fleet, expected: Record<string, boolean>): Promise<{ jid: string; returns: unknown }> {
  let last: unknown
  for (let attempt = 0; attempt < PING_ATTEMPTS; attempt++) {
    const { jid, returns } = await withClients(fleet, (clients) => clients.run(fleet, '*', 'test.ping', [], { timeout: PING_TIMEOUT_MS }))
    last = returns
    if (isDeepStrictEqual(returns, expected)) return { jid, returns }
  }
  throw new Error(`test.ping did not get ${JSON.stringify(expected)} in ${PING_ATTEMPTS} jobs; the last got ${JSON.stringify(last)}`)
}

/** Quick retry timers, so a return the dead master did not acknowledge is spooled, and sent again, within seconds. */
const QUICK_RETURNS = { auth_timeout: 2, recon_default: 200, recon_max: 1000, return_retry_timer: 1, return_retry_timer_max: 1, return_retry_tries: 1 }

const authentications = (stderr: string): string[] => [...stderr.matchAll(AUTHENTICATED)].map((match) => match[1]!)

/** How many times each of `ids` has logged its publish link back so far. */
const reconnects = (fleet: Fleet, ids: readonly string[]): number[] => ids.map((id) => fleet.minions.get(id)!.stderr.match(RECONNECTED)?.length ?? 0)

/**
 * After the master restarted: waits until each of `ids` logged its publish link back once more than `before`, so the
 * next publish reaches it instead of a ping waiting out its timeout for a minion still reconnecting. On NATS the link
 * is the broker's and never went away.
 */
async function publishLinksBack(fleet: Fleet, transport: string, ids: readonly string[], before: readonly number[]): Promise<void> {
  if (transport === 'nats') return
  await Promise.all(
    ids.map((id, index) => fleet.minions.get(id)!.waitForOutput(new RegExp(`(?:[\\s\\S]*?${RECONNECTED.source}){${before[index]! + 1}}`), RECONNECT_WAIT_MS)),
  )
}

describe.each(TRANSPORTS)('a master restart over %s', (transport) => {
  it('keeps the session key: the minions answer the next job without authenticating again', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'web2', transport },
      ],
      logLevel: 'info',
      masterConfig: { gather_job_timeout: 1 },
    })
    await pingUntil(fleet, { web1: true, web2: true })
    const held = ['web1', 'web2'].map((id) => authentications(fleet.minions.get(id)!.stderr))
    expect(held.map((gens) => gens.length)).toEqual([1, 1])

    const before = reconnects(fleet, ['web1', 'web2'])
    expect((await fleet.master.stop('SIGTERM')).code).toBe(0)
    await fleet.launchMaster()
    const mark = fleet.startEventCount
    await publishLinksBack(fleet, transport, ['web1', 'web2'], before)
    await pingUntil(fleet, { web1: true, web2: true })
    expect(fleet.master.stderr).toMatch(new RegExp(`session key generation ${held[0]![0]} kept from \\S+\\.session_key .*held by 2 minion`))
    // Not one `_auth` since the first: no salt/auth event on the restarted master, no second line in either minion's log.
    expect(fleet.startEventCount).toBe(mark)
    for (const [index, id] of ['web1', 'web2'].entries()) expect(authentications(fleet.minions.get(id)!.stderr)).toEqual(held[index])
  })

  it('makes a new session key when a minion key was deleted while it was down: that minion cannot read the next job', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'web2', transport },
      ],
      autoAccept: false,
      logLevel: 'info',
      masterConfig: { gather_job_timeout: 1 },
    })
    await Promise.all(['web1', 'web2'].map((id) => fleet.waitForAuth(id, 'pend')))
    const accepting = fleet.startEventCount
    expect((await fleet.run('brine-key', ['-A', '-y'])).code).toBe(0)
    await Promise.all(['web1', 'web2'].map((id) => fleet.waitForMinionStart(id, accepting)))
    await pingUntil(fleet, { web1: true, web2: true })
    const [gen] = authentications(fleet.minions.get('web1')!.stderr).slice(-1)

    const before = reconnects(fleet, ['web1'])
    expect((await fleet.master.stop('SIGTERM')).code).toBe(0)
    // The operator removes web2's key by hand while the master is down.
    await rm(join(fleet.masterConfigDir, 'etc/brine/pki/master/minions/web2'))
    const mark = fleet.startEventCount
    await fleet.launchMaster()
    expect(fleet.master.stderr).toMatch(/not kept: minion "web2" held it and is no longer accepted/)
    await publishLinksBack(fleet, transport, ['web1'], before)
    const { jid } = await pingUntil(fleet, { web1: true })
    // web1 fetched the new key, of the next generation; web2 asked too, and is a pending key now.
    expect(authentications(fleet.minions.get('web1')!.stderr).at(-1)).toBe(String(Number(gen) + 1))
    await fleet.waitForAuth('web2', 'pend', mark)
    const web2 = fleet.minions.get('web2')!.stderr
    expect(web2).not.toContain(`with jid ${jid}`)
    expect(authentications(web2)).toEqual([gen])
  })

  it('takes the return of a job published right before it was SIGKILLed: the job record was written before the publish', async () => {
    const fleet = await startFleet({ minions: [{ id: 'web1', transport, config: QUICK_RETURNS }], logLevel: 'info', masterConfig: { gather_job_timeout: 1 } })
    await pingUntil(fleet, { web1: true })
    const minion = fleet.minions.get('web1')!
    // Published through a client in this process, the master killed as soon as the minion runs it: no CLI's exit in between.
    const jid = await withClients(fleet, (_clients, made) => made.local.cmdAsync('web1', 'cmd.run', ['sleep 3; echo slept']))
    await minion.waitForOutput(new RegExp(`Executing command cmd.run with jid ${jid}`), RECONNECT_WAIT_MS)
    expect((await fleet.master.stop('SIGKILL')).signal).toBe('SIGKILL')
    await minion.waitForOutput(new RegExp(`return of job ${jid} \\(cmd.run\\) not acknowledged .*; spooled to `), RECONNECT_WAIT_MS)

    await fleet.launchMaster()
    await minion.waitForOutput(new RegExp(`spooled return of job ${jid} \\(cmd.run\\) delivered`), RECONNECT_WAIT_MS)
    expect(fleet.master.stderr).not.toContain('unknown jid')
    expect(await withClients(fleet, (clients) => clients.runner(fleet, 'jobs.lookup_jid', [jid]))).toEqual({ web1: 'slept' })
  })
})
