import { createServer, type Server, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { NatsServerProcess, deadline } from '@brine/testkit'
import { DirectNodeTransport, connectDirect } from '../src/direct-transport.js'
import { natsTransport } from '../src/index.js'

const WAIT_MS = 15_000
const servers: NatsServerProcess[] = []

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function startServer(): Promise<NatsServerProcess> {
  const server = await NatsServerProcess.start({ name: 'direct transport' })
  servers.push(server)
  return server
}

/** Reads chunks until their text contains `wanted`; the text read so far. */
async function readUntil(reader: AsyncIterator<Uint8Array>, wanted: string): Promise<string> {
  let text = ''
  while (!text.includes(wanted)) {
    const next = await deadline(reader.next(), WAIT_MS, `a chunk with ${wanted}`)
    expect(next.done).toBe(false)
    text += Buffer.from(next.value as Uint8Array).toString('latin1')
  }
  return text
}

describe('the NATS socket transport', () => {
  it("reads the server's INFO first, writes what it is given, and ends its reader when the server goes away", async () => {
    const server = await startServer()
    const transport = new DirectNodeTransport()
    await transport.connect({ hostname: '127.0.0.1', port: server.port, tlsName: '' }, {})
    const reader = transport[Symbol.asyncIterator]()
    expect(await readUntil(reader, '\r\n')).toMatch(/^INFO \{/)
    transport.send(Buffer.from('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n'))
    expect(await readUntil(reader, 'PONG\r\n')).toContain('PONG')
    await server.stop()
    expect(await deadline(reader.next(), WAIT_MS, 'the reader to end')).toEqual({ value: undefined, done: true })
    await deadline(transport.closed(), WAIT_MS, 'the transport to close')
    expect(transport.isClosed).toBe(true)
    // A write after the close goes nowhere and throws nothing.
    transport.send(Buffer.from('PING\r\n'))
  })

  it('a connection on it delivers a burst of messages whole and in order, as many reads as the socket makes', async () => {
    const server = await startServer()
    const connection = await connectDirect({ servers: [server.url] })
    try {
      const count = 20_000
      const received: number[] = []
      const all = new Promise<void>((resolve) => {
        connection.subscribe('burst', {
          callback: (_error, message) => {
            received.push(new DataView(message.data.buffer, message.data.byteOffset).getUint32(0))
            if (received.length === count) resolve()
          },
        })
      })
      await connection.flush()
      for (let index = 0; index < count; index++) {
        const body = Buffer.alloc(64 + (index % 200), index % 251)
        body.writeUInt32BE(index, 0)
        connection.publish('burst', body)
      }
      await deadline(all, WAIT_MS, `${count} messages`)
      expect(received).toEqual(Array.from({ length: count }, (_, index) => index))
    } finally {
      await connection.close()
    }
  })

  it("a server past its max_connections fails the connect with its -ERR as it hangs up, not the handshake's timeout", async () => {
    const server = await NatsServerProcess.start({ name: 'capped', config: 'max_connections: 1' })
    servers.push(server)
    const first = await connectDirect({ servers: [server.url] })
    try {
      // A timeout far past the test's own bound: stock nats.js waited it out and failed with a TimeoutError.
      const refused = connectDirect({ servers: [server.url], timeout: 10 * WAIT_MS })
      const error = await deadline(
        refused.then(
          () => undefined,
          (cause: unknown) => cause,
        ),
        WAIT_MS,
        'the refused connect to fail',
      )
      expect(error).toMatchObject({ name: 'ProtocolError', message: 'maximum connections exceeded' })
      // The server's one connection is unharmed.
      await first.flush()
    } finally {
      await first.close()
    }
  })

  it('a server that resets the connection in the handshake fails a server endpoint at once, naming the URL and the hang-up', async () => {
    // As a nats-server past max_connections whose -ERR the reset dropped: INFO, then a reset when CONNECT arrives.
    const fake: Server = createServer((socket) => {
      socket.write(`INFO {"server_id":"fake","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}\r\n`)
      socket.once('data', () => socket.resetAndDestroy())
    })
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve))
    const url = `nats://127.0.0.1:${(fake.address() as { port: number }).port}`
    const endpoint = natsTransport({ servers: [url], subjectPrefix: 'reset' }).createPublishServer({ host: '127.0.0.1', port: 4505 })
    try {
      const error = await deadline(
        endpoint.start().then(
          () => undefined,
          (cause: unknown) => cause,
        ),
        WAIT_MS,
        'the reset connect to fail',
      )
      expect(error).toMatchObject({ name: 'NatsConnectError' })
      expect((error as Error).message).toContain(url.replace('nats://', ''))
      expect((error as Error).message).toMatch(
        /closed the connection during the handshake \(.*(EPIPE|ECONNRESET|closed the connection).*\); it may be at its max_connections/,
      )
    } finally {
      await endpoint.close()
      await new Promise((resolve) => fake.close(resolve))
    }
  })

  it('a connection whose server sends what the protocol cannot parse is dropped and dialled again, not left hanging', async () => {
    // A hand-written server: INFO, PONG to each PING, and on its first connection a line no NATS server sends.
    const sockets: Socket[] = []
    let connections = 0
    const fake: Server = createServer((socket) => {
      sockets.push(socket)
      const first = ++connections === 1
      socket.write(`INFO {"server_id":"fake","version":"2.10.0","proto":1,"headers":true,"max_payload":1048576}\r\n`)
      socket.on('data', (data) => {
        if (!data.toString('latin1').includes('PING\r\n')) return
        socket.write('PONG\r\n')
        if (first) socket.write('XYZZY\r\n')
      })
    })
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve))
    const port = (fake.address() as { port: number }).port
    const connection = await connectDirect({ servers: [`127.0.0.1:${port}`], reconnectTimeWait: 50, maxReconnectAttempts: 20 })
    try {
      const seen: string[] = []
      const reconnected = (async () => {
        for await (const status of connection.status()) {
          seen.push(status.type)
          if (status.type === 'reconnect') return
        }
      })()
      await deadline(reconnected, WAIT_MS, 'a reconnect after the unparsable line')
      expect(seen).toContain('disconnect')
      expect(seen.at(-1)).toBe('reconnect')
      expect(connections).toBe(2)
      await deadline(connection.flush(), WAIT_MS, 'a flush on the new connection')
    } finally {
      await connection.close()
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => fake.close(resolve))
    }
  })

  it('a WebSocket URL is refused as nats.js refuses it, naming wsconnect', async () => {
    await expect(connectDirect({ servers: ['ws://127.0.0.1:4222'] })).rejects.toThrow(/wsconnect/)
  })
})
