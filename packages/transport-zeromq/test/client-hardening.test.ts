import { createServer, type Server, type Socket } from 'node:net'
import { EnvelopeKind, encodeEnvelope } from '@brine/core'
import { deadline, watch } from '@brine/testkit'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { command, frameHeader, greeting, readyCommand } from '../src/zmtp.js'
import { HOST, track } from './helpers.js'

const transport = zeromqTransport()
const fast = { reconnect: { initial: 50, max: 100 } }
/** What our DEALER says first: its greeting and READY. */
const DEALER_HELLO = Buffer.concat([greeting(), readyCommand('DEALER')]).length

/** A "server" that runs `script` on each connection once more than the client's first `after` bytes have come. */
async function rogueServer(
  after: number | ((connection: number) => number),
  script: (socket: Socket, connection: number) => void,
): Promise<{ port: number; server: Server; connections: () => number }> {
  let connections = 0
  const server = createServer((socket) => {
    const connection = ++connections
    let received = 0
    let ran = false
    socket.on('error', () => {})
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length
      if (!ran && received > (typeof after === 'number' ? after : after(connection))) {
        ran = true
        script(socket, connection)
      }
    })
    if (typeof after === 'number' && after < 0) {
      ran = true
      script(socket, connection)
    }
  })
  await new Promise<void>((resolve) => server.listen({ host: HOST, port: 0 }, resolve))
  const address = server.address()
  return { port: typeof address === 'object' && address !== null ? address.port : 0, server, connections: () => connections }
}

const reply = (id: number, body: string): Buffer => {
  const envelope = encodeEnvelope({ kind: EnvelopeKind.Reply, id, body })
  return Buffer.concat([frameHeader(envelope.length, false), envelope])
}

async function closeServer(server: Server): Promise<void> {
  server.close()
  await new Promise((resolve) => setImmediate(resolve))
}

describe('a ZeroMQ client never dies of what its server sent', () => {
  it('drops a "server" whose greeting is not ZMTP and tries again, logging why', async () => {
    const rogue = await rogueServer(-1, (socket) => socket.write('HTTP/1.1 400 Bad Request\r\n\r\n'.padEnd(64, ' ')))
    try {
      const warnings: string[] = []
      const logger = { debug() {}, info() {}, error() {}, warning: (message: string) => warnings.push(message) }
      const client = track(transport.createRequestClient({ host: HOST, port: rogue.port, logger: logger as never, ...fast }))
      const log = watch(client)
      await client.start()
      await log.next('reconnect-attempt', 'a second attempt after the bad greeting', (event) => event.attempt === 2)
      expect(rogue.connections()).toBeGreaterThanOrEqual(2)
      expect(warnings.some((warning) => warning.includes('not a ZMTP peer'))).toBe(true)
      expect(log.seen.some((event) => event.type === 'peer-connect')).toBe(false)
    } finally {
      await closeServer(rogue.server)
    }
  })

  it('drops a server whose socket type cannot talk to a DEALER (a PUB)', async () => {
    const rogue = await rogueServer(-1, (socket) => socket.write(Buffer.concat([greeting(), readyCommand('PUB')])))
    try {
      const client = track(transport.createRequestClient({ host: HOST, port: rogue.port, ...fast }))
      const log = watch(client)
      await client.start()
      await log.next('reconnect-attempt', 'an attempt after the refused handshake', (event) => event.attempt === 2)
      expect(log.seen.some((event) => event.type === 'peer-connect')).toBe(false)
    } finally {
      await closeServer(rogue.server)
    }
  })

  it('skips an oversized reply as it streams (a frame-drop) and keeps the link for the next one', async () => {
    const rogue = await rogueServer(DEALER_HELLO, (socket) => {
      const oversized = Buffer.alloc(4096, 7)
      socket.write(Buffer.concat([frameHeader(oversized.length, false), oversized, reply(0, 'after the oversized one')]))
    })
    try {
      const client = track(transport.createRequestClient({ host: HOST, port: rogue.port, maxFrameBytes: 1024, ...fast }))
      const log = watch(client)
      rogue.server.on('connection', (socket) => socket.write(Buffer.concat([greeting(), readyCommand('ROUTER')])))
      await client.start()
      expect(await deadline(client.send('a request'), 10_000, 'the reply behind the oversized frame')).toBe('after the oversized one')
      expect((await log.next('frame-drop', 'the oversized frame')).reason).toContain('max_frame_bytes')
      expect(client.stats()).toMatchObject({ framesDropped: 1, peers: 1, reconnects: 0 })
    } finally {
      await closeServer(rogue.server)
    }
  })

  it('drops the connection on garbage after READY (reserved flags, a huge command) and reconnects', async () => {
    // The first two connections break right after the handshake; the third answers the request.
    const after = (connection: number): number => (connection < 3 ? DEALER_HELLO - 1 : DEALER_HELLO)
    const rogue = await rogueServer(after, (socket, connection) => {
      // First connection: reserved flag bits; second: a command declaring 2^40 bytes; third: behaves.
      if (connection === 1) socket.write(Buffer.from([0xf0, 0x01, 0x00]))
      else if (connection === 2) socket.write(Buffer.from([0x06, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00]))
      else socket.write(Buffer.concat([command('PING', Buffer.from([0, 10])), reply(0, 'served at last')]))
    })
    try {
      rogue.server.on('connection', (socket) => socket.write(Buffer.concat([greeting(), readyCommand('ROUTER')])))
      const client = track(transport.createRequestClient({ host: HOST, port: rogue.port, ...fast }))
      const log = watch(client)
      await client.start()
      await log.next('peer-disconnect', 'the second broken connection', (event) => event.reason?.includes('a command of') === true)
      expect(await deadline(client.send('a request'), 10_000, 'the reply on the third connection')).toBe('served at last')
      expect(rogue.connections()).toBe(3)
      expect(log.seen.filter((event) => event.type === 'peer-disconnect').map((event) => (event as { reason?: string }).reason)).toEqual([
        expect.stringContaining('reserved frame flags'),
        expect.stringContaining('a command of'),
      ])
    } finally {
      await closeServer(rogue.server)
    }
  })
})
