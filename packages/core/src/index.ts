/**
 * @packageDocumentation
 * `@brine/core` is what every Brine package stands on: typed errors that keep their class across the wire
 * (BrineError and its registry), the logger with Salt's levels and rate-limited warnings, a bounded LRU map,
 * bounded and byte queues, backoff, the msgpack codec with its frame and decode bounds, a daemon's lifecycle
 * events and waits that end with an AbortSignal.
 */
export * from './backoff.js'
export * from './bounded-queue.js'
export * from './byte-queue.js'
export * from './codec.js'
export * from './create-logger.js'
export * from './errors.js'
export * from './frame-reader.js'
export * from './frame-shape.js'
export * from './lifecycle-events.js'
export * from './log-limiter.js'
export * from './logger.js'
export * from './lru-map.js'
export * from './waits.js'
export * from './wire.js'
