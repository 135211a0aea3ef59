import { randomBytes } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { type RequestClientOptions, type RequestHandler, type RequestServerOptions } from '@brine/transport'
import { ClosedError, EnvelopeKind, TimeoutError, encodeEnvelope } from '@brine/core'
import { TcpRequestClient, TcpRequestServer, tcpTransport } from '../src/index.js'
import { Cleanup, deadline, portOf, until, watch } from './helpers.js'
import { sendRawFrames } from './raw.js'

const cleanup = new Cleanup()
afterEach(() => cleanup.run())

const fastReconnect = { initial: 10, max: 100, jitter: 0 }

async function startServer(handler: RequestHandler, options: Partial<RequestServerOptions> = {}): Promise<TcpRequestServer> {
  const server = cleanup.add(new TcpRequestServer({ host: '127.0.0.1', port: 0, ...options }))
  server.handle(handler)
  await server.start()
  return server
}

async function startClient(server: { address: string }, options: Partial<RequestClientOptions> = {}): Promise<TcpRequestClient> {
  const client = cleanup.add(new TcpRequestClient({ host: '127.0.0.1', port: portOf(server.address), timeout: 5000, reconnect: fastReconnect, ...options }))
  await client.start()
  return client
}

describe('tcp request/reply', () => {
  it('makes a round trip and tells the handler who asked', async () => {
    const contexts: unknown[] = []
    const server = await startServer(async (request, context) => {
      contexts.push(context)
      return { echo: request }
    })
    const events = watch(server)
    expect(server.address).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/)
    expect(portOf(server.address)).toBeGreaterThan(0)
    await events.next('listening', 'listening event', (event) => event.address === server.address)
    const client = await startClient(server)
    expect(await deadline(client.send({ fun: 'test.ping' }), 5000, 'round trip')).toEqual({ echo: { fun: 'test.ping' } })
    expect(contexts).toEqual([
      { peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/), transport: 'tcp', address: '127.0.0.1', authenticated: expect.any(Function) },
    ])
    await events.next('peer-connect', 'server peer-connect')
    expect(server.stats().peers).toBe(1)
    expect(client.stats()).toMatchObject({ peers: 1, inFlight: 0 })
  })

  it('is created through tcpTransport()', () => {
    const transport = tcpTransport()
    expect(transport.name).toBe('tcp')
    const client = transport.createRequestClient({ host: '127.0.0.1', port: 1 })
    expect(client).toBeInstanceOf(TcpRequestClient)
    expect(client.address).toBe('tcp://127.0.0.1:1')
  })

  it('skips an oversized incoming frame and keeps the connection', async () => {
    const server = await startServer(async (request) => request, { maxFrameBytes: 1024 })
    const events = watch(server)
    const client = await startClient(server)
    await expect(client.send('x'.repeat(4096), { timeout: 200 })).rejects.toBeInstanceOf(TimeoutError)
    const drop = await events.next('frame-drop', 'frame-drop for the oversized request')
    expect(drop.reason).toMatch(/exceeds max_frame_bytes \(1024\)/)
    expect(drop.size).toBeGreaterThan(4096)
    expect(await client.send('small')).toBe('small')
    expect(server.stats()).toMatchObject({ framesDropped: 1, peers: 1 })
    expect(events.seen.filter((event) => event.type === 'peer-disconnect')).toEqual([])
  })

  it("serves a garbage-sending connection's good requests and discards replies once it has gone", async () => {
    let answer!: (value: unknown) => void
    const server = await startServer((request) => (request === 'fine' ? new Promise((resolve) => (answer = resolve)) : Promise.resolve(request)))
    const events = watch(server)
    const target = { host: '127.0.0.1', port: portOf(server.address) }
    await sendRawFrames(target, [randomBytes(32), encodeEnvelope({ kind: EnvelopeKind.Request, id: 7, body: 'fine' })])
    await events.next('frame-drop', 'frame-drop for the random body')
    await events.next('peer-disconnect', 'raw peer to leave')
    await until(() => server.stats().inFlight === 1, 'the good request to reach the handler')
    answer('too late')
    await until(() => server.stats().inFlight === 0, 'the handler to finish')
    expect(server.stats().peers).toBe(0)
    const client = await startClient(server)
    expect(await client.send('next')).toBe('next')
  })

  it('survives a raw stream of random bytes', async () => {
    const server = await startServer(async (request) => request, { maxFrameBytes: 1024 * 1024 })
    const events = watch(server)
    const { connect } = await import('node:net')
    const socket = connect({ host: '127.0.0.1', port: portOf(server.address) })
    socket.on('error', () => {})
    // A leading 0xff declares a frame far over the limit; the rest is noise skipped as it streams.
    const bytes = Buffer.concat([Buffer.from([0xff]), randomBytes(256 * 1024)])
    await new Promise<void>((resolve) => socket.end(bytes, () => resolve()))
    const drop = await events.next('frame-drop', 'frame-drop for the random stream')
    expect(drop.reason).toContain('exceeds max_frame_bytes')
    socket.destroy()
    const client = await startClient(server)
    expect(await client.send('still alive')).toBe('still alive')
  })

  it('queues requests while disconnected and reconnects after a server restart', async () => {
    const handler: RequestHandler = async (request) => ({ served: request })
    const first = await startServer(handler)
    const port = portOf(first.address)
    const client = await startClient(first)
    const events = watch(client)
    expect(await client.send(1)).toEqual({ served: 1 })
    await events.next('peer-connect', 'first connect')
    await first.close()
    await events.next('peer-disconnect', 'client to notice the server went away')
    const queued = client.send(2)
    await events.next('reconnect-attempt', 'a reconnect attempt')
    expect(client.stats().queued).toBe(1)
    const second = await startServer(handler, { port })
    expect(second.address).toBe(first.address)
    expect(await deadline(queued, 5000, 'the queued request to be answered after the restart')).toEqual({ served: 2 })
    const connects = events.seen.filter((event) => event.type === 'peer-connect')
    expect(connects).toHaveLength(2)
    expect(client.stats().reconnects).toBe(1)
    expect(await client.send(3)).toEqual({ served: 3 })
  })

  it('releases the port when closed while still binding', async () => {
    const probe = await startServer(async () => null)
    const port = portOf(probe.address)
    await probe.close()
    const server = new TcpRequestServer({ host: '127.0.0.1', port })
    server.handle(async () => null)
    const starting = server.start()
    const closing = server.close()
    await expect(starting).rejects.toBeInstanceOf(ClosedError)
    await deadline(closing, 5000, 'close during bind')
    const again = await startServer(async () => 'rebound', { port })
    expect(portOf(again.address)).toBe(port)
  })
})
