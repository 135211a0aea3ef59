/**
 * @packageDocumentation
 * `@brine/transport-nats` is Brine's NATS transport: the four roles of `@brine/transport` over a NATS
 * server or cluster (`@nats-io/transport-node`, core NATS). Publishes go to one subject per minion or to
 * the fleet's broadcast subject, requests to a queue group the masters serve, all under a configurable
 * subject prefix; messages over the server's `max_payload` travel as chunks reassembled within
 * `max_frame_bytes`; clients fail over among `nats_servers` with jittered backoff.
 * The API takes milliseconds; config keys stay in Salt's seconds.
 */
import type { BrokerOptions, Transport } from '@brine/transport'
import { NatsPublishClient } from './publish-client.js'
import { NatsPublishServer } from './publish-server.js'
import { NatsRequestClient } from './request-client.js'
import { NatsRequestServer } from './request-server.js'

export { NatsPublishClient } from './publish-client.js'
export { NatsPublishServer } from './publish-server.js'
export { NatsRequestClient } from './request-client.js'
export { NatsRequestServer } from './request-server.js'
export { NatsConnectError, NatsOptionsError } from './errors.js'
export { Subjects, DEFAULT_SUBJECT_PREFIX, checkSubjectPrefix } from './subjects.js'
export { DEFAULT_NATS_SERVERS } from './options.js'
export { CHUNK_HEADER_BYTES, CHUNK_MARK, publishChunked } from './chunks.js'

/**
 * The NATS transport: four synchronous factories, no I/O until an endpoint's start(). `defaults`
 * apply to every endpoint; an endpoint's own `broker` options (from its daemon's config) win.
 */
export function natsTransport(defaults: BrokerOptions = {}): Transport {
  return {
    name: 'nats',
    // Servers here are the broker's clients: no per-peer socket, so no local unix channel (EndpointOptions.path) either.
    peerSockets: false,
    createPublishServer: (options) => new NatsPublishServer(options, defaults),
    createPublishClient: (options) => new NatsPublishClient(options, defaults),
    createRequestServer: (options) => new NatsRequestServer(options, defaults),
    createRequestClient: (options) => new NatsRequestClient(options, defaults),
  }
}
