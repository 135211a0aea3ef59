import { describe, expect, it } from 'vitest'
import { topicForId, zeromqTransport } from '../src/index.js'
import { EventLog, HOST, deadline, portOf, take, track } from './helpers.js'

const transport = zeromqTransport()
const fast = { initial: 50, max: 200 }

describe('zeromq reconnect after a server restart on the same port', () => {
  it('request client: peer-disconnect, peer-connect, then a successful send', async () => {
    const first = transport.createRequestServer({ host: HOST, port: 0 })
    first.handle(async () => 'first')
    await first.start()
    const port = portOf(first.address)
    const client = track(transport.createRequestClient({ host: HOST, port, reconnect: fast }))
    const events = new EventLog(client)
    await client.start()
    await expect(deadline(client.send('hi'), 10_000, 'reply from the first server')).resolves.toBe('first')
    await first.close()
    const lost = await events.waitFor((e) => e.type === 'peer-disconnect', 'peer-disconnect')
    const second = track(transport.createRequestServer({ host: HOST, port }))
    second.handle(async () => 'second')
    await second.start()
    await events.waitFor((e) => e.type === 'peer-connect', 'peer-connect after the restart', events.seen.indexOf(lost))
    await expect(deadline(client.send('again', { timeout: 2000, tries: 3 }), 10_000, 'reply from the second server')).resolves.toBe('second')
    expect(client.stats().reconnects).toBeGreaterThanOrEqual(1)
  })

  it('publish client: re-subscribes and receives from the new server', async () => {
    const first = transport.createPublishServer({ host: HOST, port: 0 })
    const firstEvents = new EventLog(first)
    await first.start()
    const port = portOf(first.address)
    const client = track(transport.createPublishClient({ host: HOST, port, id: 'minion-1', reconnect: fast }))
    const events = new EventLog(client)
    await client.start()
    await firstEvents.waitFor((e) => e.type === 'peer-subscribe' && e.topic === topicForId('minion-1'), 'first subscription')
    await first.close()
    const lost = await events.waitFor((e) => e.type === 'peer-disconnect', 'peer-disconnect')
    const second = track(transport.createPublishServer({ host: HOST, port }))
    const secondEvents = new EventLog(second)
    await second.start()
    await events.waitFor((e) => e.type === 'peer-connect', 'peer-connect after the restart', events.seen.indexOf(lost))
    await secondEvents.waitFor((e) => e.type === 'peer-subscribe' && e.topic === 'broadcast', 'broadcast re-subscription')
    await secondEvents.waitFor((e) => e.type === 'peer-subscribe' && e.topic === topicForId('minion-1'), 'id re-subscription')
    await second.publish('targeted', { topics: ['minion-1'] })
    await second.publish('broadcast')
    expect(await take(client[Symbol.asyncIterator](), 2, 'loads from the new server')).toEqual(['targeted', 'broadcast'])
    expect(client.stats().reconnects).toBeGreaterThanOrEqual(1)
  })
})
