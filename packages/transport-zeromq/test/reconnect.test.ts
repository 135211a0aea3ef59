import type { TransportEvent } from '@brine/transport'
import { deadline, freeLoopbackPort, watch } from '@brine/testkit'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { HOST, track } from './helpers.js'

const transport = zeromqTransport()
const reconnect = { initial: 40, max: 320, jitter: 0.5, steady: 3 }

const delays = (events: TransportEvent[]) => events.flatMap((event) => (event.type === 'reconnect-attempt' ? [event.delay] : []))

/** Steady attempts wait one interval the client drew in [initial × (1 − jitter), initial] (TCP's window for an attempt). */
function expectSteady(delays: Array<number | undefined>): void {
  expect(new Set(delays).size).toBe(1)
  for (const delay of delays) {
    expect(delay).toBeGreaterThanOrEqual(20)
    expect(delay).toBeLessThanOrEqual(40)
  }
}

describe('zeromq reconnect schedule', () => {
  it('retries at the initial delay for the steady attempts, then doubles from a point of its own up to the cap', async () => {
    const port = await freeLoopbackPort()
    const client = track(transport.createRequestClient({ host: HOST, port, reconnect }))
    const log = watch(client)
    await client.start()
    await log.next('reconnect-attempt', 'eight reconnect attempts', (event) => event.attempt === 8)
    const [s1, s2, s3, switched, first, ...grown] = delays(log.seen).slice(0, 8)
    expectSteady([s1, s2, s3])
    // The attempt after the steady ones is made at once, as the endpoint is connected again.
    expect(switched).toBe(0)
    // Drawn in TCP's window for that attempt, [2 × initial × (1 − jitter), 2 × initial], both ends included: a
    // draw near 0 rounds to 80 (about one run in 80 did, and failed the old `< 80`).
    expect(first).toBeGreaterThanOrEqual(40)
    expect(first).toBeLessThanOrEqual(80)
    expect(grown).toEqual([Math.min(first! * 2, 320), Math.min(first! * 4, 320), 320])
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
    // libzmq's first retry is a growing one; the endpoint is connected again at once, in the steady phase.
    const [again, s1, s2, s3, switched] = delays(log.seen.slice(lost)).slice(0, 5)
    expect(again).toBe(0)
    expectSteady([s1, s2, s3])
    expect(switched).toBe(0)
  })
})
