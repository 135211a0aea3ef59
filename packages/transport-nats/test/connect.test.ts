import { writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NatsServerProcess, deadline, freeLoopbackPort } from '@brine/testkit'
import type { TransportEvent } from '@brine/transport'
import { NatsConnectError, NatsOptionsError, natsTransport } from '../src/index.js'

const WAIT_MS = 15_000
let secured: NatsServerProcess

beforeAll(async () => {
  secured = await NatsServerProcess.start({ config: 'authorization { user: brine, password: s3cret }' })
})
afterAll(async () => {
  await secured?.close()
})

async function startError(options: Parameters<typeof natsTransport>[0]): Promise<unknown> {
  const server = natsTransport(options).createRequestServer({ host: '127.0.0.1', port: 4506 })
  server.handle(async () => 'ok')
  try {
    await server.start()
    return undefined
  } catch (error) {
    return error
  } finally {
    await server.close()
  }
}

describe('NATS connections', () => {
  it('a server that is down is a NatsConnectError naming the URL', async () => {
    const url = `nats://127.0.0.1:${await freeLoopbackPort()}`
    const error = await startError({ servers: [url] })
    expect(error).toBeInstanceOf(NatsConnectError)
    expect((error as NatsConnectError).servers).toEqual([url])
    expect((error as Error).message).toMatch(new RegExp(`cannot connect to NATS at ${url}: connection refused`))
  })

  it('refused credentials are a NatsConnectError naming the URL and the keys to check; the right ones connect', async () => {
    const error = await startError({ servers: [secured.url], user: 'brine', password: 'wrong' })
    expect(error).toBeInstanceOf(NatsConnectError)
    expect((error as Error).message).toContain(secured.url)
    expect((error as Error).message).toMatch(/refused the credentials.*nats_user\/nats_password/)
    expect(await startError({ servers: [secured.url], user: 'brine', password: 's3cret' })).toBeUndefined()
  })

  it('a missing nkey seed file is a NatsOptionsError naming nats_nkey_seed_file', async () => {
    const error = await startError({ servers: [secured.url], nkeySeedFile: join(mkdtempSync(join(tmpdir(), 'brine-nkey-')), 'absent.nk') })
    expect(error).toBeInstanceOf(NatsOptionsError)
    expect((error as Error).message).toMatch(/^nats_nkey_seed_file: cannot read/)
  })

  it('a subscriber that stops reading counts one slow-consumer episode per stretch of drops, every dropped load in dropped', async () => {
    const transport = natsTransport({ servers: [secured.url], user: 'brine', password: 's3cret', subjectPrefix: 'slow' })
    const publisher = transport.createPublishServer({ host: '127.0.0.1', port: 4505 })
    const subscriber = transport.createPublishClient({ host: '127.0.0.1', port: 4505, id: 'slow-minion', hwm: 5 })
    const events: TransportEvent[] = []
    const collecting = (async () => {
      for await (const event of publisher.events()) events.push(event)
    })()
    try {
      await publisher.start()
      await subscriber.start()
      await deadline(
        (async () => {
          while (!events.some((event) => event.type === 'peer-subscribe' && event.topic === 'slow-minion'))
            await new Promise((resolve) => setTimeout(resolve, 10))
        })(),
        WAIT_MS,
        'the subscriber to say hello',
      )
      for (let i = 0; i < 20; i++) await publisher.publish(i, { topics: ['slow-minion'] })
      await deadline(
        (async () => {
          while (subscriber.stats().dropped < 15) await new Promise((resolve) => setTimeout(resolve, 10))
        })(),
        WAIT_MS,
        '15 loads to be dropped at the hwm of 5',
      )
      expect(subscriber.stats()).toMatchObject({ queued: 5, dropped: 15, slowConsumers: 1 })
      const iterator = subscriber[Symbol.asyncIterator]()
      expect((await iterator.next()).value).toBe(0)
      // It read one: the next load fits, and a new stretch of drops is a second episode.
      await publisher.publish('fits', { topics: ['slow-minion'] })
      await publisher.publish('dropped', { topics: ['slow-minion'] })
      await deadline(
        (async () => {
          while (subscriber.stats().dropped < 16) await new Promise((resolve) => setTimeout(resolve, 10))
        })(),
        WAIT_MS,
        'the next drop',
      )
      expect(subscriber.stats().slowConsumers).toBe(2)
    } finally {
      await subscriber.close()
      await publisher.close()
      await collecting
    }
  })

  it('clients fail over among nats_servers: the first down, the second up', async () => {
    const up = await NatsServerProcess.start()
    const down = `nats://127.0.0.1:${await freeLoopbackPort()}`
    const transport = natsTransport({ servers: [down, up.url], subjectPrefix: 'failover' })
    const server = transport.createRequestServer({ host: '127.0.0.1', port: 4506 })
    server.handle(async (request) => request)
    const client = transport.createRequestClient({ host: '127.0.0.1', port: 4506, reconnect: { initial: 20, max: 200 } })
    try {
      await server.start()
      await client.start()
      expect(await client.send('through the second', { timeout: WAIT_MS })).toBe('through the second')
    } finally {
      await client.close()
      await server.close()
      await up.close()
    }
  })

  it('a client started before its broker keeps retrying with backoff and connects once the broker is up', async () => {
    const later = await NatsServerProcess.start()
    await later.stop()
    const client = natsTransport({ servers: [later.url], subjectPrefix: 'later' }).createRequestClient({
      host: '127.0.0.1',
      port: 4506,
      reconnect: { initial: 20, max: 100 },
    })
    const events: TransportEvent[] = []
    const collecting = (async () => {
      for await (const event of client.events()) events.push(event)
    })()
    try {
      await client.start()
      await deadline(
        (async () => {
          while (events.filter((event) => event.type === 'reconnect-attempt').length < 2) await new Promise((resolve) => setTimeout(resolve, 10))
        })(),
        WAIT_MS,
        'two reconnect attempts',
      )
      await later.restart()
      await deadline(
        (async () => {
          while (!events.some((event) => event.type === 'peer-connect')) await new Promise((resolve) => setTimeout(resolve, 10))
        })(),
        WAIT_MS,
        'the client to connect once the broker is up',
      )
      const delays = events.flatMap((event) => (event.type === 'reconnect-attempt' ? [event.delay] : []))
      for (const delay of delays) expect(delay).toBeLessThanOrEqual(100)
    } finally {
      await client.close()
      await collecting
      await later.close()
    }
  })
})
