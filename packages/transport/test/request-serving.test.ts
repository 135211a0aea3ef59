import { describe, expect, it } from 'vitest'
import { EndpointCore, RequestServing } from '../src/index.js'
import { EnvelopeKind, InvalidOperationError, decodeEnvelope, encodeEnvelope, type Envelope, type WireValue } from '@brine/core'

const ADDRESS = 'tcp://127.0.0.1:4506'

/** A serving loop whose replies are collected, decoded, per peer; handler calls wait until released. */
function serving(options: { concurrency?: number; backlog?: number } = {}) {
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
})
