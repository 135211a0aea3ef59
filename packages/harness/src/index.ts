/**
 * @packageDocumentation
 * `@brine/harness` is Brine's process harness, for the end-to-end tests, the demo and the bench only (no shipped
 * package imports it): `Fleet`, a real master and minions as processes on loopback in a temporary root (or a
 * syndic node under another fleet's master, for trees of masters), running the commands of `@brine/cli`, which
 * it resolves as a package (its `bin` map), or the commands installed in a `binDir`. It sits at the top beside
 * the CLI; a `Fleet` is handed the master's event bus reader by its caller (`MasterEvent` from `@brine/client`
 * and `tags` from `@brine/protocol`).
 */
export * from './bins.js'
export * from './fleet.js'
