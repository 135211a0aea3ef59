/**
 * @packageDocumentation
 * `@brine/protocol` is Brine's protocol in one package: the loads that cross the wire and their validators, the
 * request envelopes and command allow-lists, Salt's event tags, the event bus's socket names and event shape,
 * Salt's jid format and its allocator, the return conversions and reply parsers, and the errors a master
 * answers with, which every side rebuilds as their classes. Every package builds and parses these through here
 * (docs/protocol.md describes them).
 */
export * from './loads.js'
export * from './requests.js'
export * from './tags.js'
export * from './syndic.js'
export * from './files.js'
export * from './errors.js'
export * from './returns.js'
export * from './jid.js'
// The bus socket's name, the event's shape and its stamp, shared by @brine/master and @brine/client.
export * from './event-bus.js'
