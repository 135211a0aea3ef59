import { FrameTooLargeError, type PublishClient } from '@brine/transport'
import { describe, expect, it } from 'vitest'
import { topicForId, zeromqTransport } from '../src/index.js'
import { EventLog, HOST, deadline, portOf, take, track, until } from './helpers.js'

const transport = zeromqTransport()

async function publishServer(options: { hwm?: number; maxFrameBytes?: number } = {}) {
  const server = track(transport.createPublishServer({ host: HOST, port: 0, ...options }))
  const events = new EventLog(server)
  await server.start()
  return { server, events }
}

async function subscriber(port: number, options: { id?: string; hwm?: number; maxFrameBytes?: number } = {}): Promise<PublishClient> {
  const client = track(transport.createPublishClient({ host: HOST, port, ...options }))
  await client.start()
  return client
}

const subscribedTo = (topic: string) => (event: { type: string; topic?: string }) => event.type === 'peer-subscribe' && event.topic === topic

describe('zeromq publish', () => {
  it('broadcasts to every subscriber', async () => {
    const { server, events } = await publishServer()
    const clients = await Promise.all([0, 1, 2].map(() => subscriber(portOf(server.address))))
    await until(() => events.seen.filter(subscribedTo('broadcast')).length === 3, 'three broadcast subscriptions')
    expect(server.stats().peers).toBe(3)
    await server.publish({ fun: 'test.ping', jid: '20240101000000000000' })
    for (const client of clients) {
      const [load] = await take(client[Symbol.asyncIterator](), 1, 'the broadcast load')
      expect(load).toEqual({ fun: 'test.ping', jid: '20240101000000000000' })
    }
  })

  it('delivers a targeted publish only to the named subscribers', async () => {
    const { server, events } = await publishServer()
    const port = portOf(server.address)
    const alpha = await subscriber(port, { id: 'alpha' })
    const beta = await subscriber(port)
    beta.subscribe('beta') // after start()
    await events.waitFor(subscribedTo(topicForId('alpha')), "alpha's topic")
    await events.waitFor(subscribedTo(topicForId('beta')), "beta's topic")
    await until(() => events.seen.filter(subscribedTo('broadcast')).length === 2, 'two broadcast subscriptions')
    await server.publish('for alpha', { topics: ['alpha'] })
    await server.publish('for everyone')
    expect(await take(alpha[Symbol.asyncIterator](), 2, 'alpha loads')).toEqual(['for alpha', 'for everyone'])
    expect(await take(beta[Symbol.asyncIterator](), 1, 'beta load')).toEqual(['for everyone'])
  })

  it('serialises many concurrent publishes without EBUSY', async () => {
    const { server, events } = await publishServer({ hwm: 5000 })
    const client = await subscriber(portOf(server.address), { hwm: 5000 })
    await events.waitFor(subscribedTo('broadcast'), 'broadcast subscription')
    await deadline(Promise.all(Array.from({ length: 2000 }, (_, i) => server.publish(i))), 20_000, '2000 publishes')
    const loads = await take(client[Symbol.asyncIterator](), 2000, '2000 loads', 20_000)
    expect(loads).toEqual(Array.from({ length: 2000 }, (_, i) => i))
    expect(server.stats().queued).toBe(0)
  })

  it('refuses an oversized publish before sending it', async () => {
    const { server } = await publishServer({ maxFrameBytes: 100 })
    await expect(server.publish('x'.repeat(200))).rejects.toBeInstanceOf(FrameTooLargeError)
  })

  it('drops a received load over max_frame_bytes and keeps the next one', async () => {
    const { server, events } = await publishServer()
    const client = await subscriber(portOf(server.address), { maxFrameBytes: 1024 })
    const clientEvents = new EventLog(client)
    await events.waitFor(subscribedTo('broadcast'), 'broadcast subscription')
    await server.publish('y'.repeat(4000))
    await server.publish('small')
    expect(await take(client[Symbol.asyncIterator](), 1, 'the small load')).toEqual(['small'])
    const drop = await clientEvents.waitFor((e) => e.type === 'frame-drop', 'frame-drop event')
    expect(drop).toMatchObject({ reason: expect.stringContaining('exceeds max_frame_bytes') })
    expect(client.stats().framesDropped).toBe(1)
  })

  it('drops the newest loads, counted, when the consumer stalls', async () => {
    const { server, events } = await publishServer()
    const client = await subscriber(portOf(server.address), { hwm: 5 })
    const clientEvents = new EventLog(client)
    await events.waitFor(subscribedTo('broadcast'), 'broadcast subscription')
    for (let i = 0; i < 50; i++) await server.publish(i)
    await until(() => client.stats().dropped + client.stats().queued === 50, 'all 50 loads queued or dropped')
    expect(client.stats().queued).toBe(5)
    expect(client.stats().dropped).toBe(45)
    expect(await take(client[Symbol.asyncIterator](), 5, 'the queued loads')).toEqual([0, 1, 2, 3, 4])
    expect(clientEvents.count('message-drop')).toBe(1)
  })
})
