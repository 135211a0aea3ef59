/**
 * nats.js writes to its socket without backpressure: the publish server waits for the broker to have read
 * what it sent (past 4 MiB since it last had) instead of letting its own memory hold the excess. Shown with a
 * broker that is paused (SIGSTOP): a targeted publish larger than that does not resolve until it resumes,
 * and then every message reaches its minion's subject.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NatsServerProcess, deadline } from '@brine/testkit'
import { natsTransport, Subjects } from '../src/index.js'

const WAIT_MS = 30_000
let broker: NatsServerProcess
let raw: NatsConnection | undefined

beforeAll(async () => {
  broker = await NatsServerProcess.start()
})
afterAll(async () => {
  if (broker !== undefined && broker.pid > 0) process.kill(broker.pid, 'SIGCONT')
  await raw?.close()
  await broker?.close()
})

describe('NATS publish backpressure', () => {
  it('a targeted publish past the outbound bound waits for a paused broker, then delivers every message', async () => {
    const prefix = 'backpressure'
    const transport = natsTransport({ servers: [broker.url], subjectPrefix: prefix })
    const publisher = transport.createPublishServer({ host: '127.0.0.1', port: 4505 })
    await publisher.start()
    try {
      // A raw subscriber on every minion subject counts what the broker delivers.
      raw = await connect({ servers: [broker.url] })
      const subjects = new Subjects(prefix, 4505)
      const targets = Array.from({ length: 64 }, (_, index) => `minion-${index}`)
      const received = new Set<string>()
      raw.subscribe(`${subjects.base}.pub.m.*`, {
        callback: (_error, message) => {
          received.add(message.subject)
        },
      })
      await raw.flush()
      // 64 messages of 256 KiB: 16 MiB, four times the bound.
      const payload = { blob: Buffer.alloc(256 * 1024, 7) }

      process.kill(broker.pid, 'SIGSTOP')
      let settled = false
      const publishing = publisher.publish(payload, { topics: targets }).finally(() => (settled = true))
      // However long the broker stays paused, the publish stays unresolved: what it has not read is not piled up here.
      await new Promise((resolve) => setTimeout(resolve, 1500))
      expect(settled).toBe(false)
      process.kill(broker.pid, 'SIGCONT')

      await deadline(publishing, WAIT_MS, 'the publish to resolve once the broker resumed')
      await deadline(
        (async () => {
          while (received.size < targets.length) await new Promise((resolve) => setTimeout(resolve, 50))
        })(),
        WAIT_MS,
        `all ${targets.length} minion subjects to receive the publish`,
      )
      expect([...received].sort()).toEqual(targets.map((id) => subjects.minion(id)).sort())
    } finally {
      await publisher.close()
    }
  })
})
