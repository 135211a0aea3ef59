/**
 * Brine's protocol in one module: the loads that cross the wire and their validators, the
 * request envelopes and command allow-lists, and Salt's event tags. Every package builds and
 * parses these through here (docs/protocol.md describes them).
 */
export * from './loads.js'
export * from './requests.js'
export * from './tags.js'
export * from './syndic.js'
export * from './files.js'
export * from './errors.js'
export * from './returns.js'
