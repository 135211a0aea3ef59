import { describe, expect } from 'vitest'
import { AddressInUseError, ClosedError, type WireValue } from '@brine/transport'
import { canBind, deadline, deferred } from '@brine/testkit'
import { HOST, WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

export function closeTests(harness: Harness): void {
  describe('close', () => {
    test('close: close is idempotent and resolves `closed`', async () => {
      const server = await harness.requestServer(async () => 'ok')
      const client = await harness.requestClient(server.port)
      const publisher = await harness.publishServer()
      const subscriber = await harness.subscriber(publisher.port, 'x')
      for (const endpoint of [client.endpoint, subscriber.endpoint, server.endpoint, publisher.endpoint]) {
        await Promise.all([endpoint.close(), endpoint.close()])
        await endpoint.close()
        await deadline(endpoint.closed, WAIT_MS, `${endpoint.address} closed promise`)
      }
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

    test('close: a closed server port can be bound again at once', async () => {
      const server = await harness.requestServer(async () => 'ok')
      const publisher = await harness.publishServer()
      await harness.requestClient(server.port)
      await server.endpoint.close()
      await publisher.endpoint.close()
      expect(await canBind(server.port)).toBe(true)
      expect(await canBind(publisher.port)).toBe(true)
    })

    test('close: binding a port in use raises AddressInUseError naming it', async () => {
      const first = await harness.requestServer(async () => 'ok')
      const transport = await harness.transport()
      const second = transport.createRequestServer({ host: HOST, port: first.port })
      second.handle(async () => 'never')
      const error = await second.start().catch((e: unknown) => e)
      await second.close()
      expect(error).toBeInstanceOf(AddressInUseError)
      expect((error as Error).message).toContain(`${HOST}:${first.port}`)
    })
  })
}
