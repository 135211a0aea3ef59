import { encode, encodeEnvelope } from '@brine/transport'
import { describe, expect, it } from 'vitest'
import { Dealer } from 'zeromq'
import { sendRawFrames, zeromqTransport } from '../src/index.js'
import { EventLog, HOST, deadline, portOf, track, until } from './helpers.js'

const transport = zeromqTransport()

async function echoServer(maxFrameBytes?: number) {
  const server = track(transport.createRequestServer({ host: HOST, port: 0, maxFrameBytes }))
  server.handle(async (request) => request)
  await server.start()
  return server
}

describe('zeromq malformed input', () => {
  it('survives 10,000 garbage messages and still answers', async () => {
    const server = await echoServer()
    const garbage: Uint8Array[] = []
    for (let i = 0; i < 10_000; i++) {
      switch (i % 5) {
        case 0:
          garbage.push(Uint8Array.from([0xc1])) // never-used msgpack byte
          break
        case 1:
          garbage.push(encode('not an envelope'))
          break
        case 2:
          garbage.push(encode([7, i, 'unknown kind']))
          break
        case 3:
          garbage.push(encodeEnvelope({ kind: 1, id: i, body: 'a reply, not a request' }))
          break
        default:
          garbage.push(Uint8Array.from([0x92, 0x01])) // truncated array
      }
    }
    await sendRawFrames({ host: HOST, port: portOf(server.address) }, garbage)
    await until(() => server.stats().framesDropped === 10_000, 'all 10,000 garbage messages dropped', 30_000)
    const client = track(transport.createRequestClient({ host: HOST, port: portOf(server.address) }))
    await client.start()
    await expect(deadline(client.send('still alive'), 10_000, 'a reply after the garbage')).resolves.toBe('still alive')
  })

  it('drops multi-frame and oversized messages with a reason', async () => {
    const server = await echoServer(64)
    const events = new EventLog(server)
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
