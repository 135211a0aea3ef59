import { createServer } from 'node:net'
import type { BrokerOptions, EndpointOptions } from '@brine/transport'
import { NatsOptionsError } from './errors.js'
import { resolveBroker, type ResolvedBroker } from './options.js'
import { Subjects } from './subjects.js'

/** `nats://a:4222,b:4222/brine:4506`: the servers, then the service (prefix and port) on them. */
export function natsAddress(broker: ResolvedBroker, port: number): string {
  const servers = broker.servers.map((url) => url.replace(/^[a-z]+:\/\//, '').replace(/^[^@]*@/, ''))
  return `nats://${servers.join(',')}/${broker.subjectPrefix}:${port}`
}

export interface Service {
  broker: ResolvedBroker
  address: string
}

/**
 * Every endpoint's service; a unix socket `path` is refused, synchronously in the factory: a NATS endpoint is a
 * client of the broker and owns no socket to put there (the transport says so with `peerSockets: false`).
 */
export function serviceOf(options: EndpointOptions, defaults: BrokerOptions): Service {
  if (options.path !== undefined) {
    throw new NatsOptionsError(
      'path',
      `a NATS endpoint is a client of the broker and has no socket of its own to bind or reach at ${options.path}; use host and port (the subjects)`,
    )
  }
  const broker = resolveBroker(defaults, options.broker)
  return { broker, address: natsAddress(broker, options.port) }
}

/**
 * A server's port: the one configured, or for port 0 a number the kernel hands out as a free port,
 * so two servers started on port 0 in one process never share subjects (nothing stays bound).
 */
export async function servicePort(port: number): Promise<number> {
  if (port !== 0) return port
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const address = probe.address()
      const taken = typeof address === 'object' && address !== null ? address.port : 0
      probe.close(() => resolve(taken))
    })
  })
}

export function subjectsOf(broker: ResolvedBroker, port: number): Subjects {
  return new Subjects(broker.subjectPrefix, port)
}

/** A NATS message's bytes as a Buffer, without a copy. */
export function bytesOf(data: Uint8Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength)
}
