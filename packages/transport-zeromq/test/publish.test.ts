import type { PublishClient, TransportEvent } from '@brine/transport'
import { deadline, portOf } from '@brine/testkit'
import { Recorder } from '@brine/transport-compliance'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { HOST, handOvers, take, track } from './helpers.js'

const transport = zeromqTransport()

async function publishServer(options: { hwm?: number } = {}) {
  const server = track(transport.createPublishServer({ host: HOST, port: 0, ...options }))
  const events = new Recorder(server)
  await server.start()
  return { server, events }
}

async function subscriber(port: number, options: { hwm?: number } = {}): Promise<PublishClient> {
  const client = track(transport.createPublishClient({ host: HOST, port, ...options }))
  await client.start()
  return client
}

const subscribedTo = (topic: string) => (event: TransportEvent) => event.type === 'peer-subscribe' && event.topic === topic

describe('zeromq publish', () => {
  it('serialises many concurrent publishes without EBUSY', async () => {
    const { server, events } = await publishServer({ hwm: 5000 })
    const client = await subscriber(portOf(server.address), { hwm: 5000 })
    await events.waitFor(subscribedTo('broadcast'), 'broadcast subscription')
    await deadline(Promise.all(Array.from({ length: 2000 }, (_, i) => server.publish(i))), 20_000, '2000 publishes')
    const loads = await take(client[Symbol.asyncIterator](), 2000, '2000 loads', 20_000)
    expect(loads).toEqual(Array.from({ length: 2000 }, (_, i) => i))
    expect(server.stats().queued).toBe(0)
  })

  it("hands a turn's publishes to one subscriber to its socket as one write (libzmq wakes two threads per segment)", async () => {
    const { server, events } = await publishServer()
    const port = portOf(server.address)
    const client = await subscriber(port)
    await events.waitFor(subscribedTo('broadcast'), 'broadcast subscription')
    const handed = await handOvers(port, async () => {
      for (let i = 0; i < 5; i++) void server.publish(i)
      expect(await take(client[Symbol.asyncIterator](), 5, '5 loads')).toEqual([0, 1, 2, 3, 4])
    })
    // Five messages of three parts each (topic frame, header, body), in one hand-over.
    expect(handed).toEqual([15])
  })

  it('hands a publish made in an immediate to its socket at once, before the next immediate (a job at N=1 waits on it)', async () => {
    const { server, events } = await publishServer()
    const port = portOf(server.address)
    const client = await subscriber(port)
    await events.waitFor(subscribedTo('broadcast'), 'broadcast subscription')
    const handed = await handOvers(port, async (live) => {
      // The master publishes in an immediate's continuation, once the job cache's batch has written the job record.
      const atNextImmediate = await new Promise<number>((resolve) => {
        setImmediate(() => {
          setImmediate(() => resolve(live.length))
          void (async () => {
            await null
            await server.publish('from an immediate')
          })()
        })
      })
      expect(atNextImmediate).toBe(1)
      expect(await take(client[Symbol.asyncIterator](), 1, 'the load')).toEqual(['from an immediate'])
    })
    expect(handed).toEqual([3])
  })
})
