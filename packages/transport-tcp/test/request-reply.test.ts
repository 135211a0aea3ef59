import { randomBytes } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import {
  AddressInUseError,
  ClosedError,
  FrameTooLargeError,
  InvalidOperationError,
  RemoteError,
  TimeoutError,
  TransportError,
  encode,
  encodeEnvelope,
  EnvelopeKind,
  type RequestClientOptions,
  type RequestHandler,
  type RequestServerOptions,
} from '@brine/transport'
import { TcpRequestClient, TcpRequestServer, sendRawFrames, tcpTransport } from '../src/index.js'
import { Cleanup, deadline, portOf, until, watch } from './helpers.js'

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
  const client = cleanup.add(
    new TcpRequestClient({ host: '127.0.0.1', port: portOf(server.address), timeout: 5000, reconnect: fastReconnect, ...options }),
  )
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
    expect(contexts).toEqual([{ peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/), transport: 'tcp' }])
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

  it('pairs 200 concurrent requests with replies given out of order', async () => {
    const waiting: Array<() => void> = []
    let allArrived!: () => void
    const arrived = new Promise<void>((resolve) => (allArrived = resolve))
    const server = await startServer(
      (request) =>
        new Promise((resolve) => {
          waiting.push(() => resolve({ n: (request as { n: number }).n * 2 }))
          if (waiting.length === 200) allArrived()
        }),
    )
    const client = await startClient(server)
    const replies = Array.from({ length: 200 }, (_, n) => client.send({ n }))
    await deadline(arrived, 5000, 'all 200 requests to reach the handler')
    expect(server.stats().inFlight).toBe(200)
    expect(client.stats().inFlight).toBe(200)
    for (const reply of waiting.reverse()) reply()
    expect(await deadline(Promise.all(replies), 5000, '200 replies')).toEqual(Array.from({ length: 200 }, (_, n) => ({ n: n * 2 })))
    expect(client.stats().inFlight).toBe(0)
  })

  it('times out after exactly `tries` attempts with a TimeoutError saying so', async () => {
    let calls = 0
    const server = await startServer(() => {
      calls++
      return new Promise(() => {})
    })
    const client = await startClient(server)
    const error = await client.send('hang', { timeout: 100, tries: 3 }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(TimeoutError)
    expect(error).toMatchObject({ address: client.address, timeout: 100, tries: 3 })
    expect((error as Error).message).toBe(`request to ${client.address} timed out after 100 ms (3 tries)`)
    await until(() => calls === 3, 'the third try to reach the handler')
    expect(calls).toBe(3)
    expect(client.stats().inFlight).toBe(0)
  })

  it('completes a request with a late reply to an earlier try', async () => {
    const first: Array<(value: unknown) => void> = []
    const server = await startServer(
      () =>
        new Promise((resolve) => {
          first.push(resolve)
          // The second try arrives: answer the first one, which carries the same id.
          if (first.length === 2) first[0]!('from the first try')
        }),
    )
    const client = await startClient(server)
    expect(await client.send('slow', { timeout: 150, tries: 2 })).toBe('from the first try')
  })

  it('rejects with a RemoteError when the handler throws, and keeps serving', async () => {
    const server = await startServer(async (request) => {
      if (request === 'fail') throw new RangeError('no such minion')
      return 'ok'
    })
    const events = watch(server)
    const client = await startClient(server)
    const error = await client.send('fail').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(RemoteError)
    expect(error).toMatchObject({ remoteName: 'RangeError' })
    expect((error as Error).message).toContain('no such minion')
    const event = await events.next('handler-error', 'handler-error event')
    expect(event.error).toContain('no such minion')
    expect(await client.send('again')).toBe('ok')
    expect(server.stats().inFlight).toBe(0)
  })

  it('answers with an error when the reply is too large to send', async () => {
    const server = await startServer(async () => 'x'.repeat(4096), { maxFrameBytes: 1024 })
    const client = await startClient(server)
    const error = await client.send('big reply please').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(RemoteError)
    expect(error).toMatchObject({ remoteName: 'FrameTooLargeError' })
  })

  it('aborts one request through its AbortSignal', async () => {
    const server = await startServer((request) => (request === 'hang' ? new Promise(() => {}) : Promise.resolve('ok')))
    const client = await startClient(server)
    const controller = new AbortController()
    const hanging = client.send('hang', { signal: controller.signal })
    const other = client.send('quick')
    controller.abort(new Error('caller gave up'))
    await expect(hanging).rejects.toThrow('caller gave up')
    expect(await other).toBe('ok')
    expect(client.stats().inFlight).toBe(0)
    await expect(client.send('x', { signal: controller.signal })).rejects.toThrow('caller gave up')
  })

  it('refuses more than hwm requests in flight', async () => {
    const server = await startServer(() => new Promise(() => {}))
    const client = await startClient(server, { hwm: 2 })
    const held = [client.send('a'), client.send('b')]
    for (const promise of held) promise.catch(() => {})
    const error = await client.send('c').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(TransportError)
    expect((error as Error).message).toMatch(/in flight.*hwm 2/)
    expect(client.stats().inFlight).toBe(2)
  })

  it('refuses an oversized request before sending anything', async () => {
    let calls = 0
    const server = await startServer(async () => ++calls)
    const client = await startClient(server, { maxFrameBytes: 1024 })
    const error = await client.send('x'.repeat(2048)).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(FrameTooLargeError)
    expect(error).toMatchObject({ limit: 1024 })
    expect(client.stats().inFlight).toBe(0)
    expect(await client.send('small')).toBe(1)
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

  it('carries a 16 MiB payload both ways', async () => {
    const server = await startServer(async (request) => request)
    const client = await startClient(server)
    const payload = randomBytes(16 * 1024 * 1024)
    const reply = (await deadline(client.send(payload), 20_000, '16 MiB round trip')) as Uint8Array
    expect(Buffer.from(reply).equals(payload)).toBe(true)
  })

  it('drops garbage frames and keeps serving everyone', async () => {
    const server = await startServer(async (request) => request)
    const events = watch(server)
    const target = { host: '127.0.0.1', port: portOf(server.address) }
    const garbage = [
      randomBytes(64),
      new Uint8Array([0xc1]),
      encode({ not: 'an envelope' }),
      encode([0, -1, 'negative id']),
      encodeEnvelope({ kind: EnvelopeKind.Reply, id: 1, body: 'a reply sent to a server' }),
      new Uint8Array(0),
    ]
    await deadline(sendRawFrames(target, garbage), 5000, 'raw frames to be sent')
    await until(() => server.stats().framesDropped === garbage.length, `${garbage.length} frame drops`)
    expect(events.seen.filter((event) => event.type === 'frame-drop')).toHaveLength(garbage.length)
    const client = await startClient(server)
    expect(await client.send('still alive')).toBe('still alive')
  })

  it("serves a garbage-sending connection's good requests and discards replies once it has gone", async () => {
    let answer!: (value: unknown) => void
    const server = await startServer((request) =>
      request === 'fine' ? new Promise((resolve) => (answer = resolve)) : Promise.resolve(request),
    )
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

  it('names host:port when the address is in use', async () => {
    const server = await startServer(async () => null)
    const port = portOf(server.address)
    const clash = cleanup.add(new TcpRequestServer({ host: '127.0.0.1', port }))
    clash.handle(async () => null)
    const error = await clash.start().catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(AddressInUseError)
    expect((error as AddressInUseError).address).toBe(`127.0.0.1:${port}`)
  })

  it('takes one handler, before start', async () => {
    const server = cleanup.add(new TcpRequestServer({ host: '127.0.0.1', port: 0 }))
    await expect(server.start()).rejects.toBeInstanceOf(InvalidOperationError)
    server.handle(async () => null)
    expect(() => server.handle(async () => null)).toThrow(InvalidOperationError)
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

  it('closes idempotently, rejecting pending and later sends, and frees the port', async () => {
    const server = await startServer(() => new Promise(() => {}))
    const port = portOf(server.address)
    const client = await startClient(server)
    const clientEvents = watch(client)
    await clientEvents.next('peer-connect', 'client connect')
    const pending = client.send('never answered')
    await until(() => server.stats().inFlight === 1, 'the request to reach the handler')
    const closing = [client.close(), client.close()]
    await expect(pending).rejects.toBeInstanceOf(ClosedError)
    await deadline(Promise.all(closing), 5000, 'client close')
    await deadline(client.closed, 5000, 'client closed promise')
    await expect(client.send('late')).rejects.toBeInstanceOf(ClosedError)
    await deadline(Promise.all([server.close(), server.close()]), 5000, 'server close')
    await deadline(server.closed, 5000, 'server closed promise')
    // The event streams end once closed.
    const ended: unknown[] = []
    for await (const event of server.events()) ended.push(event)
    expect(ended.length).toBeGreaterThan(0)
    const again = await startServer(async () => 'rebound', { port })
    expect(portOf(again.address)).toBe(port)
    await expect(server.start()).rejects.toBeInstanceOf(ClosedError)
  })
})
