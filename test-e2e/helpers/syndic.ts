import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach } from 'vitest'
import { loadTransport } from '@brine/common'
import { parseJobReturnTag, type BusEvent } from '@brine/protocol'
import { generateKeys } from '@brine/crypt'
import { MasterLink } from '@brine/link'
import { deadline } from '@brine/testkit'
import { type Fleet, type FleetMinion, type FleetOptions, type TransportName } from '@brine/harness'

/** What the syndic e2e files share: trees of masters, their buses read as they go, and peers made by hand. */

/** Bound on waiting for events that the tree produces within a job's timeout. */
export const EVENTS_MS = 30_000

type StartFleet = (options: Omit<FleetOptions, 'bus'>) => Promise<Fleet>

/** How many `salt/job/<jid>/ret/<id>` events each minion has among `events`. */
export function returnCounts(events: readonly BusEvent[], jid: string): Record<string, number> {
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
export function record(
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

/**
 * Registers the calling file's cleanup and returns the function that makes a minion link by hand, with keys of its
 * own, to the top's ports: a peer that then misbehaves. Each link and its directory are closed after its test.
 */
export function useHandMadeLinks(): (top: Fleet, transport: TransportName, id: string) => Promise<MasterLink> {
  const cleanups: Array<() => Promise<unknown>> = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
  })
  return async (top, transport, id) => {
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
}

/** A top master (order_masters) with one minion of its own, and two syndic nodes with two minions each. */
export async function startTree(
  start: StartFleet,
  transport: TransportName,
  topConfig: Record<string, unknown> = {},
  nodeConfig: Record<string, unknown> = {},
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
