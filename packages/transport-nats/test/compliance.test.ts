import { connect } from '@nats-io/transport-node'
import { afterAll, expect } from 'vitest'
import { describeTransportCompliance } from '@brine/transport-compliance'
import { NatsServerProcess, deadline } from '@brine/testkit'
import { natsTransport } from '../src/index.js'
import { connectRawNats, sendRawNats, type RawBroker } from './raw.js'

/** One nats-server for this file, started on first use; the reconnect case stops and restarts it. */
let server: NatsServerProcess | undefined
const broker: RawBroker = { url: () => server!.url, prefix: `compliance${process.pid}` }

afterAll(async () => {
  await server?.close()
})

/** Connections past nats-server's max_connections are refused, naming the URL; the servers keep serving. */
async function connectionCaps(): Promise<void> {
  const capped = await NatsServerProcess.start({ config: 'max_connections: 4' })
  const transport = natsTransport({ servers: [capped.url], subjectPrefix: 'caps' })
  const request = transport.createRequestServer({ host: '127.0.0.1', port: 0 })
  request.handle(async () => 'in')
  const others = []
  try {
    await request.start()
    const port = Number(/:(\d+)$/.exec(request.address)![1])
    for (let i = 0; i < 3; i++) others.push(await connect({ servers: capped.url, reconnect: false }))
    const refused = transport.createPublishServer({ host: '127.0.0.1', port })
    const error = await refused.start().catch((e: unknown) => e)
    await refused.close()
    expect((error as Error).name).toBe('NatsConnectError')
    expect((error as Error).message).toContain(capped.url.replace('nats://', ''))
    // The server's own reason, as it refused: not the handshake's timeout run out.
    expect((error as Error).message).toMatch(/at its max_connections \(ProtocolError: maximum connections exceeded\)/)
    await others.pop()!.close()
    const client = transport.createRequestClient({ host: '127.0.0.1', port })
    await client.start()
    try {
      expect(await client.send('hello', { timeout: 15_000 })).toBe('in')
    } finally {
      await client.close()
    }
  } finally {
    await Promise.all(others.map((connection) => connection.close()))
    await request.close()
    await capped.close()
  }
}

describeTransportCompliance({
  name: 'nats',
  create: async () => {
    server ??= await NatsServerProcess.start()
    return natsTransport({ servers: [server.url], subjectPrefix: broker.prefix })
  },
  injectRaw: (target, frames) => sendRawNats(broker, target, frames),
  connectRaw: (target, options) => connectRawNats(broker, target, options),
  broker: {
    stopBroker: () => server!.stop(),
    startBroker: () => server!.restart(),
    unreachable: () => {
      const url = `nats://127.0.0.1:1`
      return { transport: natsTransport({ servers: [url], subjectPrefix: broker.prefix }), url }
    },
    connectionCaps: () => deadline(connectionCaps(), 60_000, 'the connection-cap case on a capped nats-server'),
  },
})
