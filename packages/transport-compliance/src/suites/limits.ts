import { randomBytes } from 'node:crypto'
import { describe, expect } from 'vitest'
import { FrameTooLargeError, TimeoutError } from '@brine/core'
import { WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

const MiB = 1024 * 1024

export function limitTests(harness: Harness): void {
  describe('limits', () => {
    frameSizeCases(harness)
    subscriberLimitCases(harness)
  })
}

/** Large payloads make the round trip; frames over max_frame_bytes are refused on send and dropped on receive. */
function frameSizeCases(harness: Harness): void {
  test('limits: a 16 MiB payload makes the round trip by request and by publish', async () => {
    const payload = randomBytes(16 * MiB)
    const server = await harness.requestServer(async (request) => request)
    const { endpoint: client } = await harness.requestClient(server.port)
    const echoed = (await client.send({ blob: payload }, { timeout: 60_000 })) as { blob: Buffer }
    expect(Buffer.compare(echoed.blob, payload)).toBe(0)

    const publisher = await harness.publishServer()
    const subscriber = await harness.subscriber(publisher.port, 'big')
    await harness.waitForSubscribers(publisher, 1)
    await publisher.endpoint.publish({ blob: payload })
    const [load] = (await subscriber.waitForLoads(1, 'the 16 MiB publish')) as Array<{ blob: Buffer }>
    expect(Buffer.compare(load!.blob, payload)).toBe(0)
  })

  test('limits: an over-limit frame raises FrameTooLargeError on send', async () => {
    let calls = 0
    const server = await harness.requestServer(async () => {
      calls++
      return 'handled'
    })
    const { endpoint: client } = await harness.requestClient(server.port, { maxFrameBytes: MiB })
    const error = await client.send({ blob: Buffer.alloc(2 * MiB) }, { timeout: WAIT_MS }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(FrameTooLargeError)
    expect(error).toMatchObject({ limit: MiB })
    expect((error as FrameTooLargeError).size).toBeGreaterThan(2 * MiB)
    expect(await client.send('small', { timeout: WAIT_MS })).toBe('handled')
    expect(calls).toBe(1)

    const publisher = await harness.publishServer({ maxFrameBytes: MiB })
    await expect(publisher.endpoint.publish({ blob: Buffer.alloc(2 * MiB) })).rejects.toBeInstanceOf(FrameTooLargeError)
  })

  test('limits: an over-limit frame is dropped on receive and the connection keeps serving', async () => {
    const server = await harness.requestServer(async (request) => ({ got: typeof request }), { maxFrameBytes: MiB })
    const { endpoint: client } = await harness.requestClient(server.port, { maxFrameBytes: 8 * MiB })
    const mark = server.recorder.mark()
    const oversized = client.send({ blob: Buffer.alloc(2 * MiB) }, { timeout: 2_000 }).catch((e: unknown) => e)
    const drop = await server.recorder.waitFor((e) => e.type === 'frame-drop', 'the server to drop the over-limit frame', { from: mark })
    expect(drop).toMatchObject({ type: 'frame-drop' })
    expect(drop.type === 'frame-drop' && drop.size).toBeGreaterThan(2 * MiB)
    expect(drop.type === 'frame-drop' && drop.reason).toMatch(/max_frame_bytes/)
    expect(server.endpoint.stats().framesDropped).toBe(1)
    // The same connection still carries requests; the dropped one never got an answer.
    expect(await client.send('still here', { timeout: WAIT_MS })).toEqual({ got: 'string' })
    expect(await oversized).toBeInstanceOf(TimeoutError)
  })
}

/** A subscriber that stalls or receives an oversize publish: bounded by its hwm, drops counted, still receiving. */
function subscriberLimitCases(harness: Harness): void {
  test('limits: a stalled subscriber is bounded by the high-water mark and drops are counted', async () => {
    const hwm = 50
    const publisher = await harness.publishServer({ hwm })
    const stalled = await harness.subscriber(publisher.port, 'slowpoke', { hwm, stalled: true })
    await harness.waitForSubscribers(publisher, 1)
    const load = { filler: Buffer.alloc(8 * 1024, 1) }
    const dropped = (): number => publisher.endpoint.stats().dropped + stalled.endpoint.stats().dropped
    for (let i = 0; i < 3000; i++) await publisher.endpoint.publish(load)
    await stalled.recorder.until(() => dropped() > 0, 'a drop to be counted at the high-water mark')
    expect(publisher.endpoint.stats().queued).toBeLessThanOrEqual(hwm)
    expect(stalled.endpoint.stats().queued).toBeLessThanOrEqual(hwm)

    // Once the subscriber reads again the link still works. A marker published while the backlog drains may
    // itself meet the mark and be dropped (that is the policy), so publish one more on every arrival: the one
    // sent after the backlog's last load finds the queues empty. Bounded by the backlog's size.
    stalled.consume()
    const isMarker = (load: unknown): boolean => (load as { marker?: boolean }).marker === true
    let publishedAt = -1
    await stalled.recorder.until(
      () => {
        if (stalled.received.some(isMarker)) return true
        if (stalled.received.length !== publishedAt) {
          publishedAt = stalled.received.length
          publisher.endpoint.publish({ marker: true }).catch(() => {})
        }
        return false
      },
      'a marker published after the stall to arrive',
      WAIT_MS,
    )
    expect(dropped()).toBeGreaterThan(0)
  })

  test('limits: an over-limit publish is dropped by the subscriber, which keeps receiving', async () => {
    const publisher = await harness.publishServer()
    const subscriber = await harness.subscriber(publisher.port, 'small-only', { maxFrameBytes: 1024 })
    await harness.waitForSubscribers(publisher, 1)
    await publisher.endpoint.publish('y'.repeat(4000))
    await publisher.endpoint.publish('small')
    expect(await subscriber.waitForLoads(1, 'the small load after the over-limit one')).toEqual(['small'])
    const drop = await subscriber.recorder.waitFor((e) => e.type === 'frame-drop', 'the subscriber to drop the over-limit publish')
    expect(drop.type === 'frame-drop' && drop.reason).toMatch(/exceeds max_frame_bytes \(1024\)/)
    expect(subscriber.endpoint.stats().framesDropped).toBe(1)
  })

  test('limits: a subscriber that stops reading keeps `hwm` loads and drops the newest, counted', async () => {
    const publisher = await harness.publishServer()
    const subscriber = await harness.subscriber(publisher.port, 'slow-reader', { hwm: 2, stalled: true })
    await harness.waitForSubscribers(publisher, 1)
    for (const n of [0, 1, 2]) await publisher.endpoint.publish(n)
    // The third load meets the full queue: a message-drop event says so.
    await subscriber.recorder.waitFor((e) => e.type === 'message-drop', 'the subscriber to drop the newest load')
    expect(subscriber.endpoint.stats()).toMatchObject({ queued: 2, dropped: 1 })
    subscriber.consume()
    expect(await subscriber.waitForLoads(2, 'the two loads kept')).toEqual([0, 1])
    await publisher.endpoint.publish('after')
    expect(await subscriber.waitForLoads(3, 'a load published once the subscriber reads again')).toEqual([0, 1, 'after'])
  })
}
