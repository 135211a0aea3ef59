import net from 'node:net'
import { AddressInUseError, ClosedError, InvalidOperationError } from '@brine/transport'
import { describe, expect, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { EventLog, HOST, deadline, portOf, track } from './helpers.js'

const transport = zeromqTransport()

function bindWithNode(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(port, HOST, () => server.close(() => resolve()))
  })
}

describe('zeromq close', () => {
  it('is idempotent, resolves closed and ends the event stream', async () => {
    const server = transport.createRequestServer({ host: HOST, port: 0 })
    server.handle(async () => null)
    await server.start()
    const drained = (async () => {
      const seen: string[] = []
      for await (const event of server.events()) seen.push(event.type)
      return seen
    })()
    await Promise.all([server.close(), server.close()])
    await server.close()
    await deadline(server.closed, 1000, 'closed to resolve')
    expect(await deadline(drained, 1000, 'the event stream to end')).toContain('listening')
  })

  it('releases the port as soon as close() resolves', async () => {
    let port = 0
    for (let i = 0; i < 10; i++) {
      const server = transport.createPublishServer({ host: HOST, port })
      await server.start()
      port = portOf(server.address)
      const client = transport.createPublishClient({ host: HOST, port })
      const events = new EventLog(server)
      await client.start()
      await events.waitFor((e) => e.type === 'peer-connect', 'a subscriber connection')
      await server.close()
      await client.close()
      await bindWithNode(port)
    }
  })

  it('names host:port when the port is taken', async () => {
    const first = track(transport.createRequestServer({ host: HOST, port: 0 }))
    first.handle(async () => null)
    await first.start()
    const port = portOf(first.address)
    const second = track(transport.createRequestServer({ host: HOST, port }))
    second.handle(async () => null)
    const error = await second.start().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(AddressInUseError)
    expect((error as AddressInUseError).address).toBe(`${HOST}:${port}`)
  })

  it('rejects pending and later sends with ClosedError', async () => {
    const server = track(transport.createRequestServer({ host: HOST, port: 0 }))
    server.handle(() => new Promise(() => {}))
    await server.start()
    const client = transport.createRequestClient({ host: HOST, port: portOf(server.address) })
    await client.start()
    const pending = client.send('never answered', { timeout: 30_000 })
    await client.close()
    await expect(pending).rejects.toBeInstanceOf(ClosedError)
    await expect(client.send('too late')).rejects.toBeInstanceOf(ClosedError)
    await expect(client.start()).rejects.toBeInstanceOf(ClosedError)
  })

  it('ends a waiting publish iterator and refuses publishes after close', async () => {
    const server = transport.createPublishServer({ host: HOST, port: 0 })
    await server.start()
    const client = transport.createPublishClient({ host: HOST, port: portOf(server.address) })
    await client.start()
    const next = client[Symbol.asyncIterator]().next()
    await client.close()
    await expect(deadline(next, 1000, 'the iterator to end')).resolves.toEqual({ value: undefined, done: true })
    await server.close()
    await expect(server.publish('late')).rejects.toBeInstanceOf(ClosedError)
  })

  it('closes endpoints that were never started', async () => {
    for (const endpoint of [
      transport.createPublishServer({ host: HOST, port: 0 }),
      transport.createPublishClient({ host: HOST, port: 1 }),
      transport.createRequestServer({ host: HOST, port: 0 }),
      transport.createRequestClient({ host: HOST, port: 1 }),
    ]) {
      await endpoint[Symbol.asyncDispose]()
      await deadline(endpoint.closed, 1000, 'closed to resolve')
    }
  })

  it('requires handle() once, before start()', async () => {
    const server = track(transport.createRequestServer({ host: HOST, port: 0 }))
    await expect(server.start()).rejects.toBeInstanceOf(InvalidOperationError)
    const other = track(transport.createRequestServer({ host: HOST, port: 0 }))
    other.handle(async () => null)
    expect(() => other.handle(async () => null)).toThrow(InvalidOperationError)
    await other.start()
    await expect(other.start()).rejects.toBeInstanceOf(InvalidOperationError)
  })
})
