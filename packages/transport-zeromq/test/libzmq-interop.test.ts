import { EnvelopeKind, decodeEnvelope, encode, encodeEnvelope } from '@brine/core'
import { deadline, freeLoopbackPort, watch } from '@brine/testkit'
import { describe, expect, it } from 'vitest'
import { Router, XPublisher } from 'zeromq'
import { zeromqTransport } from '../src/index.js'
import { BROADCAST_TOPIC, topicForId } from '../src/socket-util.js'
import { HOST, take, track } from './helpers.js'

/** Our clients against libzmq's own servers (zeromq.js): the wire they speak is libzmq's, not only ours. */
const transport = zeromqTransport()
const fast = { reconnect: { initial: 50, max: 200 } }

/** A libzmq Router answering each request envelope with `answer(body)`, until it closes. */
function serveWithRouter(router: Router, answer: (body: unknown) => unknown): void {
  void (async () => {
    for await (const [routingId, frame] of router) {
      const request = decodeEnvelope(frame!)
      await router.send([routingId!, encodeEnvelope({ kind: EnvelopeKind.Reply, id: request.id, body: answer(request.body) as never })])
    }
  })().catch(() => {})
}

async function routerOn(port: number, answer: (body: unknown) => unknown): Promise<Router> {
  const router = new Router({ linger: 0 })
  await router.bind(`tcp://${HOST}:${port}`)
  serveWithRouter(router, answer)
  return router
}

async function xpubOn(port: number): Promise<XPublisher> {
  const xpub = new XPublisher({ linger: 0 })
  await xpub.bind(`tcp://${HOST}:${port}`)
  return xpub
}

/** The topics of the next `n` subscription messages an XPublisher receives (each `\x01topic`). */
async function subscriptionsAt(xpub: XPublisher, n: number): Promise<Set<string>> {
  const topics = new Set<string>()
  await deadline(
    (async () => {
      for (let i = 0; i < n; i++) {
        const [subscription] = await xpub.receive()
        expect(subscription![0]).toBe(1)
        topics.add(subscription!.subarray(1).toString('latin1'))
      }
    })(),
    10_000,
    `${n} subscriptions at the libzmq XPublisher`,
  )
  return topics
}

describe('our ZeroMQ clients against libzmq servers', () => {
  it('complete the ZMTP handshake with a libzmq Router and make request/reply round trips', async () => {
    const port = await freeLoopbackPort()
    const router = await routerOn(port, (body) => ({ echo: body }))
    try {
      const client = track(transport.createRequestClient({ host: HOST, port, ...fast }))
      const log = watch(client)
      await client.start()
      await log.next('peer-connect', 'the handshake with the libzmq Router')
      const replies = await deadline(Promise.all([1, 2, 3].map((n) => client.send({ n }))), 10_000, 'three replies from libzmq')
      expect(replies).toEqual([{ echo: { n: 1 } }, { echo: { n: 2 } }, { echo: { n: 3 } }])
    } finally {
      router.close()
    }
  })

  it("subscribe at a libzmq XPublisher to broadcast and their id's SHA-1, and get broadcasts and their own targeted loads only", async () => {
    const port = await freeLoopbackPort()
    const xpub = await xpubOn(port)
    try {
      const client = track(transport.createPublishClient({ host: HOST, port, id: 'minion-a', ...fast }))
      await client.start()
      expect(await subscriptionsAt(xpub, 2)).toEqual(new Set([BROADCAST_TOPIC, topicForId('minion-a')]))
      await xpub.send([BROADCAST_TOPIC, encode('to all')])
      await xpub.send([topicForId('minion-b'), encode('to b')])
      await xpub.send([topicForId('minion-a'), encode('to a')])
      expect(await take(client[Symbol.asyncIterator](), 2, 'the broadcast and the load targeted at minion-a')).toEqual(['to all', 'to a'])
    } finally {
      xpub.close()
    }
  })

  it('come back to a libzmq XPublisher and Router restarted on the same port, subscriptions and all', async () => {
    const [pubPort, retPort] = [await freeLoopbackPort(), await freeLoopbackPort()]
    let router = await routerOn(retPort, () => 'first')
    let xpub = await xpubOn(pubPort)
    try {
      const client = track(transport.createRequestClient({ host: HOST, port: retPort, ...fast }))
      const subscriber = track(transport.createPublishClient({ host: HOST, port: pubPort, id: 'minion-r', ...fast }))
      const [clientLog, subscriberLog] = [watch(client), watch(subscriber)]
      await Promise.all([client.start(), subscriber.start()])
      expect(await deadline(client.send('hello'), 10_000, 'the first reply')).toBe('first')
      await subscriptionsAt(xpub, 2)

      router.close()
      xpub.close()
      await clientLog.next('peer-disconnect', 'the request client to see libzmq go')
      await subscriberLog.next('peer-disconnect', 'the subscriber to see libzmq go')
      router = await routerOn(retPort, () => 'second')
      xpub = await xpubOn(pubPort)
      expect(await deadline(client.send('hello again'), 10_000, 'the reply after the restart')).toBe('second')
      // The subscriptions are sent again on the new connection, as libzmq's Subscriber does.
      expect(await subscriptionsAt(xpub, 2)).toEqual(new Set([BROADCAST_TOPIC, topicForId('minion-r')]))
      await xpub.send([topicForId('minion-r'), encode('targeted after restart')])
      expect(await take(subscriber[Symbol.asyncIterator](), 1, 'the targeted load after the restart')).toEqual(['targeted after restart'])
      expect(client.stats().reconnects).toBe(1)
      expect(subscriber.stats().reconnects).toBe(1)
    } finally {
      router.close()
      xpub.close()
    }
  })
})
