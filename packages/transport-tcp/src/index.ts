/**
 * @packageDocumentation
 * `@brine/transport-tcp` is Brine's raw TCP transport: the four roles of `@brine/transport` over
 * `node:net`, each message one msgpack value in a 4-byte big-endian length-prefixed frame, with
 * per-connection high-water marks, reconnect with backoff, and no native code.
 * The API takes milliseconds; config keys stay in Salt's seconds.
 */
import type { Transport } from '@brine/transport'
import { TcpPublishClient } from './publish-client.js'
import { TcpPublishServer } from './publish-server.js'
import { TcpRequestClient } from './request-client.js'
import { TcpRequestServer } from './request-server.js'

export { TcpPublishClient } from './publish-client.js'
export { TcpPublishServer } from './publish-server.js'
export { TcpRequestClient } from './request-client.js'
export { TcpRequestServer } from './request-server.js'

/** The TCP transport: four synchronous factories, no I/O until an endpoint's start(). */
export function tcpTransport(): Transport {
  return {
    name: 'tcp',
    createPublishServer: (options) => new TcpPublishServer(options),
    createPublishClient: (options) => new TcpPublishClient(options),
    createRequestServer: (options) => new TcpRequestServer(options),
    createRequestClient: (options) => new TcpRequestClient(options),
  }
}
