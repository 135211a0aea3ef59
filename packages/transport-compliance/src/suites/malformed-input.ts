import { randomBytes, randomInt } from 'node:crypto'
import { describe, expect } from 'vitest'
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
  })
}
