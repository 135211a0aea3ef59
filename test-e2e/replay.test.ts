/**
 * The built daemons, as real processes, against what issue 15 found and issue 13 asked for:
 *
 * - a minion configured with only `master` and `master_port` subscribes on the publish port the master's
 *   auth reply names — for a master serving TCP through `transport_opts` on ports of its own, as on 4605/4606;
 * - recorded sealed requests replayed at a built master do nothing again, and a return for a job the
 *   minion was not sent is refused and never shows in the job cache.
 */
import { join } from 'node:path'
import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { MasterEvent } from '@brine/client'
import { tags, type BusEvent } from '@brine/protocol'
import { deadline } from '@brine/testkit'
import { FakeMinion, runCleanups } from '../packages/master/test/helpers.js'
import { FleetClients } from './helpers/clients.js'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

// The jobs here are means (a ping that reaches both minions, a job to forge a return for, its stored returns): they go
// through clients in this process instead of a `brine` or `brine-run` process each.
const clients = new FleetClients()
const startFleet = useFleets(async () => {
  await clients.close()
  await runCleanups()
})

describe.each(TRANSPORTS)('connecting and replaying over %s', (transport) => {
  it('a minion with only master and master_port finds the publish port in the auth reply, on a master serving every transport', async () => {
    // publish_port left out of the minion's config (undefined is not written): it must come from the master.
    const fleet = await startFleet({
      transports: ['zeromq', 'tcp', 'nats'],
      minions: [
        { id: 'web1', transport, config: { publish_port: undefined } },
        { id: 'db1', transport, config: { publish_port: undefined } },
      ],
    })
    const config = await readFile(join(fleet.minionConfigDir('web1'), 'minion'), 'utf8')
    expect(config).toContain(`master_port: ${fleet.ports.get(transport)!.ret}`)
    expect(config).not.toContain('publish_port')
    const ping = await clients.run(fleet, '*', 'test.ping')
    expect(ping.returns).toEqual({ web1: true, db1: true })
    expect(ping.allSucceeded).toBe(true)
  })

  it('a built master answers 100 replays of a recorded _minion_event with one event, and refuses a return for a job not sent', async () => {
    const fleet = await startFleet({ minions: [{ id: 'web1', transport }] })
    const ports = fleet.ports.get(transport)!
    const fake = await FakeMinion.start(
      transport,
      'spy',
      { host: '127.0.0.1', publishPort: ports.publish, retPort: ports.ret, broker: fleet.broker },
      join(fleet.root, 'spy-pki'),
    )
    expect(await fake.auth()).toEqual({ ok: true })
    const bus = new MasterEvent({ sockDir: fleet.sockDir })
    await bus.connect()
    const seen: BusEvent[] = []
    const waiters = new Map<string, () => void>()
    const controller = new AbortController()
    const reading = (async () => {
      for await (const event of bus.iter({ match: 'salt/', signal: controller.signal })) {
        seen.push(event)
        waiters.get(event.tag)?.()
      }
    })()
    /** Resolves once `tag` has been seen on the bus. */
    const sight = (tag: string): Promise<void> =>
      seen.some((event) => event.tag === tag)
        ? Promise.resolve()
        : deadline(new Promise<void>((resolve) => waiters.set(tag, resolve)), 10_000, `${tag} on the bus`)
    try {
      const tag = 'salt/minion/spy/replayed'
      const recorded = fake.box!.seal({ cmd: '_minion_event', id: 'spy', events: [{ tag, data: { n: 1 } }] })
      const replies: unknown[] = []
      for (let replay = 0; replay <= 100; replay++) replies.push(fake.box!.open(await fake.request.send(recorded)))
      expect(replies[0]).toEqual({ ok: true })
      expect(replies.slice(1)).toEqual(Array.from({ length: 100 }, () => ({ ok: true, duplicate: true })))

      // A job for web1 only; the spy's return for it is refused and never stored.
      const jid = await clients.of(fleet).local.cmdAsync(['web1'], 'test.ping', [], { tgtType: 'list' })
      const web1Returned = sight(tags.jobReturn(jid, 'web1'))
      expect(await fake.returnJob(jid, 'forged')).toMatchObject({
        ok: false,
        error: { name: 'ReturnRefusedError', context: { reason: 'not sent to this minion' } },
      })
      // The bus is in order: once a later event is seen, the replays' events would have been too.
      const after = sight('salt/minion/spy/after')
      expect(await fake.sealed({ cmd: '_minion_event', id: 'spy', events: [{ tag: 'salt/minion/spy/after', data: {} }] })).toEqual({ ok: true })
      await after
      await web1Returned
      expect(seen.filter((event) => event.tag === tag)).toHaveLength(1)
      expect(seen.filter((event) => event.tag === tags.jobReturn(jid, 'spy'))).toEqual([])
      expect(await clients.runner(fleet, 'jobs.lookup_jid', [jid])).toEqual({ web1: true })
    } finally {
      controller.abort()
      await reading
      await bus.close()
    }
  })
})
