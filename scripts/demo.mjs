#!/usr/bin/env node
// The README's demo: for each transport, a request server and a publish server on loopback, a client
// and two subscribers; a real round trip, a broadcast and a targeted publish, printed as they happen.
// Uses the built packages (npm run build), exactly as a user's program would.
import { getTransport, registerTransport } from '@brine/transport'

registerTransport('tcp', async () => (await import('@brine/transport-tcp')).tcpTransport())
registerTransport('zeromq', async () => (await import('@brine/transport-zeromq')).zeromqTransport(), {
  hint: 'The zeromq native addon did not load; reinstall it with install scripts enabled, or use `transport: tcp`.',
})

const host = '127.0.0.1'
const bound = (promise, ms, what) =>
  Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(`demo: gave up waiting for ${what}`)), ms).unref())])

async function demo(name) {
  const transport = await getTransport(name)
  const requests = transport.createRequestServer({ host, port: 0 })
  requests.handle(async (load, { peer }) => ({ id: 'master', jid: load.jid, return: `pong from the master to ${load.id}`, peer }))
  const publisher = transport.createPublishServer({ host, port: 0 })
  await requests.start()
  await publisher.start()
  const subscribed = waitForSubscribers(publisher, 2)

  const client = transport.createRequestClient({ host, port: Number(requests.address.split(':').pop()), timeout: 5000 })
  const minions = ['web1', 'db1'].map((id) => {
    const sub = transport.createPublishClient({ host, port: Number(publisher.address.split(':').pop()), id })
    return { id, sub, iterator: sub[Symbol.asyncIterator]() }
  })
  await client.start()
  for (const { sub } of minions) await sub.start()
  await bound(subscribed, 10_000, 'both subscribers to connect')

  console.log(`\n== transport ${name}: publish ${publisher.address}, ret ${requests.address}`)
  const reply = await client.send({ cmd: '_return', id: 'web1', jid: '20261122170903000001', fun: 'test.ping' })
  console.log(`request  -> ${JSON.stringify(reply.return)}`)

  await publisher.publish({ fun: 'test.ping', tgt: '*' })
  await publisher.publish({ fun: 'cmd.run', arg: ['uname -sr'], tgt: 'db1' }, { topics: ['db1'] })
  await publisher.publish({ fun: 'grains.items', tgt: '*' })
  for (const { id, iterator } of minions) {
    const expected = id === 'db1' ? 3 : 2
    const got = []
    for (let i = 0; i < expected; i++) got.push((await bound(iterator.next(), 10_000, `publish ${i + 1} at ${id}`)).value.fun)
    console.log(`${id.padEnd(8)} <- ${got.join(', ')}`)
  }
  for (const endpoint of [client, ...minions.map((m) => m.sub), requests, publisher]) await endpoint.close()
}

async function waitForSubscribers(publisher, count) {
  let seen = 0
  for await (const event of publisher.events()) {
    if (event.type === 'peer-subscribe' && event.topic !== 'broadcast' && ++seen === count) return
  }
}

for (const name of ['zeromq', 'tcp']) await demo(name)
console.log('\nBoth transports carried the same requests and publishes. (web1 was not named by the targeted cmd.run.)')
