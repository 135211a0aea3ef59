import { encodeEnvelope } from '@brine/core'
import { describe, expect, it } from 'vitest'
import { Dealer } from 'zeromq'
import { Recorder } from '@brine/transport-compliance'
import { zeromqTransport } from '../src/index.js'
import { HOST, track } from './helpers.js'

const transport = zeromqTransport()

async function echoServer(maxFrameBytes?: number) {
  const server = track(transport.createRequestServer({ host: HOST, port: 0, maxFrameBytes }))
  server.handle(async (request) => request)
  await server.start()
  return server
}

describe('zeromq malformed input', () => {
  it('drops multi-frame and oversized messages with a reason', async () => {
    const server = await echoServer(64)
    const events = new Recorder(server)
    const raw = new Dealer({ linger: 2000 })
    raw.connect(server.address)
    await raw.send([encodeEnvelope({ kind: 0, id: 1, body: 'a' }), 'second frame'])
    await raw.send(encodeEnvelope({ kind: 0, id: 2, body: 'x'.repeat(100) }))
    raw.close()
    const multi = await events.waitFor((e) => e.type === 'frame-drop', 'frame-drop for the multi-frame message')
    expect(multi).toMatchObject({ reason: expect.stringContaining('one frame per request') })
    const large = await events.waitFor((e) => e.type === 'frame-drop' && e.reason.includes('max_frame_bytes'), 'frame-drop for the oversized message')
    expect(large).toMatchObject({ size: expect.any(Number) })
    expect(server.stats().framesDropped).toBe(2)
  })
})
