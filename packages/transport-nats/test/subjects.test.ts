import { connect, type NatsConnection } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NatsServerProcess, deadline, freeLoopbackPort } from '@brine/testkit'
import { decode, type WireValue } from '@brine/core'
import { NatsOptionsError, Subjects, natsTransport } from '../src/index.js'

const WAIT_MS = 15_000
let server: NatsServerProcess
let spy: NatsConnection

beforeAll(async () => {
  server = await NatsServerProcess.start()
  spy = await connect({ servers: server.url })
})
afterAll(async () => {
  await spy?.close()
  await server?.close()
})

/** What a raw subscriber on `subject` sees, subject by subject. */
function watch(subject: string): Array<{ subject: string; data: Uint8Array }> {
  const seen: Array<{ subject: string; data: Uint8Array }> = []
  spy.subscribe(subject, { callback: (_error, message) => void seen.push({ subject: message.subject, data: message.data }) })
  return seen
}

/** Every subscription the monitored server holds, once there are any (flush is asynchronous to the monitor). */
async function subscriptionsOf(httpPort: number): Promise<string[]> {
  for (;;) {
    const response = await fetch(`http://127.0.0.1:${httpPort}/connz?subs=1`)
    const body = (await response.json()) as { connections?: Array<{ subscriptions_list?: string[] }> }
    const subjects = (body.connections ?? []).flatMap((connection) => connection.subscriptions_list ?? [])
    if (subjects.length >= 3) return subjects
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function until(condition: () => boolean, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10))
    })(),
    WAIT_MS,
    what,
  )
}

describe('NATS subjects', () => {
  it('a targeted publish is carried only on the targeted minion subject; a broadcast only on the fleet subject', async () => {
    const transport = natsTransport({ servers: [server.url], subjectPrefix: 'fleet-a' })
    const publisher = transport.createPublishServer({ host: '127.0.0.1', port: 4505 })
    const other = natsTransport({ servers: [server.url], subjectPrefix: 'fleet-b' }).createPublishServer({ host: '127.0.0.1', port: 4505 })
    const everything = watch('fleet-a.>')
    const otherFleet = watch('fleet-b.>')
    await spy.flush()
    const clients = ['web1.example.com', 'db 1'].map((id) => transport.createPublishClient({ host: '127.0.0.1', port: 4505, id }))
    try {
      await publisher.start()
      await other.start()
      const loads: WireValue[][] = [[], []]
      clients.forEach(
        (client, index) =>
          void (async () => {
            for await (const load of client) loads[index]!.push(load)
          })(),
      )
      await Promise.all(clients.map((client) => client.start()))
      await until(() => publisher.stats().subscriptions === 4, 'both minions to say hello')
      const mark = everything.length
      await publisher.publish('only web1', { topics: ['web1.example.com'] })
      await publisher.publish('to all')
      await until(() => loads[0]!.length === 2 && loads[1]!.length === 1, 'the loads to arrive')
      const publishes = (): typeof everything => everything.slice(mark).filter((message) => message.subject.includes('.pub.'))
      await until(() => publishes().length >= 2, 'the spy to see both publishes')
      const carried = publishes()
      expect(carried.map((message) => [message.subject, decode(message.data)])).toEqual([
        ['fleet-a.4505.pub.m.web1.example.com', 'only web1'],
        ['fleet-a.4505.pub.all', 'to all'],
      ])
      expect(loads).toEqual([['only web1', 'to all'], ['to all']])
      // The other fleet on the same broker saw nothing of it, whatever its port.
      expect(otherFleet.filter((message) => message.subject.includes('.pub.'))).toEqual([])
    } finally {
      await Promise.all([...clients.map((client) => client.close()), publisher.close(), other.close()])
    }
  })

  it('a minion client subscribes to its own subject and the broadcast subject, nothing else', async () => {
    // The server's own view: its monitoring endpoint lists each connection's subscriptions.
    const httpPort = await freeLoopbackPort()
    const monitored = await NatsServerProcess.start({ config: `http: 127.0.0.1:${httpPort}` })
    const client = natsTransport({ servers: [monitored.url], subjectPrefix: 'fleet-c' }).createPublishClient({ host: '127.0.0.1', port: 4505, id: 'minion-7' })
    try {
      await client.start()
      await until(() => client.stats().peers === 1, 'the client to connect')
      const subjects = await deadline(subscriptionsOf(httpPort), WAIT_MS, 'the monitor to list the subscriptions')
      expect(subjects.sort()).toEqual(['fleet-c.4505.hello.ask', 'fleet-c.4505.pub.all', 'fleet-c.4505.pub.m.minion-7'])
    } finally {
      await client.close()
      await monitored.close()
    }
  })

  it('ids a subject cannot hold are encoded, and prefixes with wildcards are refused with a typed error', () => {
    const subjects = new Subjects('brine', 4505)
    expect(subjects.minion('web1.example.com')).toBe('brine.4505.pub.m.web1.example.com')
    expect(subjects.minion('a*b')).toBe(`brine.4505.pub.x.${Buffer.from('a*b').toString('base64url')}`)
    expect(subjects.minion('a..b')).toMatch(/^brine\.4505\.pub\.x\./)
    expect(() => new Subjects('brine.>', 4505)).toThrow(NatsOptionsError)
    expect(() => natsTransport({ subjectPrefix: 'a b' }).createRequestClient({ host: '127.0.0.1', port: 1 })).toThrow(
      /nats_subject_prefix: 'a b' is not a subject prefix/,
    )
  })
})
