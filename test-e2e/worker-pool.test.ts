import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadTransport } from '@brine/common'
import { acceptAuthReply, buildAuthRequest, generateKeys, PeerBox } from '@brine/crypt'
import { WORKER_START_TASKS } from '@brine/master'
import { clearRequest } from '@brine/protocol'
import { deadline } from '@brine/testkit'
import type { Fleet, TransportName } from '@brine/harness'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()

/** The master's stop-time account of its request workers: `worker_threads: N task(s) ran on T of S worker threads (op n, …)`. */
const POOL_LINE = /worker_threads: (\d+) task\(s\) ran on (\d+) of (\d+) worker threads \(([^)]*)\)/

/** The master's stop-time account of where it sealed the publishes: `publishes sealed: I on the main thread, P handed to worker threads`. */
const SEALED_LINE = /publishes sealed: (\d+) on the main thread, (\d+) handed to worker threads/

function countsOf(detail: string): Record<string, number> {
  return Object.fromEntries(detail.split(', ').map((part) => [part.split(' ')[0]!, Number(part.split(' ')[1])]))
}

/**
 * A herd at the master's door, made by hand in this process: `count` new minions at once, each authenticating
 * (auto_accept) and then sending one sealed `_grains`, whose box the master opens with the shared key its `_auth`
 * agreed (on a worker thread, to seal the session key). Twice the tasks that make the master start its worker threads,
 * all within its window.
 */
async function herd(fleet: Fleet, transport: TransportName, count: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'herd-'))
  const ports = fleet.ports.get(transport)!
  const client = (await loadTransport(transport)).createRequestClient({ host: fleet.host, port: ports.ret, timeout: 30_000, broker: fleet.broker })
  try {
    await client.start()
    await Promise.all(
      Array.from({ length: count }, async (_, index) => {
        const id = `herd-${index}`
        const keys = generateKeys()
        const request = buildAuthRequest(id, keys)
        const accepted = await acceptAuthReply(await client.send(clearRequest(request)), request, keys, { pkiDir: join(dir, id) })
        expect(accepted.ok, `${id} authenticated`).toBe(true)
        if (!accepted.ok) return
        const box = new PeerBox({ id, role: 'minion', secretKey: keys.box.secretKey, peerPublicKey: accepted.masterPub.box })
        box.open(await client.send(box.seal({ cmd: '_grains', id, grains: { herd: true } })))
      }),
    )
  } finally {
    await client.close()
    await rm(dir, { recursive: true, force: true })
  }
}

describe.each(TRANSPORTS)("the master's worker pool as shipped, over %s", (transport) => {
  it("the built brine-master with worker_threads on runs a herd of minions' auth on worker threads and seals a large job there, a small one on its main thread", async () => {
    // The fleet starts the built brine-master bin with worker_threads: 2, as a user's config would.
    const fleet = await startFleet({ minions: [{ id: 'web1', transport }] })
    const master = fleet.master
    expect(master.stderr).toContain('worker_threads: 2 worker threads')
    // The fallback a missing worker script takes: the main thread would do the work and the test would prove nothing.
    expect(master.stderr).not.toContain('working on the main thread')

    const jobs = [
      ['web1', 'test.ping'],
      ['web1', 'test.echo', 'through the pool'],
      ['*', 'test.echo', 'again'],
      // Over the 16 KiB sealed on the main thread.
      ['web1', 'test.echo', 'x'.repeat(20_000)],
    ]
    for (const [index, job] of jobs.entries()) {
      // A fleet of one minion runs its few tasks on the main thread; a herd is what starts the threads, and they
      // serve the large job that follows it. After the '*' job: the herd's minions would be targeted and not answer.
      if (index === jobs.length - 1) await herd(fleet, transport, 2 * WORKER_START_TASKS)
      const result = await fleet.run('brine', [...job, '--out', 'json', '--static'])
      expect(result.code).toBe(0)
      expect(json(result.stdout)).toEqual({ web1: job[1] === 'test.ping' ? true : job[2] })
    }

    const stderrClosed = once(master.child.stderr!, 'close')
    expect(await master.stop('SIGTERM')).toEqual({ code: 0, signal: null })
    await deadline(stderrClosed, 10_000, "the stopped master's stderr to close")
    const line = POOL_LINE.exec(master.stderr)
    expect(line, master.stderr).not.toBeNull()
    const [, total, threads, size, detail] = line!
    expect(Number(size)).toBe(2)
    expect(Number(threads)).toBeGreaterThanOrEqual(1)
    expect(Number(threads)).toBeLessThanOrEqual(2)
    const counts = countsOf(detail!)
    // The herd's _auths (signature checks, and the shared key each box is then opened with, agreed in the same task) and
    // the large job's sealed, signed publish: each reported done by a worker thread, not the master's main thread. No
    // minion's box key was agreed a second time for its first sealed request.
    expect(counts['auth']).toBeGreaterThanOrEqual(1)
    expect(counts['box-shared-key']).toBeUndefined()
    expect(counts['seal-publish']).toBe(1)
    expect(Number(total)).toBe(Object.values(counts).reduce((sum, count) => sum + count, 0))
    // The three small jobs' publishes (and any saltutil.find_job a slow return made brine send) were sealed on the main
    // thread, without a round trip to a worker.
    const sealed = SEALED_LINE.exec(master.stderr)
    expect(sealed, master.stderr).not.toBeNull()
    expect(Number(sealed![1])).toBeGreaterThanOrEqual(jobs.length - 1)
    expect(Number(sealed![2])).toBe(1)
  })
})
