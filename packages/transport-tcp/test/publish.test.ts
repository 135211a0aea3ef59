import { afterEach, describe, expect, it } from 'vitest'
import { ClosedError, FrameTooLargeError, InvalidOperationError, type PublishClientOptions, type PublishServerOptions } from '@brine/transport'
import { TcpPublishClient, TcpPublishServer, sendRawFrames } from '../src/index.js'
import { Cleanup, RawPeer, deadline, portOf, until, watch, type EventLog } from './helpers.js'

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
  it('broadcasts to every subscriber', async () => {
    const { server, events } = await startServer()
    const subscribers = [await subscriber(server, events, { id: 'a' }), await subscriber(server, events, { id: 'b' }), await subscriber(server, events)]
    expect(server.stats().peers).toBe(3)
    await server.publish({ fun: 'test.ping' })
    for (const [index, { loads }] of subscribers.entries()) {
      expect(await nextLoad(loads, `broadcast at subscriber ${index}`)).toEqual({ fun: 'test.ping' })
    }
  })

  it('announces broadcast and the id on each hello', async () => {
    const { server, events } = await startServer()
    await subscriber(server, events, { id: 'minion-1' })
    const subscribes = events.seen.filter((event) => event.type === 'peer-subscribe')
    expect(subscribes.map((event) => (event as { topic: string }).topic)).toEqual(['broadcast', 'minion-1'])
  })

  it('sends a targeted publish only to the ids named', async () => {
    const { server, events } = await startServer()
    const a = await subscriber(server, events, { id: 'a' })
    const b = await subscriber(server, events, { id: 'b' })
    const c = await subscriber(server, events, { id: 'c' })
    const anonymous = await subscriber(server, events)
    await server.publish('for a and c', { topics: ['a', 'c', 'nobody'] })
    await server.publish('everyone')
    expect(await nextLoad(a.loads, 'targeted load at a')).toBe('for a and c')
    expect(await nextLoad(c.loads, 'targeted load at c')).toBe('for a and c')
    expect(await nextLoad(b.loads, 'broadcast at b')).toBe('everyone')
    expect(await nextLoad(anonymous.loads, 'broadcast at the anonymous subscriber')).toBe('everyone')
    expect(await nextLoad(a.loads, 'broadcast at a')).toBe('everyone')
  })

  it('re-announces when subscribe(id) is called after connecting', async () => {
    const { server, events } = await startServer()
    const { client, loads } = await subscriber(server, events)
    const from = events.seen.length
    client.subscribe('late-id')
    await events.next('peer-subscribe', 'subscription to late-id', (event) => event.topic === 'late-id', from)
    await server.publish('targeted', { topics: ['late-id'] })
    expect(await nextLoad(loads, 'targeted load after subscribe()')).toBe('targeted')
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

  it('refuses an oversized publish before writing anything', async () => {
    const { server, events } = await startServer({ maxFrameBytes: 1024 })
    const { loads } = await subscriber(server, events)
    await expect(server.publish('x'.repeat(2048))).rejects.toBeInstanceOf(FrameTooLargeError)
    await server.publish('small')
    expect(await nextLoad(loads, 'the small publish')).toBe('small')
  })

  it('drops an oversized incoming publish at the client and keeps the link', async () => {
    const { server, events } = await startServer()
    const { client, loads } = await subscriber(server, events, { maxFrameBytes: 1024 })
    const clientEvents = watch(client)
    await server.publish('x'.repeat(4096))
    await server.publish('small')
    expect(await nextLoad(loads, 'the publish after the oversized one')).toBe('small')
    const drop = await clientEvents.next('frame-drop', 'client frame-drop')
    expect(drop.reason).toContain('exceeds max_frame_bytes (1024)')
    expect(client.stats().framesDropped).toBe(1)
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

  it('drops the newest loads when the consumer falls behind', async () => {
    const { server, events } = await startServer()
    const { client, loads } = await subscriber(server, events, { hwm: 2 })
    for (let i = 0; i < 5; i++) await server.publish(i)
    await until(() => client.stats().dropped === 3, 'three loads dropped at the client')
    expect(client.stats().queued).toBe(2)
    expect([await nextLoad(loads, 'load 0'), await nextLoad(loads, 'load 1')]).toEqual([0, 1])
  })

  it('has a single consumer', async () => {
    const { server, events } = await startServer()
    const { client } = await subscriber(server, events)
    expect(() => client[Symbol.asyncIterator]()).toThrow(InvalidOperationError)
  })

  it('reconnects and re-subscribes after a server restart', async () => {
    const first = await startServer()
    const port = portOf(first.server.address)
    const { client, loads } = await subscriber(first.server, first.events, { id: 'minion' })
    const clientEvents = watch(client)
    await clientEvents.next('peer-connect', 'first connect')
    await first.server.close()
    await clientEvents.next('peer-disconnect', 'client to notice the server went away')
    const second = await startServer({ port })
    await second.events.next('peer-subscribe', 're-subscription to minion', (event) => event.topic === 'minion')
    await clientEvents.next('peer-connect', 'reconnect', undefined, clientEvents.seen.findIndex((event) => event.type === 'peer-disconnect'))
    expect(client.stats()).toMatchObject({ reconnects: 1, peers: 1 })
    await second.server.publish('after restart', { topics: ['minion'] })
    expect(await nextLoad(loads, 'a publish after the restart')).toBe('after restart')
  })

  it('closes idempotently, ends the iterator and frees the port', async () => {
    const { server, events } = await startServer()
    const port = portOf(server.address)
    const { client, loads } = await subscriber(server, events)
    const waiting = loads.next()
    await Promise.all([client.close(), client.close()])
    expect(await deadline(waiting, 5000, 'the iterator to end')).toEqual({ value: undefined, done: true })
    await deadline(client.closed, 5000, 'client closed promise')
    await Promise.all([server.close(), server.close()])
    await expect(server.publish('late')).rejects.toBeInstanceOf(ClosedError)
    const again = await startServer({ port })
    expect(portOf(again.server.address)).toBe(port)
  })
})
