import { createServer, connect, type Server } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { EnvelopeKind, decodeEnvelope, encodeEnvelope, FrameReader } from '@brine/core'
import { TcpRequestServer } from '../src/index.js'
import { Cleanup, deadline, portOf } from './helpers.js'
import { sendRawFrames } from './raw.js'

const cleanup = new Cleanup()
const servers: Server[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))))
  await cleanup.run()
})

/** A plain node:net server that records every byte each connection sent, once it has ended. */
async function recordingServer(): Promise<{ port: number; received: Promise<Buffer> }> {
  let done!: (bytes: Buffer) => void
  const received = new Promise<Buffer>((resolve) => (done = resolve))
  const server = createServer((socket) => {
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('end', () => done(Buffer.concat(chunks)))
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('server did not bind a TCP port')
  return { port: address.port, received }
}

describe('sendRawFrames', () => {
  it('writes each body behind a 4-byte big-endian length and resolves after the socket closed', async () => {
    const { port, received } = await recordingServer()
    await deadline(sendRawFrames({ host: '127.0.0.1', port }, [new Uint8Array([1, 2, 3]), new Uint8Array(0)]), 5000, 'raw frames to be sent')
    const bytes = await deadline(received, 5000, 'the recording server to see the end')
    expect([...bytes]).toEqual([0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0])
  })

  it('rejects when nothing listens', async () => {
    const { port } = await recordingServer()
    await new Promise((resolve) => servers.pop()!.close(resolve))
    await expect(sendRawFrames({ host: '127.0.0.1', port }, [new Uint8Array([1])])).rejects.toMatchObject({ code: 'ECONNREFUSED' })
  })
})

describe('framing over a real socket', () => {
  it('reassembles a request written one byte at a time, and two requests in one chunk', async () => {
    const server = cleanup.add(new TcpRequestServer({ host: '127.0.0.1', port: 0 }))
    server.handle(async (request) => ({ echo: request }))
    await server.start()
    const socket = connect({ host: '127.0.0.1', port: portOf(server.address) })
    socket.on('error', () => {})
    const replies: unknown[] = []
    let gotAll!: () => void
    const allReplies = new Promise<void>((resolve) => (gotAll = resolve))
    const reader = new FrameReader({
      onFrame: (body) => {
        replies.push(decodeEnvelope(body))
        if (replies.length === 3) gotAll()
      },
      onOversize: () => {},
    })
    socket.on('data', (chunk: Buffer) => reader.push(chunk))
    await deadline(new Promise((resolve) => socket.once('connect', resolve)), 5000, 'raw socket to connect')
    const framed = (id: number, body: unknown): Buffer => {
      const envelope = encodeEnvelope({ kind: EnvelopeKind.Request, id, body })
      const out = Buffer.alloc(4 + envelope.length)
      out.writeUInt32BE(envelope.length, 0)
      envelope.copy(out, 4)
      return out
    }
    const slow = framed(1, 'byte by byte')
    for (const byte of slow) {
      await new Promise<void>((resolve) => socket.write(Buffer.from([byte]), () => resolve()))
    }
    socket.write(Buffer.concat([framed(2, 'two'), framed(3, 'three')]))
    await deadline(allReplies, 5000, 'three replies')
    socket.destroy()
    expect(replies).toEqual(
      expect.arrayContaining([
        { kind: EnvelopeKind.Reply, id: 1, body: { echo: 'byte by byte' } },
        { kind: EnvelopeKind.Reply, id: 2, body: { echo: 'two' } },
        { kind: EnvelopeKind.Reply, id: 3, body: { echo: 'three' } },
      ]),
    )
  })
})
