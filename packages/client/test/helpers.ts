import { join } from 'node:path'
import { expect } from 'vitest'
// Tests only: a real master in-process (worker_threads: 0, its default local_cache job cache) and fake minions.
import { Master } from '../../master/src/index.js'
import { addressOf, cleanups, EventLog, FakeMinion, masterConfig, tempDir, watchSubscribers } from '../../master/test/helpers.js'
import { LocalClient } from '../src/local-client.js'

/** A real master over `transport` with fake minions `ids`, subscribed and accepted, and a LocalClient to it. */
export async function setup(transport: string, ids: string[]): Promise<{ master: Master; events: EventLog; client: LocalClient; minions: FakeMinion[] }> {
  const dir = await tempDir()
  const master = new Master(await masterConfig(dir, { transport, auto_accept: true }))
  cleanups.push(() => master.stop())
  const events = new EventLog(master)
  await master.start()
  const address = addressOf(master)
  const subscribers = watchSubscribers(master.endpoints[0]!.publish)
  const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
  await subscribers(ids.length)
  for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
  const client = new LocalClient({ opts: master.opts })
  cleanups.push(() => client.close())
  return { master, events, client, minions }
}
