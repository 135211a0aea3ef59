import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { deadline } from '@brine/testkit'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()

/** The master's stop-time account of its request workers: `worker_threads: N task(s) ran on T of S worker threads (op n, …)`. */
const POOL_LINE = /worker_threads: (\d+) task\(s\) ran on (\d+) of (\d+) worker threads \(([^)]*)\)/

function countsOf(detail: string): Record<string, number> {
  return Object.fromEntries(detail.split(', ').map((part) => [part.split(' ')[0]!, Number(part.split(' ')[1])]))
}

describe.each(TRANSPORTS)("the master's worker pool as shipped, over %s", (transport) => {
  it('the built brine-master with worker_threads on authenticates the minion, seals each job and opens its return on worker threads', async () => {
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
    ]
    for (const job of jobs) {
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
    // The minion's _auth (signature checks), its box's shared key (every return it sealed is opened with it), and one
    // sealed, signed publish per job: each reported done by a worker thread, not the master's main thread.
    expect(counts['auth']).toBeGreaterThanOrEqual(1)
    expect(counts['box-shared-key']).toBeGreaterThanOrEqual(1)
    expect(counts['seal-publish']).toBeGreaterThanOrEqual(jobs.length)
    expect(Number(total)).toBe(Object.values(counts).reduce((sum, count) => sum + count, 0))
  })
})
