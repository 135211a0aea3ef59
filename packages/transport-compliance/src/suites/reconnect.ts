import { describe, expect } from 'vitest'
import { deadline, freeLoopbackPort } from '@brine/testkit'
import { HOST, WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

export function reconnectTests(harness: Harness): void {
  describe('reconnect', () => {
    test('reconnect: clients reconnect after the server restarts on the same port', async () => {
      const fast = { reconnect: { initial: 50, max: 400 } }
      // Ports below the ephemeral range: a client reconnecting to a port-0 pick could be handed that very
      // port as its own local port while the server is down, and connect to itself.
      const before = await harness.requestServer(async () => 'first server', { port: await freeLoopbackPort() })
      const publisherBefore = await harness.publishServer({ port: await freeLoopbackPort() })
      const client = await harness.requestClient(before.port, fast)
      const subscriber = await harness.subscriber(publisherBefore.port, 'minion-r', fast)
      expect(await client.endpoint.send('hello', { timeout: WAIT_MS })).toBe('first server')
      await harness.waitForSubscribers(publisherBefore, 1)
      await publisherBefore.endpoint.publish('before restart')
      await subscriber.waitForLoads(1, 'the load published before the restart')

      const clientMark = client.recorder.mark()
      const subscriberMark = subscriber.recorder.mark()
      await deadline(Promise.all([before.endpoint.close(), publisherBefore.endpoint.close()]), WAIT_MS, 'the servers to stop')
      // On a broker the clients' connection is to the broker, not to the servers: the broker restarts too.
      const broker = harness.setup.broker
      if (broker !== undefined) await deadline(broker.stopBroker(), WAIT_MS, 'the broker to stop')
      await client.recorder.waitFor((e) => e.type === 'peer-disconnect', 'the request client to see the server go', { from: clientMark })
      await subscriber.recorder.waitFor((e) => e.type === 'peer-disconnect', 'the subscriber to see the server go', { from: subscriberMark })

      if (broker !== undefined) await deadline(broker.startBroker(), WAIT_MS, 'the broker to start again')
      const transport = await harness.transport()
      const after = transport.createRequestServer({ host: HOST, port: before.port })
      after.handle(async () => 'second server')
      const publisherAfter = transport.createPublishServer({ host: HOST, port: publisherBefore.port })
      const afterTracked = await harness.adopt(after)
      const publisherAfterTracked = await harness.adopt(publisherAfter)

      await client.recorder.waitFor((e) => e.type === 'peer-connect', 'the request client to reconnect', { from: clientMark })
      await subscriber.recorder.waitFor((e) => e.type === 'peer-connect', 'the subscriber to reconnect', { from: subscriberMark })
      await harness.waitForSubscribers(publisherAfterTracked, 1)
      expect(await client.endpoint.send('hello again', { timeout: WAIT_MS })).toBe('second server')
      await publisherAfter.publish('after restart')
      expect(await subscriber.waitForLoads(2, 'the load published after the restart')).toEqual(['before restart', 'after restart'])
      // The subscriber's id came back with it: a publish targeted at it arrives too.
      await publisherAfter.publish('targeted after restart', { topics: ['minion-r'] })
      expect(await subscriber.waitForLoads(3, 'the targeted load published after the restart')).toEqual([
        'before restart',
        'after restart',
        'targeted after restart',
      ])
      expect(client.endpoint.stats().reconnects).toBeGreaterThanOrEqual(1)
      expect(subscriber.endpoint.stats().reconnects).toBeGreaterThanOrEqual(1)
      expect(afterTracked.port).toBe(before.port)
    })
  })
}
