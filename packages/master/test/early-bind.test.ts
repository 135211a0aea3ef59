/**
 * A restarting master binds its ports before the rest of its start and holds what arrives until it is ready: a minion
 * reconnecting meanwhile is connected at its first attempt, and its check-in is answered, not refused. The start is held
 * in the middle by a FIFO in place of a minion's cached grains file (the grains cache waits for its writer).
 */
import { execFileSync } from 'node:child_process'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { deadline } from '@brine/transport-compliance'
import { Master, MemoryJobStore } from '../src/index.js'
import { cleanups, FakeMinion, natsFor, runCleanups, startMasterWithMinions, stopNatsServer, tempDir, WAIT_MS } from './helpers.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

/** Resolves once `ready()` is true, polling; bounded by WAIT_MS. */
async function until(ready: () => boolean, what: string): Promise<void> {
  const poll = (async () => {
    while (!ready()) await new Promise((resolve) => setTimeout(resolve, 10))
  })()
  await deadline(poll, WAIT_MS, what)
}

/** Resolves at the endpoint's `listening` event (its recent events are replayed to a new reader). */
async function listening(endpoint: { events(): AsyncIterable<{ type: string }> }): Promise<void> {
  for await (const event of endpoint.events()) if (event.type === 'listening') return
}

describe.each(TRANSPORTS)('a master starting over %s', (transport) => {
  it('is bound before it is ready: a check-in sent meanwhile waits and is answered once the start is done', async () => {
    const dir = await tempDir()
    const { master, minions } = await startMasterWithMinions(dir, transport, ['web1'])
    const [web1] = minions as [FakeMinion]
    await master.stop()
    // web1's cached grains are a FIFO: the next start reads it and waits there until the test writes to it.
    const grains = join(master.opts.cachedir, 'minions', 'web1', 'grains')
    await mkdir(join(grains, '..'), { recursive: true })
    await rm(grains, { force: true })
    execFileSync('mkfifo', [grains])
    const again = new Master({ ...master.opts, ...(await natsFor(transport)).config }, { jobs: new MemoryJobStore() })
    cleanups.push(() => again.stop())
    let ready = false
    const starting = again.start().then(() => (ready = true))
    // Sealed in the millisecond the master started, a request would be refused as older than its start (it re-seals then).
    const startedAt = Date.now()
    await until(() => again.endpoints.length > 0 && Date.now() > startedAt, "the starting master's endpoints")
    await deadline(listening(again.endpoints[0]!.request), WAIT_MS, "the starting master's request server to listen")
    expect(ready).toBe(false)
    const checkIn = web1.sealed({ cmd: '_minion_event', id: 'web1', events: [] })
    await until(() => again.requestsHeldAtStart >= 1, 'the check-in to reach the starting master')
    expect(ready).toBe(false)
    await writeFile(grains, '{"os": "Debian"}')
    await deadline(starting, WAIT_MS, 'the master to finish starting')
    const answer = await deadline(checkIn, WAIT_MS, 'the answer to the check-in')
    expect(answer, JSON.stringify(answer)).toMatchObject({ ok: true })
    expect(again.requestsHeldAtStart).toBe(1)
  })
})
