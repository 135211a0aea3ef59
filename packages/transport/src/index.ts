/**
 * @packageDocumentation
 * `@brine/transport` is the contract every Brine transport implements and every daemon codes
 * against: the four roles (PublishServer, PublishClient, RequestServer, RequestClient), their
 * events and stats, the typed errors, the transport registry and Salt's `iterTransportOpts`, plus
 * the one msgpack codec, frame reader, bounded queue and backoff that both transports share.
 * It does no I/O of its own. The API takes milliseconds; config keys stay in Salt's seconds.
 */
export * from './types.js'
export * from './errors.js'
export * from './codec.js'
export * from './frame-reader.js'
export * from './bounded-queue.js'
export * from './backoff.js'
export * from './logger.js'
export * from './endpoint-core.js'
export * from './registry.js'
export * from './iter-transport-opts.js'
export * from './framed-connection.js'
export * from './free-port.js'
export * from './lru-map.js'
