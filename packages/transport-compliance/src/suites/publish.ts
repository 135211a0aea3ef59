import { describe, expect } from 'vitest'
import type { Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

export function publishTests(harness: Harness): void {
  describe('publish', () => {
    test('publish: a broadcast reaches every one of K subscribers', async () => {
      const server = await harness.publishServer()
      const ids = ['web1', 'web2', 'db1', 'db2', 'cache1']
      const subscribers = await Promise.all(ids.map((id) => harness.subscriber(server.port, id)))
      await harness.waitForSubscribers(server, ids.length)
      await server.recorder.until(() => server.endpoint.stats().peers === ids.length, `the publish server to count ${ids.length} peers`)
      const load = { fun: 'test.ping', tgt: '*', jid: '20261122170903000001' }
      await server.endpoint.publish(load)
      for (const [i, subscriber] of subscribers.entries()) {
        expect(await subscriber.waitForLoads(1, `the broadcast to reach ${ids[i]}`)).toEqual([load])
      }
    })

    test('publish: loads arrive whole and in order', async () => {
      const server = await harness.publishServer()
      const subscriber = await harness.subscriber(server.port, 'minion-a')
      await harness.waitForSubscribers(server, 1)
      const loads = Array.from({ length: 300 }, (_, n) => ({ n, body: 'x'.repeat(n * 7), bin: Buffer.alloc(n % 50, n % 256) }))
      await Promise.all(loads.map((load) => server.endpoint.publish(load)))
      const received = await subscriber.waitForLoads(loads.length, `${loads.length} loads in order`)
      expect(received).toEqual(loads)
      expect(subscriber.endpoint.stats().dropped).toBe(0)
    })
  })

  describe('targeting', () => {
    test('targeting: a targeted publish reaches only the named subscribers', async () => {
      const server = await harness.publishServer()
      const [a, b, c] = await Promise.all(['alpha', 'beta', 'gamma'].map((id) => harness.subscriber(server.port, id)))
      const anonymous = await harness.subscriber(server.port, undefined)
      await harness.waitForSubscribers(server, 3)
      await server.recorder.until(
        () => server.recorder.count((e) => e.type === 'peer-subscribe' && e.topic === 'broadcast') >= 4,
        'four broadcast subscriptions',
      )
      // A topic naming nobody reaches nobody and troubles nobody.
      await server.endpoint.publish({ kind: 'targeted' }, { topics: ['alpha', 'gamma', 'nobody'] })
      await server.endpoint.publish({ kind: 'broadcast' })
      expect(await a!.waitForLoads(2, 'alpha to get the targeted load and the broadcast')).toEqual([{ kind: 'targeted' }, { kind: 'broadcast' }])
      expect(await c!.waitForLoads(2, 'gamma to get the targeted load and the broadcast')).toEqual([{ kind: 'targeted' }, { kind: 'broadcast' }])
      // beta was not named: the first thing it sees is the broadcast that followed.
      expect(await b!.waitForLoads(1, 'beta to get the broadcast')).toEqual([{ kind: 'broadcast' }])
      expect(await anonymous.waitForLoads(1, 'the subscriber without an id to get the broadcast')).toEqual([{ kind: 'broadcast' }])
      // And an id that is a prefix of another is not confused with it.
      const prefix = await harness.subscriber(server.port, 'alph')
      await harness.waitForSubscribers(server, 4)
      await server.endpoint.publish({ kind: 'only alpha' }, { topics: ['alpha'] })
      await server.endpoint.publish({ kind: 'after' })
      expect(await prefix.waitForLoads(1, "'alph' to get the broadcast")).toEqual([{ kind: 'after' }])
      expect(await a!.waitForLoads(4, 'alpha to get its second targeted load')).toEqual([
        { kind: 'targeted' },
        { kind: 'broadcast' },
        { kind: 'only alpha' },
        { kind: 'after' },
      ])
    })

    test('targeting: subscribe(id) after start() brings the targeted publishes for that id', async () => {
      const server = await harness.publishServer()
      const late = await harness.subscriber(server.port, undefined)
      late.endpoint.subscribe('late-id')
      await harness.waitForSubscribers(server, 1)
      await server.endpoint.publish('for late-id', { topics: ['late-id'] })
      await server.endpoint.publish('for everyone')
      expect(await late.waitForLoads(2, 'the targeted load and the broadcast')).toEqual(['for late-id', 'for everyone'])
    })
  })
}
