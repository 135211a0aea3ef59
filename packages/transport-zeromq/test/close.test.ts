import net from 'node:net'
import { describe, it } from 'vitest'
import { zeromqTransport } from '../src/index.js'
import { portOf } from '@brine/testkit'
import { Recorder } from '@brine/transport-compliance'
import { HOST } from './helpers.js'

const transport = zeromqTransport()

function bindWithNode(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(port, HOST, () => server.close(() => resolve()))
  })
}

describe('zeromq close', () => {
  it('releases the port as soon as close() resolves', async () => {
    let port = 0
    for (let i = 0; i < 10; i++) {
      const server = transport.createPublishServer({ host: HOST, port })
      await server.start()
      port = portOf(server.address)
      const client = transport.createPublishClient({ host: HOST, port })
      const events = new Recorder(server)
      await client.start()
      await events.waitFor((e) => e.type === 'peer-connect', 'a subscriber connection')
      await server.close()
      await client.close()
      await bindWithNode(port)
    }
  })
})
