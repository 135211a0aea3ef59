/**
 * @packageDocumentation
 * `@brine/transport-zeromq` is Brine's ZeroMQ transport: the four roles of `@brine/transport` over
 * zeromq v6, with an XPublisher/Subscriber publish link filtered by topic at the publisher
 * (Salt's `zmq_filtering`) and a Router/Dealer request link multiplexing many requests by id.
 * The API takes milliseconds; config keys stay in Salt's seconds.
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
export { mapNativeError, type NativeErrorContext } from './map-native-error.js'
export { SendQueue } from './send-queue.js'
