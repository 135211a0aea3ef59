/**
 * Topologies only a broker gives, as real processes: a master and minions on a 3-server NATS cluster, one
 * server killed while a job runs below it.
 */
import { readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseJobReturnTag, type BusEvent } from '@brine/common'
import { deadline } from '@brine/testkit'
import { useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()
const WAIT_MS = 60_000

/** Quick reconnects and return retries, so a failover is over within seconds. */
const QUICK = { recon_default: 100, recon_max: 500, return_retry_timer: 1, return_retry_timer_max: 1, return_retry_tries: 10 }

async function poll(condition: () => boolean, what: string): Promise<void> {
  await deadline((async () => {
    while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20))
  })(), WAIT_MS, what)
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
        for await (const event of fleet.bus.iter({ match: '^salt/job/\\d+/ret/', matchType: 'regex', hwm: 100_000, signal: controller.signal })) seen.push(event)
      })()
      // Each minion marks that it runs the job, then works for 3 s: B is killed in that window.
      const job = fleet.run('brine', ['*', 'cmd.run', `touch ${marks}/started-$$; sleep 3; echo done`, '--out', 'json', '--static', '-t', '30', '--show-jid'], { ms: WAIT_MS * 2 })
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
