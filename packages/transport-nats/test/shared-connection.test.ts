import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NatsServerProcess, deadline, freeLoopbackPort } from '@brine/testkit'
import type { TransportEvent } from '@brine/transport'
import type { WireValue } from '@brine/core'
import { natsTransport } from '../src/index.js'

const WAIT_MS = 30_000
let server: NatsServerProcess
let monitorPort: number

beforeAll(async () => {
  monitorPort = await freeLoopbackPort()
  server = await NatsServerProcess.start({ config: `http: "127.0.0.1:${monitorPort}"` })
})
afterAll(async () => {
  await server?.close()
})

/** The connections nats-server holds now, by the name each client gave. */
async function connectionNames(): Promise<string[]> {
  const response = await fetch(`http://127.0.0.1:${monitorPort}/connz?limit=1000`)
  const body = (await response.json()) as { connections?: Array<{ name?: string }> }
  return (body.connections ?? []).map((connection) => connection.name ?? '')
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 20))
    })(),
    WAIT_MS,
    what,
  )
}

function heardIds(events: AsyncIterable<TransportEvent>): Set<string> {
  const ids = new Set<string>()
  void (async () => {
    for await (const event of events) if (event.type === 'peer-subscribe' && event.topic !== 'broadcast') ids.add(event.topic)
  })()
  return ids
}

describe('NATS clients sharing a connection scope', () => {
  it("a minion's publish and request clients in one scope hold one connection; each works, and leaving drops only its own subscriptions", async () => {
    const transport = natsTransport({ servers: [server.url], subjectPrefix: 'shared' })
    const requests = transport.createRequestServer({ host: '127.0.0.1', port: 4506 })
    requests.handle(async (request) => `ok ${String(request)}`)
    const publisher = transport.createPublishServer({ host: '127.0.0.1', port: 4505 })
    const ids = heardIds(publisher.events())
    const scope = {}
    const subscriber = transport.createPublishClient({ host: '127.0.0.1', port: 4505, id: 'minion-a', connectionScope: scope })
    const client = transport.createRequestClient({ host: '127.0.0.1', port: 4506, connectionScope: scope, timeout: 10_000 })
    const other = transport.createRequestClient({ host: '127.0.0.1', port: 4506, timeout: 10_000 })
    const loads: WireValue[] = []
    try {
      await requests.start()
      await publisher.start()
      await subscriber.start()
      await client.start()
      await other.start()
      void (async () => {
        for await (const load of subscriber) loads.push(load)
      })()
      await until(() => ids.has('minion-a'), 'minion-a to say hello')
      expect(await client.send('one')).toBe('ok one')
      expect(await other.send('two')).toBe('ok two')
      // The master's two servers, the unscoped client, and one connection for the scope's two clients.
      const names = await connectionNames()
      expect(names.filter((name) => name.startsWith('brine publish client') || name.startsWith('brine request client'))).toHaveLength(2)
      expect(names).toHaveLength(4)

      await publisher.publish('to a', { topics: ['minion-a'] })
      await until(() => loads.includes('to a'), 'the targeted publish')
      await subscriber.close()
      // The scope's connection outlives the publish client, which no longer receives anything on it.
      expect(await client.send('three')).toBe('ok three')
      await publisher.publish('after close')
      await publisher.publish('after close', { topics: ['minion-a'] })
      expect(await client.send('four')).toBe('ok four')
      expect(loads).toEqual(['to a'])
      expect(await connectionNames()).toHaveLength(4)

      await client.close()
      await until(async () => (await connectionNames()).length === 3, 'the scope connection to close with its last client')
    } finally {
      for (const endpoint of [other, client, subscriber, publisher, requests]) await endpoint.close()
    }
  })

  it('clients of two scopes, or of none, hold a connection each', async () => {
    const transport = natsTransport({ servers: [server.url], subjectPrefix: 'apart' })
    const requests = transport.createRequestServer({ host: '127.0.0.1', port: 4506 })
    requests.handle(async (request) => request)
    const clients = [{}, {}, undefined].map((scope) =>
      transport.createRequestClient({ host: '127.0.0.1', port: 4506, timeout: 10_000, ...(scope === undefined ? {} : { connectionScope: scope }) }),
    )
    try {
      await requests.start()
      for (const client of clients) await client.start()
      for (const [index, client] of clients.entries()) expect(await client.send(index)).toBe(index)
      expect((await connectionNames()).filter((name) => name.startsWith('brine request client'))).toHaveLength(3)
    } finally {
      for (const endpoint of [...clients, requests]) await endpoint.close()
    }
  })
})
