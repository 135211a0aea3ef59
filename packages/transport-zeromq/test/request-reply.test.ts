import { ClosedError, FrameTooLargeError, RemoteError, TimeoutError, TransportError, type RequestHandler } from '@brine/transport'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { EventLog, HOST, deadline, portOf, track } from './helpers.js'

const transport = zeromqTransport()

async function serve(handler: RequestHandler, options: { maxFrameBytes?: number } = {}) {
  const server = track(transport.createRequestServer({ host: HOST, port: 0, ...options }))
  server.handle(handler)
  await server.start()
  return server
}

async function connect(port: number, options: { timeout?: number; tries?: number; hwm?: number; maxFrameBytes?: number } = {}) {
  const client = track(transport.createRequestClient({ host: HOST, port, ...options }))
  await client.start()
  return client
}

describe('zeromq request/reply', () => {
  it('makes a round trip and tells the handler who asked', async () => {
    const contexts: Array<{ peer: string; transport: string }> = []
    const server = await serve(async (request, context) => {
      contexts.push(context)
      return { echo: request }
    })
    expect(server.address).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/)
    const client = await connect(portOf(server.address))
    const reply = await deadline(client.send({ fun: 'test.ping', arg: [1, 'two'] }), 10_000, 'the echo reply')
    expect(reply).toEqual({ echo: { fun: 'test.ping', arg: [1, 'two'] } })
    expect(contexts[0]?.transport).toBe('zeromq')
    expect(contexts[0]?.peer).toMatch(/^[0-9a-f]+$/)
  })

  it('routes 200 concurrent requests answered out of order to the right callers', async () => {
    const gates: Array<() => void> = []
    const server = await serve(
      (request) =>
        new Promise((resolve) => {
          gates.push(() => resolve({ answer: request }))
        }),
    )
    const client = await connect(portOf(server.address))
    const replies = Array.from({ length: 200 }, (_, i) => client.send(i, { timeout: 30_000 }))
    await deadline(
      (async () => {
        while (gates.length < 200) await new Promise((resolve) => setTimeout(resolve, 10))
      })(),
      20_000,
      'all 200 requests to reach the handler',
    )
    expect(server.stats().inFlight).toBe(200)
    expect(client.stats().inFlight).toBe(200)
    // Answer in reverse order.
    for (const release of [...gates].reverse()) release()
    const results = await deadline(Promise.all(replies), 20_000, '200 replies')
    expect(results).toEqual(Array.from({ length: 200 }, (_, i) => ({ answer: i })))
    expect(client.stats().inFlight).toBe(0)
  })

  it('re-sends on each timeout and rejects with TimeoutError after the last try', async () => {
    let calls = 0
    const server = await serve(() => {
      calls++
      return new Promise(() => {})
    })
    const client = await connect(portOf(server.address))
    const error = await client.send('slow', { timeout: 150, tries: 3 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TimeoutError)
    expect(error).toMatchObject({ address: client.address, timeout: 150, tries: 3 })
    await deadline(
      (async () => {
        while (calls < 3) await new Promise((resolve) => setTimeout(resolve, 10))
      })(),
      5_000,
      'three handler calls',
    )
    expect(calls).toBe(3)
  })

  it('completes a request with a late reply to an earlier try', async () => {
    let calls = 0
    const server = await serve(async (request) => {
      calls++
      if (calls === 1) await new Promise((resolve) => setTimeout(resolve, 300))
      else await new Promise(() => {})
      return request
    })
    const client = await connect(portOf(server.address))
    await expect(client.send('late', { timeout: 200, tries: 3 })).resolves.toBe('late')
  })

  it('turns a throwing handler into RemoteError and keeps serving', async () => {
    const server = await serve(async (request) => {
      if (request === 'boom') throw new RangeError('no such function')
      return 'fine'
    })
    const events = new EventLog(server)
    const client = await connect(portOf(server.address))
    const error = await client.send('boom').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RemoteError)
    expect((error as RemoteError).remoteName).toBe('RangeError')
    expect((error as RemoteError).message).toContain('no such function')
    await expect(client.send('again')).resolves.toBe('fine')
    const event = await events.waitFor((e) => e.type === 'handler-error', 'handler-error event')
    expect(event).toMatchObject({ error: 'no such function' })
  })

  it('refuses an oversized request at once and answers an oversized reply with an error', async () => {
    const server = await serve(async () => 'x'.repeat(5000), { maxFrameBytes: 1024 })
    const client = await connect(portOf(server.address), { maxFrameBytes: 1024 })
    await expect(client.send('y'.repeat(5000))).rejects.toBeInstanceOf(FrameTooLargeError)
    const error = await client.send('small').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RemoteError)
    expect((error as RemoteError).remoteName).toBe('FrameTooLargeError')
  })

  it('drops a reply larger than the client allows and lets the request time out', async () => {
    const server = await serve(async () => 'z'.repeat(4000))
    const client = await connect(portOf(server.address), { maxFrameBytes: 1024 })
    const events = new EventLog(client)
    await expect(client.send('hi', { timeout: 500 })).rejects.toBeInstanceOf(TimeoutError)
    const drop = await events.waitFor((e) => e.type === 'frame-drop', 'frame-drop for the oversized reply')
    expect(drop).toMatchObject({ reason: expect.stringContaining('exceeds max_frame_bytes') })
    expect(client.stats().framesDropped).toBe(1)
  })

  it('refuses requests beyond hwm in flight', async () => {
    const server = await serve(() => new Promise(() => {}))
    const client = await connect(portOf(server.address), { hwm: 2 })
    const first = client.send(1, { timeout: 30_000 })
    const second = client.send(2, { timeout: 30_000 })
    const error = await client.send(3).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TransportError)
    expect((error as Error).message).toContain('in flight')
    await client.close()
    await expect(first).rejects.toBeInstanceOf(ClosedError)
    await expect(second).rejects.toBeInstanceOf(ClosedError)
  })

  it('does not block on a server that is down: tries beyond the queue are dropped and counted', async () => {
    const server = track(transport.createRequestServer({ host: HOST, port: 0 }))
    server.handle(async () => null)
    await server.start()
    const port = portOf(server.address)
    await server.close() // nothing listens on the port now
    const client = await connect(port, { hwm: 1 })
    const error = await client.send('lost', { timeout: 100, tries: 3 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TimeoutError)
    // One try waits in libzmq's queue (hwm 1); the two re-sends find it full and are dropped.
    expect(client.stats().dropped).toBe(2)
    expect(client.stats().queued).toBe(0)
  })

  it('aborts a request through its AbortSignal', async () => {
    const server = await serve(() => new Promise(() => {}))
    const client = await connect(portOf(server.address))
    const controller = new AbortController()
    const pending = client.send('wait', { signal: controller.signal, timeout: 30_000 })
    controller.abort(new Error('caller gave up'))
    await expect(pending).rejects.toThrow('caller gave up')
    expect(client.stats().inFlight).toBe(0)
    await expect(client.send('x', { signal: AbortSignal.abort() })).rejects.toThrow()
  })
})
