import { describe, expect, it } from 'vitest'
import type { Fleet, FleetMinion, TransportName } from '@brine/bench'
import type { BusEvent } from '@brine/common'
import { deadline } from '@brine/transport-compliance'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

/** Bound on waiting for events that the tree produces within a job's timeout. */
const EVENTS_MS = 30_000

const startFleet = useFleets()

const json = (stdout: string): Record<string, unknown> => JSON.parse(stdout) as Record<string, unknown>

/**
 * Reads `fleet`'s bus from now on; `until(predicate)` resolves with everything read once the events so far
 * satisfy it, failing after EVENTS_MS with what was seen.
 */
function record(fleet: Fleet, match: string): { events: BusEvent[]; until: (done: (events: BusEvent[]) => boolean, what: string) => Promise<BusEvent[]>; stop: () => void } {
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

/** The tree of the issue: a top master (order_masters) with one minion of its own, and two syndic nodes with two minions each. */
async function startTree(transport: TransportName): Promise<{ top: Fleet; nodes: Fleet[] }> {
  const top = await startFleet({ minions: [{ id: 'direct1', transport, grains: { role: 'web' } }], masterConfig: { order_masters: true } })
  const node = (name: string, minions: FleetMinion[]) => startFleet({ minions, syndic: { id: name, upper: top, transport } })
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
  it('test.ping, cmd.run, a grain target and a compound target on the top reach exactly the right minions; --async then jobs.lookup_jid shows all', async () => {
    const { top } = await startTree(transport)
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
})
