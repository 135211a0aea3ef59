/**
 * @packageDocumentation
 * `@brine/transport` is the contract every Brine transport implements and every daemon codes against, and
 * the runtime both transports are built from. The contract (`src/contract/`): the four roles
 * (PublishServer, PublishClient, RequestServer, RequestClient), their events and stats, the typed errors,
 * the Logger interface, the transport registry and Salt's `iterTransportOpts`. The runtime (`src/runtime/`):
 * the msgpack codec and request/reply envelopes, the frame reader and framed connection, the bounded queue,
 * backoff, the clients' reconnecting link (both socket transports'), the endpoint lifecycle, the client's request table and the server's serving loop, the servers'
 * Listener with the bounds it applies before any work for a peer (connection caps, an incomplete-frame budget,
 * an idle timeout, a decode bounded by entries and depth) (all written once, so a transport only moves frames),
 * the logger, rate-limited peer warnings, a bounded LRU map, a daemon's lifecycle event stream (`LifecycleEvents`)
 * and waits that end with an AbortSignal (`sleep`, `settleWithin`). The contract imports nothing from the runtime.
 * The API takes milliseconds; config keys stay in Salt's seconds.
 */
export * from './contract/types.js'
export * from './contract/registry.js'
export * from './contract/iter-transport-opts.js'
export * from './runtime/admission.js'
export * from './runtime/listener.js'
export * from './runtime/framed-connection.js'
export * from './runtime/reconnecting-link.js'
export * from './runtime/endpoint-core.js'
export * from './runtime/endpoint-base.js'
export * from './runtime/request-table.js'
export * from './runtime/link-requests.js'
export * from './runtime/request-serving.js'
