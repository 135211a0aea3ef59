import { randomBytes, randomInt } from 'node:crypto'
import { describe, expect } from 'vitest'
import { EnvelopeKind, encode, encodeEnvelope } from '@brine/core'
import { HOST, WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

export function malformedInputTests(harness: Harness): void {
  describe('malformed input', () => {
    test('malformed input: 10,000 garbage frames leave the server answering', async () => {
      const frames = Array.from({ length: 10_000 }, () => randomBytes(randomInt(1, 65)))
      let handled = 0
      const server = await harness.requestServer(async () => {
        handled++
        server.recorder.poke()
        return 'valid'
      })
      await harness.setup.injectRaw({ host: HOST, port: server.port }, frames)
      // Each garbage frame is either dropped or, if by chance it forms a valid request, handled: never lost.
      await server.recorder.until(
        () => server.endpoint.stats().framesDropped + handled >= frames.length,
        `all ${frames.length} garbage frames to be dropped or handled`,
        WAIT_MS * 2,
      )
      expect(server.endpoint.stats().framesDropped).toBeGreaterThan(frames.length * 0.9)
      const drop = await server.recorder.waitFor((e) => e.type === 'frame-drop', 'a frame-drop event')
      expect(drop.type === 'frame-drop' && drop.reason.length).toBeGreaterThan(0)
      const { endpoint: client } = await harness.requestClient(server.port)
      const before = handled
      expect(await client.send({ fun: 'test.ping' }, { timeout: WAIT_MS })).toBe('valid')
      expect(handled).toBe(before + 1)
    })

    test('malformed input: each kind of bad envelope is dropped with one frame-drop giving a reason', async () => {
      let handled = 0
      const server = await harness.requestServer(async (request) => {
        handled++
        return request
      })
      const garbage = [
        Uint8Array.from([0xc1]), // the never-used msgpack byte
        Uint8Array.from([0x92, 0x01]), // an array cut short
        new Uint8Array(0),
        encode('not an envelope'),
        encode({ not: 'an envelope' }),
        encode([0, -1, 'a negative id']),
        encode([7, 1, 'an unknown kind']),
        encodeEnvelope({ kind: EnvelopeKind.Reply, id: 1, body: 'a reply sent to a server' }),
        encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id: 2, body: { name: 'Error', message: 'an error reply sent to a server' } }),
      ]
      await harness.setup.injectRaw({ host: HOST, port: server.port }, garbage)
      // Counted at once, but each event reaches the recorder a tick later: wait for both.
      await server.recorder.until(
        () => server.endpoint.stats().framesDropped === garbage.length && server.recorder.count((e) => e.type === 'frame-drop') === garbage.length,
        `all ${garbage.length} bad envelopes to be dropped`,
      )
      const drops = server.recorder.events.filter((e) => e.type === 'frame-drop')
      expect(drops).toHaveLength(garbage.length)
      for (const drop of drops) expect(drop.type === 'frame-drop' && drop.reason.length).toBeGreaterThan(0)
      const { endpoint: client } = await harness.requestClient(server.port)
      expect(await client.send('still alive', { timeout: WAIT_MS })).toBe('still alive')
      expect(handled).toBe(1)
    })
  })
}
