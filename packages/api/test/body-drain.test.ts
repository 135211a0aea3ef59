import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { connect } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { defaultsFor, type MasterConfig } from '@brine/config'
import { deadline } from '@brine/transport-compliance'
import { drainUnreadBody, type DrainBounds } from '../src/body-drain.js'
import { apiSettings } from '../src/config.js'
import { ApiMasterClient } from '../src/api-master-client.js'
import { createApiApp } from '../src/server.js'
import { EventStreams } from '../src/sse.js'

const MIB = 1024 * 1024
const closers: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

/** The API without a master, listening on a free port of 127.0.0.1 (max_request_body_size: Salt's 1 MiB). */
async function listeningApi(): Promise<number> {
  const opts = {
    ...defaultsFor('master'),
    sock_dir: '/nonexistent/brine-sock',
    netapi_enable_clients: ['local'],
    rest_cherrypy: { port: 0, disable_ssl: true },
  } as unknown as MasterConfig
  const { settings } = apiSettings(opts)
  const link = new ApiMasterClient(opts)
  const streams = new EventStreams({ events: link.events, bufferBytes: 1024, maxStreams: 1, recheckMs: 1000, tokenLive: async () => true })
  const app = await createApiApp({ link, settings, streams })
  await app.listen({ host: '127.0.0.1', port: 0 })
  closers.push(async () => {
    await app.close()
    await link.close()
  })
  return (app.server.address() as AddressInfo).port
}

/** What a client that sends its whole body before it looks at the answer saw: bytes sent, its first socket error, the answer. */
interface Exchange {
  sent: number
  error: string | undefined
  answer: string
}

/**
 * POSTs `bytes` bytes of body to / as JSON over a raw socket (declared by Content-Length, or chunked), writing on until
 * the whole body is sent (then ending its side) or the socket fails or closes; resolves once the socket is closed.
 * Many clients send the whole body before they read (Python's http.client): a write that fails is all they see.
 */
function sendWholeBody(port: number, bytes: number, framing: 'length' | 'chunked', declared = bytes): Promise<Exchange> {
  return deadline(
    new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1')
      const received: Buffer[] = []
      let sent = 0
      let error: string | undefined
      socket.on('data', (chunk: Buffer) => received.push(chunk))
      socket.on('error', (failure: NodeJS.ErrnoException) => (error ??= failure.code ?? failure.message))
      socket.on('close', () => resolve({ sent, error, answer: Buffer.concat(received).toString('utf8') }))
      const piece = Buffer.alloc(64 * 1024, 0x20)
      const pump = (): void => {
        while (sent < bytes && !socket.destroyed) {
          const next = piece.subarray(0, Math.min(piece.length, bytes - sent))
          sent += next.length
          const framed = framing === 'chunked' ? Buffer.concat([Buffer.from(`${next.length.toString(16)}\r\n`), next, Buffer.from('\r\n')]) : next
          if (!socket.write(framed)) return void socket.once('drain', pump)
        }
        if (sent >= bytes && !socket.destroyed) socket.end(framing === 'chunked' ? '0\r\n\r\n' : '')
      }
      socket.once('connect', () => {
        const length = framing === 'chunked' ? 'transfer-encoding: chunked' : `content-length: ${declared}`
        socket.write(`POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${length}\r\n\r\n`)
        pump()
      })
    }),
    30_000,
    'the exchange with the API',
  )
}

const TOO_LARGE = JSON.stringify({ status: 413, return: 'request body is larger than rest_cherrypy.max_request_body_size (1048576 bytes)' })

describe('a body the API refuses before reading it', () => {
  it('is read within bounds before the 413, so a client that sends it all first gets the answer, not a broken pipe', async () => {
    const port = await listeningApi()
    // Declared: fastify refuses it unread. Chunked: fastify stops reading at the limit. 8 MiB: more than the loopback
    // socket's buffers hold, so without the drain the client is still writing when the API closes.
    for (const framing of ['length', 'chunked'] as const) {
      const exchange = await sendWholeBody(port, 8 * MIB, framing)
      expect(exchange.error, framing).toBeUndefined()
      expect(exchange.sent, framing).toBe(8 * MIB)
      expect(exchange.answer, framing).toMatch(/^HTTP\/1\.1 413 /)
      expect(exchange.answer.endsWith(`\r\n\r\n${TOO_LARGE}`), framing).toBe(true)
    }
  })

  it('is not read when its declared length is far past the bounds: the sender is cut off', async () => {
    const port = await listeningApi()
    // 1 GiB declared, 64 MiB written at most (the API reads up to 16 MiB of a body declared within its bounds).
    const exchange = await sendWholeBody(port, 64 * MIB, 'length', 1024 * MIB)
    expect(exchange.sent).toBeLessThan(64 * MIB)
  })
})

describe('drainUnreadBody', () => {
  /** A server whose handler drains each request within `bounds`; `next()` resolves with the next request's result. */
  async function drainingServer(bounds: DrainBounds): Promise<{ port: number; next: () => Promise<boolean> }> {
    const results: Array<Promise<boolean>> = []
    const waiting: Array<(result: Promise<boolean>) => void> = []
    const server: Server = createServer((request: IncomingMessage, response) => {
      const drained = drainUnreadBody(request, bounds)
      void drained.then(() => response.end())
      const waiter = waiting.shift()
      if (waiter === undefined) results.push(drained)
      else waiter(drained)
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    closers.push(async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    })
    const next = (): Promise<boolean> => {
      const ready = results.shift()
      const result = ready ?? new Promise<Promise<boolean>>((resolve) => waiting.push(resolve)).then((drained) => drained)
      return deadline(result, 5000, 'a request at the server and its drain')
    }
    return { port: (server.address() as AddressInfo).port, next }
  }

  /** Sends a raw request head and then `body`; the socket stays open until the test ends. */
  async function rawRequest(port: number, head: string, body: string): Promise<void> {
    const socket = connect(port, '127.0.0.1')
    await once(socket, 'connect')
    socket.on('error', () => {})
    closers.push(async () => void socket.destroy())
    socket.write(`POST / HTTP/1.1\r\nhost: 127.0.0.1\r\n${head}\r\n`)
    socket.write(body)
  }

  it('resolves true once the whole body is in, and false when it stalls past the time bound or runs past the byte bound', async () => {
    const { port, next } = await drainingServer({ bytes: 1000, ms: 200 })
    await rawRequest(port, 'content-length: 500\r\n', 'x'.repeat(500))
    expect(await next()).toBe(true)
    // 10 of the 500 bytes declared, then nothing.
    await rawRequest(port, 'content-length: 500\r\n', 'x'.repeat(10))
    expect(await next()).toBe(false)
    // Chunks past the 1,000 bytes, without an end.
    await rawRequest(port, 'transfer-encoding: chunked\r\n', `${(2000).toString(16)}\r\n${'x'.repeat(2000)}\r\n`)
    expect(await next()).toBe(false)
    // Declared past the bound: not read at all.
    await rawRequest(port, 'content-length: 5000\r\n', 'x'.repeat(10))
    expect(await next()).toBe(false)
  })
})
