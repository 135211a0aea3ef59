import { describe, expect } from 'vitest'
import { AddressInUseError, ClosedError, InvalidOperationError, TransportError, type WireValue } from '@brine/core'
import { canBind, deadline, deferred } from '@brine/testkit'
import { HOST, WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

export function closeTests(harness: Harness): void {
  describe('close', () => {
    closingEndpointCases(harness)
    closedPortCases(harness)
  })

  describe('lifecycle', () => {
    test('lifecycle: handle() once and before start(), start() once, send() only after start()', async () => {
      const transport = await harness.transport()
      const server = transport.createRequestServer({ host: HOST, port: 0 })
      await expect(server.start()).rejects.toBeInstanceOf(InvalidOperationError)
      server.handle(async () => 'ok')
      expect(() => server.handle(async () => 'again')).toThrow(InvalidOperationError)
      const started = await harness.adopt(server)
      await expect(server.start()).rejects.toBeInstanceOf(InvalidOperationError)
      const client = transport.createRequestClient({ host: HOST, port: started.port })
      try {
        await expect(client.send('too early')).rejects.toBeInstanceOf(InvalidOperationError)
        await client.start()
        await expect(client.start()).rejects.toBeInstanceOf(InvalidOperationError)
        expect(await client.send('now', { timeout: WAIT_MS })).toBe('ok')
      } finally {
        await client.close()
      }
    })
  })
}

/** Closing endpoints: idempotent, failing what was pending, ending iterators. */
function closingEndpointCases(harness: Harness): void {
  test('close: close is idempotent and resolves `closed`', async () => {
    const server = await harness.requestServer(async () => 'ok')
    const client = await harness.requestClient(server.port)
    const publisher = await harness.publishServer()
    const subscriber = await harness.subscriber(publisher.port, 'x')
    for (const { endpoint, recorder } of [client, subscriber, server, publisher]) {
      await Promise.all([endpoint.close(), endpoint.close()])
      await endpoint.close()
      await deadline(endpoint.closed, WAIT_MS, `${endpoint.address} closed promise`)
      // Its event stream ends, and it cannot start again.
      await deadline(recorder.ended, WAIT_MS, `${endpoint.address} event stream to end`)
      await expect(endpoint.start()).rejects.toBeInstanceOf(ClosedError)
    }
    await expect(publisher.endpoint.publish('late')).rejects.toBeInstanceOf(ClosedError)
  })

  test('close: pending and later sends reject with ClosedError', async () => {
    const reached = deferred()
    const server = await harness.requestServer(async () => {
      reached.resolve()
      return new Promise<WireValue>(() => {})
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    const pending = client.send('hang', { timeout: WAIT_MS }).catch((e: unknown) => e)
    await deadline(reached.promise, WAIT_MS, 'the request to reach the handler')
    await client.close()
    expect(await pending).toBeInstanceOf(ClosedError)
    await expect(client.send('after close')).rejects.toBeInstanceOf(ClosedError)
    expect(client.stats().inFlight).toBe(0)
  })

  test('close: a publish client iterator ends on close', async () => {
    const publisher = await harness.publishServer()
    const subscriber = await harness.subscriber(publisher.port, 'closer', { stalled: true })
    const ended = (async () => {
      const seen: WireValue[] = []
      for await (const load of subscriber.endpoint) seen.push(load)
      return seen
    })()
    await harness.waitForSubscribers(publisher, 1)
    await publisher.endpoint.publish('one')
    await subscriber.endpoint.close()
    const seen = await deadline(ended, WAIT_MS, 'the iterator to end after close')
    expect(seen.length).toBeLessThanOrEqual(1)
  })
}

/** Ports and starts around close: bound again at once, in use, never started. */
function closedPortCases(harness: Harness): void {
  test('close: a closed server port can be bound again at once', async () => {
    const server = await harness.requestServer(async () => 'ok')
    const publisher = await harness.publishServer()
    await harness.requestClient(server.port)
    await server.endpoint.close()
    await publisher.endpoint.close()
    expect(await canBind(server.port)).toBe(true)
    expect(await canBind(publisher.port)).toBe(true)
    // On a broker nothing was bound; what "bound again" means there: a new server on the same port serves at once.
    if (harness.setup.broker !== undefined) {
      const transport = await harness.transport()
      const again = transport.createRequestServer({ host: HOST, port: server.port })
      again.handle(async () => 'again')
      await harness.adopt(again)
      const { endpoint: client } = await harness.requestClient(server.port)
      expect(await client.send('who', { timeout: WAIT_MS })).toBe('again')
    }
  })

  test('close: binding a port in use raises AddressInUseError naming it', async () => {
    const broker = harness.setup.broker
    if (broker !== undefined) {
      // On a broker a second server on a port joins the first's queue group (that is how masters share a fleet);
      // a server that cannot start is one whose broker is unreachable, and the error names the broker's URL.
      const { transport, url } = broker.unreachable()
      const server = transport.createRequestServer({ host: HOST, port: 0 })
      server.handle(async () => 'never')
      const error = await server.start().catch((e: unknown) => e)
      await server.close()
      expect(error).toBeInstanceOf(TransportError)
      expect((error as Error).message).toContain(url.replace(/^[a-z]+:\/\//, ''))
      return
    }
    const first = await harness.requestServer(async () => 'ok')
    const transport = await harness.transport()
    const second = transport.createRequestServer({ host: HOST, port: first.port })
    second.handle(async () => 'never')
    const error = await second.start().catch((e: unknown) => e)
    await second.close()
    expect(error).toBeInstanceOf(AddressInUseError)
    expect((error as AddressInUseError).address).toBe(`${HOST}:${first.port}`)
    expect((error as Error).message).toContain(`${HOST}:${first.port}`)
  })

  test('close: endpoints never started close, and cannot start after', async () => {
    const transport = await harness.transport()
    const endpoints = [
      transport.createPublishServer({ host: HOST, port: 0 }),
      transport.createPublishClient({ host: HOST, port: 1 }),
      transport.createRequestServer({ host: HOST, port: 0 }),
      transport.createRequestClient({ host: HOST, port: 1 }),
    ]
    for (const endpoint of endpoints) {
      await endpoint[Symbol.asyncDispose]()
      await deadline(endpoint.closed, WAIT_MS, `never-started ${endpoint.address} to close`)
      await expect(endpoint.start()).rejects.toBeInstanceOf(ClosedError)
    }
  })
}
