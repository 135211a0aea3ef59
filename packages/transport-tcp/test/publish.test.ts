import { afterEach, describe, expect, it } from 'vitest'
import { type PublishClientOptions, type PublishServerOptions } from '@brine/transport'
import { InvalidOperationError } from '@brine/core'
import { TcpPublishClient, TcpPublishServer } from '../src/index.js'
import { Cleanup, RawPeer, deadline, portOf, until, watch, type EventLog } from './helpers.js'
import { sendRawFrames } from './raw.js'

const cleanup = new Cleanup()
const rawPeers: RawPeer[] = []
afterEach(async () => {
  await Promise.all(rawPeers.splice(0).map((peer) => peer.close()))
  await cleanup.run()
})

const fastReconnect = { initial: 10, max: 100, jitter: 0 }

async function startServer(options: Partial<PublishServerOptions> = {}): Promise<{ server: TcpPublishServer; events: EventLog }> {
  const server = cleanup.add(new TcpPublishServer({ host: '127.0.0.1', port: 0, ...options }))
  const events = watch(server)
  await server.start()
  return { server, events }
}

/** A started subscriber, returned once the server has seen its hello. */
async function subscriber(
  server: TcpPublishServer,
  serverEvents: EventLog,
  options: Partial<PublishClientOptions> = {},
): Promise<{ client: TcpPublishClient; loads: AsyncIterator<unknown> }> {
  const client = cleanup.add(new TcpPublishClient({ host: '127.0.0.1', port: portOf(server.address), reconnect: fastReconnect, ...options }))
  const from = serverEvents.seen.length
  await client.start()
  const topic = options.id ?? 'broadcast'
  await serverEvents.next('peer-subscribe', `subscription to ${topic}`, (event) => event.topic === topic, from)
  return { client, loads: client[Symbol.asyncIterator]() }
}

async function nextLoad(loads: AsyncIterator<unknown>, what: string): Promise<unknown> {
  const result = await deadline(loads.next(), 5000, what)
  expect(result.done).toBe(false)
  return result.value
}

function rawPeer(port: number, options?: { read?: boolean }): RawPeer {
  const peer = new RawPeer(port, options)
  rawPeers.push(peer)
  return peer
}

describe('tcp publish', () => {
  it('announces broadcast and the id on each hello', async () => {
    const { server, events } = await startServer()
    await subscriber(server, events, { id: 'minion-1' })
    const subscribes = events.seen.filter((event) => event.type === 'peer-subscribe')
    expect(subscribes.map((event) => (event as { topic: string }).topic)).toEqual(['broadcast', 'minion-1'])
  })

  it('gives nothing to a connection before its hello', async () => {
    const { server, events } = await startServer()
    const raw = rawPeer(portOf(server.address))
    await raw.connected
    await events.next('peer-connect', 'raw peer accepted')
    await server.publish('before hello')
    raw.send({ hello: 1, id: null })
    await events.next('peer-subscribe', 'raw peer hello')
    await server.publish('after hello')
    await until(() => raw.received.length > 0, 'a publish at the raw peer')
    expect(raw.received[0]).toBe('after hello')
  })

  it('drops what a subscriber sends besides hellos and keeps the connection', async () => {
    const { server, events } = await startServer()
    const raw = rawPeer(portOf(server.address))
    raw.send({ hello: 1, id: 'raw' })
    await events.next('peer-subscribe', 'raw hello', (event) => event.topic === 'raw')
    raw.send({ hello: 2 })
    raw.send([0, 1, 'a request on the publish port'])
    raw.socket.write(Buffer.from([0, 0, 0, 1, 0xc1]))
    await until(() => server.stats().framesDropped === 3, 'three frame drops')
    await server.publish('still subscribed', { topics: ['raw'] })
    await until(() => raw.received.length > 0, 'the targeted publish at the raw peer')
    expect(raw.received).toEqual(['still subscribed'])
    expect(server.stats().peers).toBe(1)
  })

  it('survives garbage frames from a raw connection', async () => {
    const { server, events } = await startServer()
    const { loads } = await subscriber(server, events, { id: 'a' })
    await sendRawFrames({ host: '127.0.0.1', port: portOf(server.address) }, [new Uint8Array([0x92, 0x01]), new Uint8Array(10).fill(0xff)])
    await until(() => server.stats().framesDropped === 2, 'two frame drops')
    await server.publish('alive')
    expect(await nextLoad(loads, 'a publish after the garbage')).toBe('alive')
  })

  it('drops publishes to a stalled subscriber at the high-water mark, and only to it', async () => {
    const hwm = 4
    const { server, events } = await startServer({ hwm })
    const stalled = rawPeer(portOf(server.address), { read: false })
    stalled.send({ hello: 1, id: 'stalled' })
    await events.next('peer-subscribe', 'stalled hello', (event) => event.topic === 'stalled')
    const healthy = await subscriber(server, events, { id: 'healthy', hwm: 1000 })
    const payload = 'p'.repeat(64 * 1024)
    for (let i = 0; i < 200; i++) await server.publish({ i, payload }, { topics: ['stalled'] })
    const stats = server.stats()
    expect(stats.dropped).toBeGreaterThan(0)
    expect(stats.queued).toBeLessThanOrEqual(hwm)
    expect(await events.next('message-drop', 'message-drop event')).toMatchObject({ peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/) })
    await server.publish('healthy gets through', { topics: ['healthy'] })
    expect(await nextLoad(healthy.loads, 'the healthy subscriber load')).toBe('healthy gets through')
  })

  it('has a single consumer', async () => {
    const { server, events } = await startServer()
    const { client } = await subscriber(server, events)
    expect(() => client[Symbol.asyncIterator]()).toThrow(InvalidOperationError)
  })
})
