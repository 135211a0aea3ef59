import { connect } from 'node:net'
import { deadline, portOf } from '@brine/testkit'
import { Recorder } from '@brine/transport-compliance'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { greeting, readyCommand } from '../src/zmtp.js'
import { HOST, track } from './helpers.js'

const transport = zeromqTransport()

async function requestServer() {
  const server = track(transport.createRequestServer({ host: HOST, port: 0 }))
  server.handle(async (request) => request)
  const events = new Recorder(server)
  await server.start()
  return { server, events }
}

/** Writes `bytes` on a plain socket and resolves once the server has closed it. */
function sendAndWaitForClose(port: number, bytes: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port }, () => socket.write(bytes))
    socket.on('data', () => {})
    socket.on('error', () => {})
    socket.once('close', () => resolve())
  })
}

describe('zeromq servers speak ZMTP 3.0', () => {
  it('drop a peer that is not ZMTP, or offers another mechanism, saying why', async () => {
    const { server, events } = await requestServer()
    const port = portOf(server.address)
    await deadline(sendAndWaitForClose(port, Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.padEnd(64, ' '))), 10_000, 'an HTTP client to be dropped')
    const plain = Buffer.from(greeting())
    plain.write('PLAIN', 12, 'latin1')
    await deadline(sendAndWaitForClose(port, plain), 10_000, 'a PLAIN peer to be dropped')
    await events.until(() => server.stats().peersDropped === 2, 'two peer-drop events')
    const reasons = events.events.flatMap((event) => (event.type === 'peer-drop' ? [event.reason] : []))
    expect(reasons).toEqual(['ZMTP: not a ZMTP peer (bad signature)', 'ZMTP: mechanism "PLAIN" is not supported (NULL)'])
  })

  it('drop a peer whose socket type cannot talk to theirs: a SUB at the ROUTER', async () => {
    const { server, events } = await requestServer()
    const port = portOf(server.address)
    await deadline(sendAndWaitForClose(port, Buffer.concat([greeting(), readyCommand('SUB')])), 10_000, 'a SUB to be dropped')
    const drop = await events.waitFor((event) => event.type === 'peer-drop', 'the SUB to be dropped')
    expect(drop).toMatchObject({ reason: 'a ZeroMQ SUB cannot talk to a ROUTER (expected DEALER)' })
    // A raw DEALER handshake is answered with our greeting and READY, and the server keeps serving.
    await deadline(
      new Promise<void>((resolve) => {
        const socket = connect({ host: HOST, port }, () => socket.write(Buffer.concat([greeting(), readyCommand('DEALER')])))
        let received = Buffer.alloc(0)
        socket.on('data', (chunk: Buffer) => {
          received = Buffer.concat([received, chunk])
          if (received.length >= 64 + 2 + received[65]!) {
            expect(received.subarray(64).toString('latin1')).toContain('Socket-Type\u0000\u0000\u0000\u0006ROUTER')
            socket.destroy()
            resolve()
          }
        })
      }),
      10_000,
      'the server’s half of the handshake',
    )
  })
})
