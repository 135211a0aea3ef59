import type { TransportEvent } from '@brine/transport'
import { deadline, freeLoopbackPort, watch } from '@brine/testkit'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { HOST, track } from './helpers.js'

const transport = zeromqTransport()
const reconnect = { initial: 40, max: 320, jitter: 0.5, steady: 3 }

const delays = (events: TransportEvent[]) => events.flatMap((event) => (event.type === 'reconnect-attempt' ? [event.delay] : []))

/** Each attempt's delay lies in its window of the backoff: [base × (1 − jitter), base], the base doubling after the steady ones up to the cap. */
function expectWithin(delays: Array<number | undefined>, bases: number[]): void {
  expect(delays).toHaveLength(bases.length)
  delays.forEach((delay, index) => {
    expect(delay).toBeGreaterThanOrEqual(bases[index]! / 2)
    expect(delay).toBeLessThanOrEqual(bases[index]!)
  })
}

describe('zeromq reconnect schedule', () => {
  it('retries at the initial delay for the steady attempts, then doubles up to the cap, each delay jittered', async () => {
    const port = await freeLoopbackPort()
    const client = track(transport.createRequestClient({ host: HOST, port, reconnect }))
    const log = watch(client)
    await client.start()
    await log.next('reconnect-attempt', 'eight reconnect attempts', (event) => event.attempt === 8)
    expectWithin(delays(log.seen).slice(0, 8), [40, 40, 40, 80, 160, 320, 320, 320])
  })

  it('answers a request queued in the growing phase once the server comes, and is steady again when that connection is lost', async () => {
    const port = await freeLoopbackPort()
    const client = track(transport.createRequestClient({ host: HOST, port, reconnect, timeout: 10_000 }))
    const log = watch(client)
    await client.start()
    await log.next('reconnect-attempt', 'the growing phase', (event) => event.attempt === 5)
    const reply = client.send('queued while growing')
    const server = track(transport.createRequestServer({ host: HOST, port }))
    server.handle(async (request) => ({ served: request }))
    await server.start()
    expect(await deadline(reply, 10_000, 'the reply once the server is up')).toEqual({ served: 'queued while growing' })

    await server.close()
    const lost = log.seen.indexOf(await log.next('peer-disconnect', 'the client to see the server go'))
    await log.next('reconnect-attempt', 'five attempts after the loss', (event) => event.attempt === 5, lost)
    // The count starts again after a connection: the steady attempts first.
    expectWithin(delays(log.seen.slice(lost)).slice(0, 5), [40, 40, 40, 80, 160])
  })

  it('reconnectNow() makes the waiting attempt at once, once the server is known to be back', async () => {
    const port = await freeLoopbackPort()
    // A backoff far longer than the test: only reconnectNow() can bring the client in.
    const client = track(transport.createPublishClient({ host: HOST, port, id: 'minion-now', reconnect: { initial: 600_000, max: 600_000, jitter: 0 } }))
    const log = watch(client)
    await client.start()
    await log.next('reconnect-attempt', 'the first attempt to fail')
    const server = track(transport.createPublishServer({ host: HOST, port }))
    await server.start()
    client.reconnectNow()
    await log.next('peer-connect', 'the client to connect on reconnectNow()')
    expect(client.stats().peers).toBe(1)
    // Connected: reconnectNow() is a no-op, the link stays.
    client.reconnectNow()
    expect(client.stats()).toMatchObject({ peers: 1, reconnects: 0 })
  })
})
