/**
 * @packageDocumentation
 * `@brine/testkit` is Brine's test kit, for tests, the demo and the bench only (no shipped package
 * imports it): free loopback ports below the kernel's ephemeral range, bounded waits that name what
 * they waited for, process helpers that start commands in their own process group and stop them by
 * pid, and `Fleet`, a real master and minions as processes on loopback in a temporary root (or a
 * syndic node under another fleet's master, for trees of masters). It sits
 * just above `@brine/transport` and depends on no other Brine package, so the transport compliance
 * suite can use it without a cycle; a `Fleet` is handed the master's event bus reader by its caller
 * (`MasterEvent` from `@brine/client` and `tags` from `@brine/common`).
 */
export * from './errors.js'
export * from './deadline.js'
export * from './events.js'
export * from './ports.js'
export * from './processes.js'
export * from './fleet.js'
export * from './nats-server.js'
