import { createServer, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { deadline } from '@brine/testkit'
import { zeromqTransport } from '../src/index.js'
import { HOST, track } from './helpers.js'

const transport = zeromqTransport()

/** A TCP server that accepts connections and never says a byte: a rogue or wedged "master". */
async function silentServer(): Promise<{
  port: number
  accepted: Socket[]
  closes: number
  close(): Promise<void>
  changed(check: () => boolean, what: string): Promise<void>
}> {
  const accepted: Socket[] = []
  const waiters = new Set<() => void>()
  const poke = (): void => {
    for (const waiter of waiters) waiter()
  }
  const state = { closes: 0 }
  const server = createServer((socket) => {
    accepted.push(socket)
    socket.on('error', () => {})
    // Read (and ignore) the client's greeting, so its closing the connection is seen.
    socket.on('data', () => {})
    socket.on('close', () => {
      state.closes++
      poke()
    })
    poke()
  })
  await new Promise<void>((resolve) => server.listen({ host: HOST, port: 0 }, resolve))
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  return {
    port,
    accepted,
    get closes() {
      return state.closes
    },
    close: async () => {
      for (const socket of accepted) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
    changed: (check, what) => {
      if (check()) return Promise.resolve()
      let waiter: (() => void) | undefined
      return deadline(
        new Promise<void>((resolve) => {
          waiter = () => {
            if (check()) resolve()
          }
          waiters.add(waiter)
        }),
        15_000,
        what,
      ).finally(() => waiters.delete(waiter!))
    },
  }
}

describe("zeromq client handshake deadline (handshakeTimeout, as libzmq's ZMQ_HANDSHAKE_IVL)", () => {
  it('drops a server that accepts and never completes the ZMTP greeting, and tries again', async () => {
    const server = await silentServer()
    try {
      const client = track(transport.createRequestClient({ host: HOST, port: server.port, handshakeTimeout: 200, reconnect: { initial: 50, max: 100 } }))
      await client.start()
      // The client closes the half-greeted connection at its handshake timeout, then reconnects.
      await server.changed(() => server.closes >= 1 && server.accepted.length >= 2, 'the client to drop the silent server and connect again')
      expect(server.closes).toBeGreaterThanOrEqual(1)
      await client.close()
    } finally {
      await server.close()
    }
  })
})
