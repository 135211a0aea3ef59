/**
 * What an `_auth` costs the master's request workers. One task (two messages between the threads): the request's
 * checks, with the acceptance made alongside when the key is expected to be accepted; the key store is asked on the
 * main thread. And the box key an accepted `_auth` agreed to seal the session key is kept for the minion's requests,
 * so a fleet authenticating at once costs no second agreement (and no task) per minion. Real request worker threads
 * (the built request-worker.js, as a daemon runs it), on every transport.
 */
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { addressOf, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const
const workerScript = new URL('../dist/request-worker.js', import.meta.url)

describe.each(TRANSPORTS)('the box key agreed at _auth over %s', (transport) => {
  it("opens the minions' first sealed requests without agreeing their keys again; a key replaced since is agreed anew", async () => {
    const dir = await tempDir()
    // workerStartTasks 1: every task goes to the threads, where the pool counts it by kind.
    const { master } = await startMaster(dir, { transport, auto_accept: true, open_mode: true, worker_threads: 2 }, { workerScript, workerStartTasks: 1 })
    const subscribed = watchSubscribers(master.endpoints[0]!.publish)
    const ids = ['web1', 'web2', 'web3']
    const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, addressOf(master), join(dir, `m-${id}`))))
    await subscribed(ids.length)
    for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
    for (const [index, minion] of minions.entries()) {
      expect(await minion.sealed({ cmd: '_minion_event', id: ids[index], events: [] })).toMatchObject({ ok: true })
    }
    expect(master.requestWorkers()?.tasks).toMatchObject({ auth: ids.length })
    expect(master.requestWorkers()?.tasks['box-shared-key']).toBeUndefined()

    // open_mode lets web1 come back under new keys: its requests must be opened with the new key, never the kept one.
    const rekeyed = await FakeMinion.start(transport, 'web1', addressOf(master), join(dir, 'm-web1-rekeyed'))
    expect(await rekeyed.auth()).toEqual({ ok: true })
    expect(await rekeyed.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true })
    const stale = await minions[0]!.request.send(minions[0]!.box!.seal({ cmd: '_minion_event', id: 'web1', events: [] })).then(
      () => undefined,
      (error: { remoteName?: string }) => error.remoteName,
    )
    expect(stale).toBe('DecryptError')
    // The re-key rotated the session key: that one acceptance was made again, under the new key, in a task of its own.
    expect(master.requestWorkers()?.tasks).toMatchObject({ auth: ids.length + 1, 'auth-accept': 1 })
  })

  it('answers each _auth with one worker task: a pending key costs no acceptance, and one accepted since is answered in the same task', async () => {
    const dir = await tempDir()
    const { master, events } = await startMaster(dir, { transport, auto_accept: false, worker_threads: 2 }, { workerScript, workerStartTasks: 1 })
    const subscribed = watchSubscribers(master.endpoints[0]!.publish)
    const web1 = await FakeMinion.start(transport, 'web1', addressOf(master), join(dir, 'm-web1'))
    await subscribed(1)
    expect(await web1.auth()).toEqual({ ok: false, reason: 'pending' })
    await master.store.accept('web1')
    expect(await web1.auth()).toEqual({ ok: true })
    expect(await web1.sealed({ cmd: '_minion_event', id: 'web1', events: [] })).toMatchObject({ ok: true })
    expect(master.requestWorkers()?.tasks).toEqual({ auth: 2 })
    expect(events.tagged('salt/auth').map((event) => event.data['act'])).toEqual(['pend', 'accept'])
  })
})
