import { afterEach, describe, expect, it } from 'vitest'
import { NatsServerProcess, deadline, freeLoopbackPort } from '@brine/testkit'
import type { Endpoint, PublishServer, TransportEvent } from '@brine/transport'
import type { WireValue } from '@brine/core'
import { natsTransport } from '../src/index.js'

const WAIT_MS = 30_000
const started: Array<Endpoint | NatsServerProcess> = []

afterEach(async () => {
  for (const item of started.splice(0).reverse()) await item.close()
})

function track<T extends Endpoint | NatsServerProcess>(item: T): T {
  started.push(item)
  return item
}

async function until(condition: () => boolean, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10))
    })(),
    WAIT_MS,
    what,
  )
}

/** Three nats-servers routed to each other on loopback. */
async function cluster(): Promise<NatsServerProcess[]> {
  return (await NatsServerProcess.startCluster(3, (index) => `node-${'abc'[index]}`)).map(track)
}

/** A subscriber that counts what it received, and the ids its publish server heard. */
function collect(client: AsyncIterable<WireValue>): WireValue[] {
  const loads: WireValue[] = []
  void (async () => {
    for await (const load of client) loads.push(load)
  })()
  return loads
}

function subscribedIds(server: PublishServer): Set<string> {
  const ids = new Set<string>()
  void (async () => {
    for await (const event of server.events() as AsyncIterable<TransportEvent>)
      if (event.type === 'peer-subscribe' && event.topic !== 'broadcast') ids.add(event.topic)
  })()
  return ids
}

describe('NATS topologies', () => {
  it('a 3-server cluster: master on A, minions on B and C; B is killed mid-run and its minion fails over, 0 requests lost, each answered once', async () => {
    const [a, b, c] = (await cluster()) as [NatsServerProcess, NatsServerProcess, NatsServerProcess]
    const onA = natsTransport({ servers: [a.url], subjectPrefix: 'cluster' })
    const handled = new Map<string, number>()
    const requests = track(onA.createRequestServer({ host: '127.0.0.1', port: 4506 }))
    requests.handle(async (request) => {
      const key = String(request)
      handled.set(key, (handled.get(key) ?? 0) + 1)
      return `ok ${key}`
    })
    await requests.start()
    const publisher = track(onA.createPublishServer({ host: '127.0.0.1', port: 4505 }))
    const ids = subscribedIds(publisher)
    await publisher.start()
    const minion = (id: string, server: NatsServerProcess) => {
      // Each minion knows only its own server; the cluster tells it of the others (INFO connect_urls).
      const transport = natsTransport({ servers: [server.url], subjectPrefix: 'cluster' })
      const reconnect = { initial: 20, max: 200 }
      return {
        requests: track(transport.createRequestClient({ host: '127.0.0.1', port: 4506, reconnect })),
        publishes: track(transport.createPublishClient({ host: '127.0.0.1', port: 4505, id, reconnect })),
      }
    }
    const onB = minion('minion-b', b)
    const onC = minion('minion-c', c)
    const loads = [collect(onB.publishes), collect(onC.publishes)]
    for (const side of [onB, onC]) await Promise.all([side.requests.start(), side.publishes.start()])
    await until(() => ids.has('minion-b') && ids.has('minion-c'), 'both minions to say hello across the cluster')
    await publisher.publish('before', { topics: ['minion-b'] })
    await until(() => loads[0]!.length === 1, 'the targeted publish to reach minion-b through B')

    // 100 requests from each minion, B killed after the first 30 of them went out.
    const sends: Array<Promise<WireValue>> = []
    for (let i = 0; i < 100; i++) {
      if (i === 30) await b.stop()
      for (const [name, side] of [
        ['b', onB],
        ['c', onC],
      ] as const)
        sends.push(side.requests.send(`${name}-${i}`, { timeout: 3000, tries: 5 }))
    }
    const replies = await deadline(Promise.all(sends), WAIT_MS * 2, '200 replies across the failover')
    expect(replies).toHaveLength(200)
    expect(new Set(replies).size).toBe(200)
    expect(handled.size).toBe(200)
    // A request's tries may reach the master more than once (the master's job cache keeps one return), never zero times.
    for (const count of handled.values()) expect(count).toBeGreaterThanOrEqual(1)
    expect(onB.requests.stats().reconnects).toBeGreaterThanOrEqual(1)

    // minion-b's subscriptions came back on its new server: targeted and broadcast publishes reach it again.
    await until(() => onB.publishes.stats().reconnects >= 1, 'minion-b to reconnect to A or C')
    await publisher.publish('after', { topics: ['minion-b'] })
    await publisher.publish('all')
    await until(() => loads[0]!.includes('all') && loads[1]!.includes('all'), 'the broadcast after the failover')
    expect(loads[0]).toEqual(['before', 'after', 'all'])
    expect(loads[1]).toEqual(['all'])
  })

  it('a leaf node: minions at the site server, the master at the hub; requests and targeted publishes cross the leaf link', async () => {
    const leafPort = await freeLoopbackPort()
    const hub = track(await NatsServerProcess.start({ name: 'hub', leafPort }))
    const site = track(await NatsServerProcess.start({ name: 'site', leafRemotes: [`nats-leaf://127.0.0.1:${leafPort}`] }))
    await Promise.all([hub.waitForLinks('leafnodes', 1), site.waitForLinks('leafnodes', 1)])
    const atHub = natsTransport({ servers: [hub.url], subjectPrefix: 'leaf' })
    const atSite = natsTransport({ servers: [site.url], subjectPrefix: 'leaf' })
    const requests = track(atHub.createRequestServer({ host: '127.0.0.1', port: 4506 }))
    requests.handle(async (request, context) => ({ echo: request, transport: context.transport }))
    await requests.start()
    const publisher = track(atHub.createPublishServer({ host: '127.0.0.1', port: 4505 }))
    const ids = subscribedIds(publisher)
    await publisher.start()
    const client = track(atSite.createRequestClient({ host: '127.0.0.1', port: 4506 }))
    const near = track(atSite.createPublishClient({ host: '127.0.0.1', port: 4505, id: 'site-minion' }))
    const other = track(atSite.createPublishClient({ host: '127.0.0.1', port: 4505, id: 'other-minion' }))
    const [nearLoads, otherLoads] = [collect(near), collect(other)]
    await Promise.all([client.start(), near.start(), other.start()])
    await until(() => ids.has('site-minion') && ids.has('other-minion'), 'the site minions to say hello through the leaf link')
    // The leaf link may take a moment to carry the hub's queue subscription: a try times out, the next gets through.
    expect(await client.send('from the site', { timeout: 2000, tries: 10 })).toEqual({ echo: 'from the site', transport: 'nats' })
    await publisher.publish('only the site minion', { topics: ['site-minion'] })
    await publisher.publish('everyone')
    await until(() => nearLoads.length === 2 && otherLoads.length === 1, 'the publishes to cross to the site')
    expect(nearLoads).toEqual(['only the site minion', 'everyone'])
    expect(otherLoads).toEqual(['everyone'])
  })
})
