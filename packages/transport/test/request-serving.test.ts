import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { EndpointCore, REQUEST_OVERHEAD_BYTES, RequestServing, WAITING_FRAME_OVERHEAD_BYTES, type TransportEvent } from '../src/index.js'
import { ANSWER_KEPT_MAX_BYTES, ANSWER_OVERHEAD_BYTES } from '../src/runtime/answered-replies.js'
import { EnvelopeKind, InvalidOperationError, decodeEnvelope, encodeEnvelope, type Envelope, type WireValue } from '@brine/core'

const ADDRESS = 'tcp://127.0.0.1:4506'

/** A serving loop whose replies are collected, decoded, per peer; handler calls wait until released. */
function serving(
  options: {
    concurrency?: number
    backlog?: number
    maxInFlightBytes?: number
    intake?: { pause(): void; resume(): void }
    urgent?: (request: WireValue) => boolean
    answeredBytes?: number
  } = {},
) {
  const core = new EndpointCore('test', 'request server', ADDRESS)
  const replies: Array<{ peer: string; envelope: Envelope }> = []
  const loop = new RequestServing<string>(core, { maxFrameBytes: 1024 * 1024, ...options }, (peer, reply) => {
    replies.push({ peer, envelope: decodeEnvelope(reply) })
  })
  const held: Array<{ request: WireValue; release: () => void }> = []
  loop.handle(
    (request) =>
      new Promise((resolve) => {
        held.push({ request, release: () => resolve({ answer: request }) })
      }),
    false,
  )
  const request = (id: number, body: WireValue, peer = 'peer-a'): void => loop.receive(encodeEnvelope({ kind: EnvelopeKind.Request, id, body }), peer, peer)
  /** Resolves once `count` replies have been sent in total; handlers settle within a few turns of the loop. */
  const untilReplies = async (count: number): Promise<void> => {
    for (let turn = 0; replies.length < count; turn++) {
      if (turn === 1000) throw new Error(`gave up after 1000 turns of the event loop waiting for reply ${count}`)
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }
  return { core, loop, replies, held, request, untilReplies }
}

describe('RequestServing', () => {
  it('runs at most `concurrency` handler calls, queues up to `backlog` in order, and refuses the rest with ServerBusyError', async () => {
    const { core, loop, replies, held, request, untilReplies } = serving({ concurrency: 2, backlog: 3 })
    for (let id = 0; id < 8; id++) request(id, id)
    expect(held.map((call) => call.request)).toEqual([0, 1])
    expect(loop.running).toBe(2)
    expect(loop.waiting).toBe(3)
    // The last three got an error reply at once, naming both limits.
    expect(replies.map((reply) => reply.envelope.id)).toEqual([5, 6, 7])
    for (const { envelope } of replies) {
      expect(envelope.kind).toBe(EnvelopeKind.ErrorReply)
      expect(envelope.body).toMatchObject({ name: 'ServerBusyError', context: { address: ADDRESS, limit: 2, backlog: 3 } })
    }
    expect((replies[0]!.envelope.body as { message: string }).message).toBe(
      `request server ${ADDRESS} is busy: 2 handler calls running (concurrency limit 2) and 3 waiting (backlog limit 3); request refused`,
    )
    expect(core.counters.refused).toBe(3)
    // Each finished call lets the oldest waiting request in.
    held[0]!.release()
    await untilReplies(4)
    expect(held.map((call) => call.request)).toEqual([0, 1, 2])
    expect(loop.waiting).toBe(2)
    for (let served = 1; served < 5; served++) {
      held[served]!.release()
      await untilReplies(4 + served)
    }
    expect(replies.slice(3).map(({ envelope }) => envelope)).toEqual([0, 1, 2, 3, 4].map((id) => ({ kind: EnvelopeKind.Reply, id, body: { answer: id } })))
    expect(loop.running).toBe(0)
    expect(loop.waiting).toBe(0)
  })

  it('by default pauses its intake past 16 MiB in flight, running and waiting requests counted alike: a burst waits outside, not in the heap', () => {
    const pauses: number[] = []
    const { loop, request } = serving({ intake: { pause: () => pauses.push(loop.inFlightBytes), resume: () => {} } })
    for (let id = 0; id < 1100; id++) request(id, id)
    expect(pauses).toEqual([])
    // Requests of 64 KiB: about the 220th passes 16 MiB counted with the 1,100 small ones and their overheads.
    const payload = 'x'.repeat(64 * 1024)
    for (let id = 1100; pauses.length === 0 && id < 2000; id++) request(id, payload)
    expect(pauses).toHaveLength(1)
    expect(pauses[0]).toBeGreaterThan(16 * 1024 * 1024)
    expect(pauses[0]).toBeLessThanOrEqual(16 * 1024 * 1024 + 64 * 1024 + 64 + REQUEST_OVERHEAD_BYTES)
    expect(loop.maxInFlightBytes).toBe(16 * 1024 * 1024)
  })

  it('keeps a waiting request as its own bytes: the read it arrived in (a view of which its binary fields would be) is not held', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const { loop, held, request } = serving({ concurrency: 1 })
    request(0, 'running')
    let collected = false
    const registry = new FinalizationRegistry(() => (collected = true))
    ;(() => {
      // A socket read of 1 MiB carrying one request whose box is a binary field.
      const frame = encodeEnvelope({ kind: EnvelopeKind.Request, id: 1, body: { box: Buffer.alloc(32, 7) } })
      const read = Buffer.alloc(1024 * 1024)
      frame.copy(read)
      loop.receive(read.subarray(0, frame.length), 'peer-a', 'peer-a')
      registry.register(read.buffer, 'read')
    })()
    expect(loop.waiting).toBe(1)
    // msgpack's decoder keeps its last source until it decodes the next: the next frame a server reads.
    decodeEnvelope(encodeEnvelope({ kind: EnvelopeKind.Request, id: 2, body: 'next' }))
    for (let turn = 0; !collected && turn < 50; turn++) {
      gc()
      await new Promise<void>((resolve) => setTimeout(resolve, 10))
    }
    expect(collected).toBe(true)
    held[0]!.release()
    for (let turn = 0; held.length < 2 && turn < 1000; turn++) await new Promise<void>((resolve) => setImmediate(resolve))
    expect(held[1]!.request).toEqual({ box: Buffer.alloc(32, 7) })
  })

  it('with backlog 0, refuses as soon as every slot is taken', () => {
    const { replies, request, core } = serving({ concurrency: 1, backlog: 0 })
    request(1, 'runs')
    request(2, 'refused')
    expect(replies).toEqual([{ peer: 'peer-a', envelope: expect.objectContaining({ id: 2, kind: EnvelopeKind.ErrorReply }) }])
    expect(core.counters.refused).toBe(1)
  })

  it('validates its limits and takes one handler, before start', () => {
    const core = new EndpointCore('test', 'request server', ADDRESS)
    expect(() => new RequestServing(core, { maxFrameBytes: 1, concurrency: 0 }, () => {})).toThrow(
      new RangeError('concurrency must be a positive integer, got 0'),
    )
    expect(() => new RequestServing(core, { maxFrameBytes: 1, backlog: -1 }, () => {})).toThrow(
      new RangeError('backlog must be a non-negative integer, got -1'),
    )
    const loop = new RequestServing(core, { maxFrameBytes: 1 }, () => {})
    expect(() => loop.checkReady()).toThrow(InvalidOperationError)
    expect(() => loop.handle(async () => null, true)).toThrow(/must be called before start/)
    loop.handle(async () => null, false)
    expect(() => loop.handle(async () => null, false)).toThrow(/already has a handler/)
    loop.checkReady()
  })

  it('drops what is not a request envelope, with a reason', () => {
    const { core, replies, held, loop } = serving()
    loop.receive(Buffer.from([0xc1]), 'peer-a', 'peer-a')
    loop.receive(encodeEnvelope({ kind: EnvelopeKind.Reply, id: 1, body: 'a reply' }), 'peer-a', 'peer-a')
    expect(core.counters.framesDropped).toBe(2)
    expect(held).toEqual([])
    expect(replies).toEqual([])
  })

  it('past maxInFlightBytes pauses its intake, holds what arrives after (unread), and takes it in first once half is answered', async () => {
    const gate: string[] = []
    const body = 'x'.repeat(1000)
    const cost = encodeEnvelope({ kind: EnvelopeKind.Request, id: 0, body }).length + REQUEST_OVERHEAD_BYTES
    // Three requests fit; the fourth passes the bound.
    const { core, loop, replies, held, request, untilReplies } = serving({
      concurrency: 2,
      maxInFlightBytes: 3 * cost + 10,
      intake: { pause: () => gate.push('pause'), resume: () => gate.push('resume') },
    })
    const events: TransportEvent[] = []
    void (async () => {
      for await (const event of core.events()) events.push(event)
    })()
    for (let id = 0; id < 3; id++) request(id, body)
    expect(gate).toEqual([])
    expect(loop.inFlightBytes).toBe(3 * cost)
    request(3, body)
    expect(gate).toEqual(['pause'])
    // The rest of a read the transport had made: held as bytes, neither served nor refused.
    request(4, body)
    request(5, body)
    expect(loop.running + loop.waiting).toBe(4)
    expect(loop.inFlightBytes).toBe(4 * cost)
    expect(core.counters.refused).toBe(0)
    // It reads again only at half the bound (1.5 costs and a little), taking the held ones in first.
    for (let served = 0; served < 2; served++) {
      held[served]!.release()
      await untilReplies(served + 1)
    }
    expect(gate).toEqual(['pause'])
    expect(loop.inFlightBytes).toBe(cost * 2)
    held[2]!.release()
    await untilReplies(3)
    expect(gate).toEqual(['pause', 'resume'])
    expect(loop.inFlightBytes).toBe(cost * 3)
    for (let served = 3; served < 6; served++) {
      held[served]!.release()
      await untilReplies(served + 1)
    }
    expect(replies.map(({ envelope }) => [envelope.kind, envelope.id])).toEqual([0, 1, 2, 3, 4, 5].map((id) => [EnvelopeKind.Reply, id]))
    expect(loop.inFlightBytes).toBe(0)
    await new Promise<void>((resolve) => setImmediate(resolve))
    expect(events.filter((event) => event.type.startsWith('intake-'))).toEqual([
      { type: 'intake-pause', bytes: 4 * cost, limit: 3 * cost + 10 },
      { type: 'intake-resume', bytes: cost, limit: 3 * cost + 10 },
    ])
  })

  it('a held frame that fills the bound again on resuming keeps the transport paused', () => {
    const gate: string[] = []
    const body = 'x'.repeat(1000)
    const cost = encodeEnvelope({ kind: EnvelopeKind.Request, id: 0, body }).length + REQUEST_OVERHEAD_BYTES
    const { loop, held, request } = serving({ maxInFlightBytes: 2 * cost + 10, intake: { pause: () => gate.push('pause'), resume: () => gate.push('resume') } })
    for (let id = 0; id < 6; id++) request(id, body)
    expect(held).toHaveLength(3)
    expect(gate).toEqual(['pause'])
    held[0]!.release()
    held[1]!.release()
    return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      // Down to one cost: resumed, took two held frames in (three costs, past the bound again) and stayed paused.
      expect(held).toHaveLength(5)
      expect(loop.inFlightBytes).toBe(3 * cost)
      expect(gate).toEqual(['pause'])
    })
  })

  it('without an intake gate refuses a request that would pass maxInFlightBytes with ServerBusyError naming it, but serves one alone whatever its size', async () => {
    const body = 'x'.repeat(1000)
    const cost = encodeEnvelope({ kind: EnvelopeKind.Request, id: 0, body }).length + REQUEST_OVERHEAD_BYTES
    const { core, loop, replies, held, request, untilReplies } = serving({ maxInFlightBytes: cost + 10 })
    request(0, 'y'.repeat(20_000))
    expect(held).toHaveLength(1)
    request(1, body)
    expect(replies.map(({ envelope }) => envelope.id)).toEqual([1])
    expect(replies[0]!.envelope.body).toMatchObject({ name: 'ServerBusyError', context: { address: ADDRESS, maxInFlightBytes: cost + 10 } })
    expect((replies[0]!.envelope.body as { message: string }).message).toBe(
      `request server ${ADDRESS} is busy: its requests in flight hold more than ${cost + 10} bytes (maxInFlightBytes); request refused`,
    )
    expect(core.counters.refused).toBe(1)
    held[0]!.release()
    await untilReplies(2)
    request(2, body)
    expect(held).toHaveLength(2)
    expect(loop.inFlightBytes).toBe(cost)
  })

  it('without an intake gate lets a request it cannot run within maxInFlightBytes wait as its frame while that fits, in order, and refuses it only past that', async () => {
    const body = 'x'.repeat(1000)
    const frame = encodeEnvelope({ kind: EnvelopeKind.Request, id: 0, body }).length
    const cost = frame + REQUEST_OVERHEAD_BYTES
    const waits = frame + WAITING_FRAME_OVERHEAD_BYTES
    // One runs; two more fit as frames (not as running calls); the fourth fits neither way.
    const { core, loop, replies, held, request, untilReplies } = serving({ maxInFlightBytes: cost + 2 * waits + 10 })
    for (let id = 0; id < 4; id++) request(id, body)
    expect(held).toHaveLength(1)
    expect(loop.waiting).toBe(2)
    expect(loop.inFlightBytes).toBe(cost + 2 * waits)
    expect(replies.map(({ envelope }) => [envelope.id, (envelope.body as { name?: string }).name])).toEqual([[3, 'ServerBusyError']])
    expect(core.counters.refused).toBe(1)
    // A slot is free, but the frames waiting are served first: a later request that would fit waits behind them.
    held[0]!.release()
    await untilReplies(2)
    expect(held).toHaveLength(2)
    expect(loop.inFlightBytes).toBe(cost + waits)
    request(4, 'y')
    expect(loop.waiting).toBe(2)
    for (let served = 1; served < 4; served++) {
      held[served]!.release()
      await untilReplies(served + 2)
    }
    expect(held.map((call) => (call.request as string).length)).toEqual([1000, 1000, 1000, 1])
    expect(replies.map(({ envelope }) => envelope.id)).toEqual([3, 0, 1, 2, 4])
    expect(loop.inFlightBytes).toBe(0)
    expect(core.counters.refused).toBe(1)
  })

  it('without an intake gate still serves an urgent request past maxInFlightBytes (the operator in a flood of returns), counted in', async () => {
    const body = 'x'.repeat(1000)
    const cost = encodeEnvelope({ kind: EnvelopeKind.Request, id: 0, body }).length + REQUEST_OVERHEAD_BYTES
    const { core, loop, replies, held, request } = serving({
      maxInFlightBytes: cost + 10,
      urgent: (request) => (request as { cmd?: string }).cmd === 'publish',
    })
    request(0, { cmd: '_return', pad: body })
    request(1, { cmd: '_return', pad: body })
    request(2, { cmd: 'publish', pad: body })
    expect(replies.map(({ envelope }) => envelope.id)).toEqual([1])
    expect(replies[0]!.envelope.body).toMatchObject({ name: 'ServerBusyError' })
    expect(held.map(({ request }) => (request as { cmd: string }).cmd)).toEqual(['_return', 'publish'])
    expect(core.counters.refused).toBe(1)
    expect(loop.inFlightBytes).toBeGreaterThan(cost + 10)
  })

  it('does not serve again a try of a request it holds: the sender is told it is in hand (Pending), and the one reply answers it', async () => {
    const { core, replies, held, request, untilReplies } = serving()
    request(1, 'store me')
    request(1, 'store me')
    request(1, 'store me')
    expect(held).toHaveLength(1)
    expect(replies.map(({ envelope }) => envelope)).toEqual([
      { kind: EnvelopeKind.Pending, id: 1, body: null },
      { kind: EnvelopeKind.Pending, id: 1, body: null },
    ])
    expect(core.counters.coalesced).toBe(2)
    held[0]!.release()
    await untilReplies(3)
    expect(replies[2]!.envelope).toEqual({ kind: EnvelopeKind.Reply, id: 1, body: { answer: 'store me' } })
  })

  it('answers a try that comes after its request was answered with the same reply, unserved; other bytes under that id, or another peer, are served', async () => {
    const { core, replies, held, request, untilReplies } = serving()
    request(7, { cmd: '_return', jid: '1' })
    held[0]!.release()
    await untilReplies(1)
    request(7, { cmd: '_return', jid: '1' })
    expect(held).toHaveLength(1)
    expect(replies.map(({ envelope }) => envelope)).toEqual(
      [0, 1].map(() => ({ kind: EnvelopeKind.Reply, id: 7, body: { answer: { cmd: '_return', jid: '1' } } })),
    )
    expect(core.counters.coalesced).toBe(1)
    // A new request that reuses the id (its bytes differ), and the same bytes from another peer, are requests of their own.
    request(7, { cmd: '_return', jid: '2' })
    request(7, { cmd: '_return', jid: '1' }, 'peer-b')
    expect(held.map(({ request }) => request)).toEqual([
      { cmd: '_return', jid: '1' },
      { cmd: '_return', jid: '2' },
      { cmd: '_return', jid: '1' },
    ])
    expect(core.counters.coalesced).toBe(1)
  })

  it('keeps answers within answeredBytes, the oldest forgotten first; keeps neither error replies nor replies too large', async () => {
    const core = new EndpointCore('test', 'request server', ADDRESS)
    const calls: WireValue[] = []
    const loop = new RequestServing<string>(core, { maxFrameBytes: 1024 * 1024, answeredBytes: 2 * (ANSWER_OVERHEAD_BYTES + 20) }, () => {})
    loop.handle(async (request) => {
      calls.push(request)
      if (request === 'fail') throw new Error('not this time')
      return request === 'large' ? 'x'.repeat(ANSWER_KEPT_MAX_BYTES) : 'ok'
    }, false)
    const send = async (id: number, body: WireValue): Promise<void> => {
      loop.receive(encodeEnvelope({ kind: EnvelopeKind.Request, id, body }), 'peer-a', 'peer-a')
      for (let turn = 0; loop.running > 0; turn++) {
        if (turn === 1000) throw new Error(`gave up after 1000 turns of the event loop waiting for request ${id}`)
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
    }
    for (const [id, body] of [
      [1, 'a'],
      [2, 'b'],
      [3, 'c'],
      [4, 'fail'],
      [5, 'large'],
    ] as const)
      await send(id, body)
    // 2 and 3 are kept (two fit); 1 was forgotten, the error and the large reply never kept: each of those runs again.
    for (const [id, body] of [
      [3, 'c'],
      [2, 'b'],
      [1, 'a'],
      [4, 'fail'],
      [5, 'large'],
    ] as const)
      await send(id, body)
    expect(calls).toEqual(['a', 'b', 'c', 'fail', 'large', 'a', 'fail', 'large'])
    expect(core.counters.coalesced).toBe(2)
  })
})
