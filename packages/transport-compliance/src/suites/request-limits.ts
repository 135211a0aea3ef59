import { describe, expect } from 'vitest'
import { ClosedError, FrameLimitError, InFlightLimitError, RemoteError, TimeoutError, type WireValue } from '@brine/core'
import { deadline, deferred } from '@brine/testkit'
import { WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

/** What a send came to, so a test can wait for many at once whatever each one's outcome. */
type Outcome = { reply: WireValue } | { error: unknown }
const outcome = (sending: Promise<WireValue>): Promise<Outcome> =>
  sending.then(
    (reply) => ({ reply }),
    (error: unknown) => ({ error }),
  )

export function requestLimitTests(harness: Harness): void {
  describe('request limits', () => {
    inFlightAndBacklogCases(harness)
    laneCases(harness)
    inFlightBytesCase(harness)
    ownBytesCase(harness)
    replyAndRequestBoundCases(harness)
  })
}

/** Requests beyond a client's hwm or a server's concurrency and backlog are refused with errors naming the bound. */
function inFlightAndBacklogCases(harness: Harness): void {
  test('request limits: beyond `hwm` requests in flight the client refuses with InFlightLimitError naming `limit`', async () => {
    let calls = 0
    const server = await harness.requestServer(() => {
      calls++
      server.recorder.poke()
      return new Promise<WireValue>(() => {})
    })
    const { endpoint: client } = await harness.requestClient(server.port, { hwm: 2 })
    const held = [outcome(client.send(1, { timeout: WAIT_MS })), outcome(client.send(2, { timeout: WAIT_MS }))]
    const error = await client.send(3, { timeout: WAIT_MS }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InFlightLimitError)
    expect((error as InFlightLimitError).context).toEqual({ address: client.address, limit: 2 })
    expect((error as Error).message).toBe(`2 requests already in flight to ${client.address} (hwm 2); request refused`)
    expect(client.stats()).toMatchObject({ inFlight: 2, refused: 1 })
    await server.recorder.until(() => calls === 2, 'the two requests in flight to reach the handler')
    await client.close()
    for (const result of await Promise.all(held)) expect((result as { error: unknown }).error).toBeInstanceOf(ClosedError)
    expect(calls).toBe(2)
  })

  test('request limits: beyond `concurrency` handler calls requests wait in a bounded backlog, and beyond that get a ServerBusyError reply', async () => {
    const release: Array<() => void> = []
    const server = await harness.requestServer(
      (request) =>
        new Promise<WireValue>((resolve) => {
          release.push(() => resolve({ served: request }))
          server.recorder.poke()
        }),
      { concurrency: 2, backlog: 3 },
    )
    const { endpoint: client } = await harness.requestClient(server.port)
    const sends = Array.from({ length: 8 }, (_, n) => outcome(client.send(n, { timeout: WAIT_MS })))
    // Two run, three wait, and the three after them are answered at once with the server's refusal.
    const refused = await deadline(Promise.all(sends.slice(5)), WAIT_MS, 'the three requests beyond the backlog to be refused')
    for (const result of refused) {
      const error = (result as { error: unknown }).error
      expect(error).toBeInstanceOf(RemoteError)
      expect(error).toMatchObject({ remoteName: 'ServerBusyError', context: { limit: 2, backlog: 3 } })
      expect((error as Error).message).toContain('2 handler calls running (concurrency limit 2) and 3 waiting (backlog limit 3); request refused')
    }
    await server.recorder.until(() => release.length === 2, 'the first two requests to reach the handler')
    expect(server.endpoint.stats()).toMatchObject({ inFlight: 2, refused: 3 })
    expect(server.endpoint.stats().queued).toBeGreaterThanOrEqual(3)
    // Each call that finishes lets the oldest waiting request in.
    for (let served = 0; served < 5; served++) {
      await server.recorder.until(() => release.length > served, `request ${served} to reach the handler`)
      release[served]!()
    }
    const answers = await deadline(Promise.all(sends.slice(0, 5)), WAIT_MS, 'the five admitted requests to be answered')
    expect(answers).toEqual([0, 1, 2, 3, 4].map((n) => ({ reply: { served: n } })))
    expect(release).toHaveLength(5)
    expect(server.endpoint.stats()).toMatchObject({ inFlight: 0, refused: 3 })
  })
}

/** A server holding `concurrency` calls, held open until the test lets the first one go; the order the handler saw. */
async function heldServer(harness: Harness, options: { backlog: number; urgent?: (request: WireValue) => boolean }) {
  const seen: string[] = []
  const blocker = deferred<WireValue>()
  const server = await harness.requestServer(
    async (request) => {
      const name = (request as { name: string }).name
      seen.push(name)
      server.recorder.poke()
      return name === 'blocker' ? blocker.promise : { served: name }
    },
    { concurrency: 1, ...options },
  )
  const { endpoint: client } = await harness.requestClient(server.port)
  const held = outcome(client.send({ name: 'blocker' }, { timeout: WAIT_MS }))
  await server.recorder.until(() => seen.length === 1, 'the blocker to take the one handler slot')
  return { server, client, seen, held, release: () => blocker.resolve({ served: 'blocker' }) }
}

/** A refusal proves that every request sent before it on the same client reached the server, and that the backlog is full. */
async function expectBusy(sending: Promise<WireValue>, what: string): Promise<void> {
  const refused = (await deadline(outcome(sending), WAIT_MS, what)) as { error?: unknown }
  expect(refused.error).toMatchObject({ remoteName: 'ServerBusyError' })
}

/**
 * The urgent lane (a master's operator requests never wait behind minions' returns), and the retry of a request
 * still in the backlog: not queued a second time, and answered by the one reply (the contract and its reason:
 * `timeouts` in request-reply.ts). A try arriving after the earlier one was answered is served again.
 */
function laneCases(harness: Harness): void {
  test('request limits: a request `urgent` picks is served before every request already waiting in a full backlog', async () => {
    const urgent = (request: WireValue): boolean => (request as { lane?: string }).lane === 'operator'
    const { client, seen, held, release } = await heldServer(harness, { backlog: 21, urgent })
    // A stand-in flood fills the backlog, the operator's request comes last, and one more is refused: all 21 wait.
    const flood = Array.from({ length: 20 }, (_, n) => outcome(client.send({ name: `return ${n}` }, { timeout: WAIT_MS })))
    const operator = client.send({ name: 'publish', lane: 'operator' }, { timeout: WAIT_MS })
    await expectBusy(client.send({ name: 'one too many' }, { timeout: WAIT_MS }), 'the request beyond the full backlog to be refused')
    release()
    expect(await deadline(operator, WAIT_MS, "the operator's request")).toEqual({ served: 'publish' })
    await deadline(Promise.all([held, ...flood]), WAIT_MS, 'every waiting request to be served')
    expect(seen).toEqual(['blocker', 'publish', ...Array.from({ length: 20 }, (_, n) => `return ${n}`)])
  })

  test('request limits: a retry of a request still waiting for a handler slot is not queued again, and the one reply answers it', async () => {
    const { server, client, seen, held, release } = await heldServer(harness, { backlog: 3 })
    // Both wait behind the blocker, and each sends a second try. The first gives up before the second's last try
    // runs out (its timer is due first), so by its TimeoutError both second tries are on the wire, and the
    // second request still waits for its answer.
    const gaveUp = client.send({ name: 'gave up' }, { timeout: 1500, tries: 2 }).catch((error: unknown) => error)
    const answered = client.send({ name: 'answered' }, { timeout: 2500, tries: 2 })
    expect(await deadline(gaveUp, WAIT_MS, 'the first request to time out')).toBeInstanceOf(TimeoutError)
    // Had their retries been queued, the backlog (3) would already be full; one more fits, and the next is refused.
    const fits = client.send({ name: 'fits' }, { timeout: WAIT_MS })
    await expectBusy(client.send({ name: 'refused' }, { timeout: WAIT_MS }), 'the request beyond the backlog to be refused')
    expect(server.endpoint.stats().coalesced).toBe(2)
    release()
    expect(await deadline(answered, WAIT_MS, 'the retried request')).toEqual({ served: 'answered' })
    expect(await deadline(fits, WAIT_MS, 'the request that fitted')).toEqual({ served: 'fits' })
    await deadline(held, WAIT_MS, 'the blocker')
    expect(seen).toEqual(['blocker', 'gave up', 'answered', 'fits'])
    expect(server.endpoint.stats()).toMatchObject({ queued: 0, inFlight: 0, refused: 1 })
  })
}

const OWN_BYTES_CASE =
  'request limits: a request served or waiting holds its own bytes, not the chunk it was read with (what `maxInFlightBytes` counts is what it holds)'

/**
 * Forty small requests sent at once arrive several to a socket read (or a broker's delivery), each a view into that
 * read's chunk; a binary field decoded from a view shares its buffer. Two run at a time and the rest wait, so both
 * paths (served at once, decoded after waiting) are seen: each bin's buffer must be no bigger than its request.
 */
function ownBytesCase(harness: Harness): void {
  test(OWN_BYTES_CASE, async () => {
    const held: number[] = []
    const server = await harness.requestServer(
      async (request) => {
        const data = (request as { data: Uint8Array }).data
        held.push(data.buffer.byteLength)
        server.recorder.poke()
        return data.length
      },
      { concurrency: 2, backlog: 100 },
    )
    const { endpoint: client } = await harness.requestClient(server.port)
    const sends = Array.from({ length: 40 }, (_, n) => client.send({ n, data: Buffer.alloc(32, n) }, { timeout: WAIT_MS }))
    expect(await deadline(Promise.all(sends), WAIT_MS, 'the forty requests to be answered')).toEqual(Array.from({ length: 40 }, () => 32))
    expect(held).toHaveLength(40)
    // An encoded request here is about 50 bytes; a socket read's chunk is tens of KiB.
    expect(Math.max(...held)).toBeLessThanOrEqual(256)
  })
}

const IN_FLIGHT_CASE =
  'request limits: past `maxInFlightBytes` a server takes no more requests in: a socket transport stops reading its peers until half is answered, a broker one refuses with ServerBusyError'

/**
 * Requests of 200 KiB against a bound of 300 KiB: two fit (the second passes the bound), and the part of a third
 * that one socket read can carry is never a whole one, so a socket transport never runs more than two at once.
 */
function inFlightBytesCase(harness: Harness): void {
  test(IN_FLIGHT_CASE, async () => {
    const limit = 300 * 1024
    const payload = 'x'.repeat(200 * 1024)
    const release: Array<() => void> = []
    let mostRunning = 0
    const server = await harness.requestServer(
      (request) =>
        new Promise<WireValue>((resolve) => {
          release.push(() => resolve((request as { n: number }).n))
          mostRunning = Math.max(mostRunning, server.endpoint.stats().inFlight)
          server.recorder.poke()
        }),
      { maxInFlightBytes: limit },
    )
    const { endpoint: client } = await harness.requestClient(server.port)
    const releaseAll = async (count: number): Promise<void> => {
      for (let served = 0; served < count; served++) {
        await server.recorder.until(() => release.length > served, `request ${served} to reach the handler`)
        release[served]!()
      }
    }
    if ((await harness.transport()).peerSockets === false) {
      const first = outcome(client.send({ n: 0, payload }, { timeout: WAIT_MS }))
      await server.recorder.until(() => release.length === 1, 'the first request to reach the handler')
      const refused = await client.send({ n: 1, payload }, { timeout: WAIT_MS }).catch((error: unknown) => error)
      expect(refused).toBeInstanceOf(RemoteError)
      expect(refused).toMatchObject({ remoteName: 'ServerBusyError', context: { maxInFlightBytes: limit } })
      expect((refused as Error).message).toContain(`its requests in flight hold more than ${limit} bytes (maxInFlightBytes); request refused`)
      const next = outcome(client.send({ n: 2, payload }, { timeout: WAIT_MS }))
      await releaseAll(2)
      expect(await deadline(Promise.all([first, next]), WAIT_MS, 'the admitted requests to be answered')).toEqual([{ reply: 0 }, { reply: 2 }])
      expect(server.endpoint.stats()).toMatchObject({ refused: 1, inFlight: 0 })
      return
    }
    const sends = Array.from({ length: 6 }, (_, n) => outcome(client.send({ n, payload }, { timeout: WAIT_MS })))
    const pause = await server.recorder.waitFor((event) => event.type === 'intake-pause', 'the server to stop reading')
    expect(pause).toMatchObject({ type: 'intake-pause', limit })
    expect(pause.type === 'intake-pause' && pause.bytes).toBeGreaterThan(limit)
    // Each call released as it comes: the held requests are read once half the bound is free again.
    await releaseAll(6)
    const answers = await deadline(Promise.all(sends), WAIT_MS, 'every request to be answered')
    expect(answers).toEqual([0, 1, 2, 3, 4, 5].map((n) => ({ reply: n })))
    expect(mostRunning).toBe(2)
    await server.recorder.waitFor((event) => event.type === 'intake-resume', 'the server to read again')
    expect(server.endpoint.stats()).toMatchObject({ refused: 0, inFlight: 0 })
  })
}

/** Replies over max_frame_bytes and requests over the depth or entry bounds answered or dropped, the link kept. */
function replyAndRequestBoundCases(harness: Harness): void {
  test('request limits: a reply over max_frame_bytes becomes an error reply naming the limit', async () => {
    const server = await harness.requestServer(async (request) => (request === 'big' ? 'x'.repeat(4096) : 'small'), { maxFrameBytes: 1024 })
    const { endpoint: client } = await harness.requestClient(server.port)
    const error = await client.send('big', { timeout: WAIT_MS }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RemoteError)
    expect(error).toMatchObject({ remoteName: 'FrameTooLargeError', context: { limit: 1024 } })
    expect(await client.send('next', { timeout: WAIT_MS })).toBe('small')
  })

  test('request limits: an over-limit reply is dropped by the client, which times the request out and keeps the link', async () => {
    const server = await harness.requestServer(async (request) => (request === 'big' ? 'z'.repeat(4000) : 'small'))
    const client = await harness.requestClient(server.port, { maxFrameBytes: 1024 })
    const mark = client.recorder.mark()
    const error = await client.endpoint.send('big', { timeout: 500 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TimeoutError)
    const drop = await client.recorder.waitFor((e) => e.type === 'frame-drop', 'the client to drop the over-limit reply', { from: mark })
    expect(drop.type === 'frame-drop' && drop.reason).toMatch(/exceeds max_frame_bytes \(1024\)/)
    expect(drop.type === 'frame-drop' && drop.size).toBeGreaterThan(4000)
    expect(client.endpoint.stats().framesDropped).toBe(1)
    expect(await client.endpoint.send('next', { timeout: WAIT_MS })).toBe('small')
  })

  test('request limits: a request over the depth or entry bound is answered with a FrameLimitError naming the bound, and the server keeps serving', async () => {
    let handled = 0
    const server = await harness.requestServer(async () => {
      handled++
      return 'ok'
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    // A 1,000-deep argument (over max_frame_depth, 64) and a 1,000,000-integer list (over max_frame_entries, 262,144).
    let deep: WireValue = 'bottom'
    for (let level = 0; level < 1000; level++) deep = [deep]
    const tooDeep = await client.send({ arg: [deep] }, { timeout: WAIT_MS }).catch((error: unknown) => error)
    expect(tooDeep).toBeInstanceOf(FrameLimitError)
    expect(tooDeep).toMatchObject({ key: 'max_frame_depth', limit: 64 })
    expect((tooDeep as Error).message).toMatch(/refused the request: .*over max_frame_depth \(64\)/)
    const tooMany = await client.send({ arg: [Array.from({ length: 1_000_000 }, (_, n) => n)] }, { timeout: WAIT_MS }).catch((error: unknown) => error)
    expect(tooMany).toBeInstanceOf(FrameLimitError)
    expect(tooMany).toMatchObject({ key: 'max_frame_entries', limit: 262_144 })
    expect(handled).toBe(0)
    expect(server.endpoint.stats().framesDropped).toBe(2)
    expect(await client.send({ arg: [[[1]]] }, { timeout: WAIT_MS })).toBe('ok')
    expect(handled).toBe(1)
  })
}
