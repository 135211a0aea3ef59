import { type RequestHandler } from '@brine/transport'
import { TimeoutError } from '@brine/core'
import { deadline, portOf } from '@brine/testkit'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { Recorder } from '@brine/transport-compliance'
import { topicForId } from '../src/socket-util.js'
import { HOST, handOvers, take, track } from './helpers.js'

const transport = zeromqTransport()

async function serve(handler: RequestHandler) {
  const server = track(transport.createRequestServer({ host: HOST, port: 0 }))
  server.handle(handler)
  await server.start()
  return server
}

async function connect(port: number, options: { hwm?: number; reconnect?: { initial: number } } = {}) {
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

  it('does not block on a server that is down: a request waits once for the link, whatever its tries, and leaves with its timeout', async () => {
    const server = track(transport.createRequestServer({ host: HOST, port: 0 }))
    server.handle(async () => null)
    await server.start()
    const port = portOf(server.address)
    await server.close() // nothing listens on the port now
    const client = await connect(port, { hwm: 1, reconnect: { initial: 1000 } })
    const pending = client.send('lost', { timeout: 100, tries: 3 }).catch((e: unknown) => e)
    // Held until the link is up: one request, not one per try.
    expect(client.stats().queued).toBe(1)
    expect(await pending).toBeInstanceOf(TimeoutError)
    // Its re-sends found it already waiting: nothing was sent twice, nothing dropped, nothing left behind.
    expect(client.stats().dropped).toBe(0)
    expect(client.stats().queued).toBe(0)
  })

  it('makes a round trip and gets a publish over IPv6 loopback', async () => {
    const server = track(transport.createRequestServer({ host: '::1', port: 0 }))
    server.handle(async (request) => ({ over: request }))
    await server.start()
    expect(server.address).toMatch(/^tcp:\/\/\[::1\]:\d+$/)
    const client = track(transport.createRequestClient({ host: '::1', port: portOf(server.address) }))
    await client.start()
    expect(await deadline(client.send('v6'), 10_000, 'the reply over IPv6')).toEqual({ over: 'v6' })

    const publisher = track(transport.createPublishServer({ host: '::1', port: 0 }))
    const events = new Recorder(publisher)
    await publisher.start()
    const subscriber = track(transport.createPublishClient({ host: '::1', port: portOf(publisher.address), id: 'minion-6' }))
    await subscriber.start()
    await events.waitFor((event) => event.type === 'peer-subscribe' && event.topic === topicForId('minion-6'), 'the subscription over IPv6')
    await publisher.publish('to six', { topics: ['minion-6'] })
    expect(await take(subscriber[Symbol.asyncIterator](), 1, 'the load over IPv6')).toEqual(['to six'])
  })

  it("hands the replies of one turn to a peer's socket as one write (libzmq wakes two threads per segment)", async () => {
    // The handler holds numbers until three wait, then answers all three in the same turn.
    const waiting: Array<() => void> = []
    const server = await serve(async (request) => {
      if (request === 'hello') return 'hello'
      await new Promise<void>((resolve) => {
        waiting.push(resolve)
        if (waiting.length === 3) for (const release of waiting) release()
      })
      return { echo: request }
    })
    const port = portOf(server.address)
    const client = await connect(port)
    // A round trip first, so the handshake's writes are over before counting.
    expect(await deadline(client.send('hello'), 10_000, 'the hello reply')).toBe('hello')
    const handed = await handOvers(port, async () => {
      const replies = await deadline(Promise.all([1, 2, 3].map((n) => client.send(n))), 10_000, 'three replies')
      expect(replies).toEqual([{ echo: 1 }, { echo: 2 }, { echo: 3 }])
    })
    // Three replies of two parts each (header, body), in one hand-over.
    expect(handed).toEqual([6])
  })

  it('hands a reply released in an immediate to the socket at once, before the next immediate', async () => {
    let release: (() => void) | undefined
    const server = await serve(async (request) => {
      if (request === 'hello') return 'hello'
      await new Promise<void>((resolve) => (release = resolve))
      return { echo: request }
    })
    const port = portOf(server.address)
    const client = await connect(port)
    expect(await deadline(client.send('hello'), 10_000, 'the hello reply')).toBe('hello')
    const handed = await handOvers(port, async (live) => {
      const reply = client.send(1)
      await deadline(
        (async () => {
          while (release === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
        })(),
        10_000,
        'the request in hand',
      )
      const atNextImmediate = await new Promise<number>((resolve) => {
        setImmediate(() => {
          setImmediate(() => resolve(live.length))
          release!()
        })
      })
      expect(atNextImmediate).toBe(1)
      expect(await deadline(reply, 10_000, 'the reply')).toEqual({ echo: 1 })
    })
    // One reply of two parts (header, body).
    expect(handed).toEqual([2])
  })
})
