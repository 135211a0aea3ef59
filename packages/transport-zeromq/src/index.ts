/**
 * @packageDocumentation
 * `@brine/transport-zeromq` is Brine's ZeroMQ transport: the four roles of `@brine/transport` on the ZeroMQ
 * wire (ZMTP 3.0), with an XPUB/Subscriber publish link filtered by topic at the publisher (Salt's
 * `zmq_filtering`) and a ROUTER/DEALER request link multiplexing many requests by id. Both ends speak ZMTP 3.0
 * themselves on node:net, with no native code: the servers on the runtime's Listener, so they keep the same bounds
 * as TCP's (connection caps, the incomplete-frame budget, the idle timeout, subscriptions checked before they are
 * kept); the clients on the runtime's ReconnectingLink, as TCP's clients, speaking as libzmq 4.3's Dealer and
 * Subscriber do, so either end also talks to libzmq. The API takes milliseconds; config keys stay in Salt's seconds.
 */
import type { Transport } from '@brine/transport'
import { ZeroMQPublishClient } from './publish-client.js'
import { ZeroMQPublishServer } from './publish-server.js'
import { ZeroMQRequestClient } from './request-client.js'
import { ZeroMQRequestServer } from './request-server.js'

/** The ZeroMQ transport, selected by `transport: zeromq`. Factories do no I/O until start(). */
export function zeromqTransport(): Transport {
  return {
    name: 'zeromq',
    createPublishServer: (options) => new ZeroMQPublishServer(options),
    createPublishClient: (options) => new ZeroMQPublishClient(options),
    createRequestServer: (options) => new ZeroMQRequestServer(options),
    createRequestClient: (options) => new ZeroMQRequestClient(options),
  }
}

export { ZeroMQPublishServer, ZeroMQPublishClient, ZeroMQRequestServer, ZeroMQRequestClient }
export { BROADCAST_TOPIC, topicForId } from './socket-util.js'
