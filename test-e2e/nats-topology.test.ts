/**
 * Topologies only a broker gives, as real processes: a master and minions on a 3-server NATS cluster, one
 * server killed while a job runs below it; a master at a hub and minions at a site server joined to it as a
 * leaf node.
 */
import { readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseJobReturnTag, type BusEvent } from '@brine/protocol'
import { NatsServerProcess, deadline, freeLoopbackPort } from '@brine/testkit'
import { type Fleet } from '@brine/harness'
import { useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'
import { RawNatsSubscriber } from './helpers/raw-nats.js'

const startFleet = useFleets()
const WAIT_MS = 60_000

/** Quick reconnects and return retries, so a failover is over within seconds. */
const QUICK = { recon_default: 100, recon_max: 500, return_retry_timer: 1, return_retry_timer_max: 1, return_retry_tries: 10 }

async function poll(condition: () => boolean, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20))
    })(),
    WAIT_MS,
    what,
  )
}

describe('a 3-server NATS cluster', () => {
  it('master on A, minions on B and C; B is killed while the job runs: every minion returns exactly once', async () => {
    const fleet = await startFleet({ natsCluster: 3, transports: ['nats'], minions: [] })
    const [, b, c] = fleet.natsServers
    const marks = await mkdtemp(join(tmpdir(), 'brine-cluster-'))
    try {
      const ids = ['b1', 'b2', 'c1']
      const mark = fleet.startEventCount
      for (const id of ids) await fleet.startMinion({ id, transport: 'nats', config: { nats_servers: [(id.startsWith('b') ? b! : c!).url], ...QUICK } })
      await Promise.all(ids.map((id) => fleet.waitForMinionStart(id, mark)))

      const seen: BusEvent[] = []
      const controller = new AbortController()
      const reading = (async () => {
        for await (const event of fleet.bus.iter({ match: '^salt/job/\\d+/ret/', matchType: 'regex', hwm: 100_000, signal: controller.signal }))
          seen.push(event)
      })()
      // Each minion marks that it runs the job, then works for 3 s: B is killed in that window.
      const job = fleet.run('brine', ['*', 'cmd.run', `touch ${marks}/started-$$; sleep 3; echo done`, '--out', 'json', '--static', '-t', '30', '--show-jid'], {
        ms: WAIT_MS * 2,
      })
      await poll(() => readdirSync(marks).length >= 3, 'the three minions to start the job')
      await b!.stop()
      const result = await job
      const jid = /^jid: (\d{20})$/m.exec(result.stdout)?.[1]
      expect(jid, result.stdout + result.stderr).toBeDefined()
      expect(json(result.stdout.replace(/^jid: .*\n/, ''))).toEqual({ b1: 'done', b2: 'done', c1: 'done' })
      await poll(() => seen.filter((event) => parseJobReturnTag(event.tag)?.jid === jid).length >= 3, 'the three return events')
      controller.abort()
      await reading
      const counts: Record<string, number> = {}
      for (const event of seen) {
        const parsed = parseJobReturnTag(event.tag)
        if (parsed !== undefined && parsed.jid === jid) counts[parsed.id] = (counts[parsed.id] ?? 0) + 1
      }
      expect(counts).toEqual({ b1: 1, b2: 1, c1: 1 })
    } finally {
      await rm(marks, { recursive: true, force: true })
    }
  })
})

describe('a NATS leaf node', () => {
  it("master at the hub, minions at the site: jobs and returns cross the leaf link, and a targeted publish travels only on its minion's subject", async () => {
    const leafPort = await freeLoopbackPort()
    const hub = await NatsServerProcess.start({ name: 'hub', leafPort })
    const site = await NatsServerProcess.start({ name: 'site', leafRemotes: [`nats-leaf://127.0.0.1:${leafPort}`] })
    await Promise.all([hub.waitForLinks('leafnodes', 1), site.waitForLinks('leafnodes', 1)])
    let fleet: Fleet | undefined
    let stranger: RawNatsSubscriber | undefined
    try {
      fleet = await startFleet({ natsServer: hub, transports: ['nats'], minions: [] })
      const ids = ['site1', 'site2']
      const mark = fleet.startEventCount
      for (const id of ids) await fleet.startMinion({ id, transport: 'nats', config: { nats_servers: [site.url], ...QUICK } })
      await Promise.all(ids.map((id) => fleet!.waitForMinionStart(id, mark)))
      const ping = async (args: string[]): Promise<unknown> => {
        const result = await fleet!.run('brine', [...args, 'test.ping', '--out', 'json', '--static', '-t', '30'], { ms: WAIT_MS * 2 })
        expect(result.code, result.stdout + result.stderr).toBe(0)
        return json(result.stdout)
      }
      expect(await ping(['*'])).toEqual({ site1: true, site2: true })

      // A stranger at the site listening to every publish subject of the fleet (it cannot open them, but sees where they go).
      const publishes = `brine.${fleet.ports.get('nats')!.publish}.pub`
      stranger = await RawNatsSubscriber.subscribe(site.port, `${publishes}.>`)
      // Its interest reaches the hub over the leaf link in its own time: broadcasts until one reaches it.
      for (let attempt = 1; stranger.subjects.length === 0; attempt++) {
        if (attempt > 10) throw new Error(`${attempt - 1} broadcasts answered by both minions, none seen by a subscriber at the site`)
        expect(await ping(['*'])).toEqual({ site1: true, site2: true })
      }
      expect(new Set(stranger.subjects)).toEqual(new Set([`${publishes}.all`]))
      stranger.subjects.length = 0

      expect(await ping(['-L', 'site1'])).toEqual({ site1: true })
      await poll(() => stranger!.subjects.length > 0, 'the targeted publish to reach the site')
      expect(new Set(stranger.subjects)).toEqual(new Set([`${publishes}.m.site1`]))
    } finally {
      stranger?.close()
      await fleet?.stop()
      await site.close()
      await hub.close()
    }
  })
})
