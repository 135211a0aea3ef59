/**
 * @packageDocumentation
 * `@brine/testkit` is Brine's test kit, for tests, the compliance suite, the process harness and the bench only
 * (no shipped package imports it): free loopback ports below the kernel's ephemeral range, bounded waits that
 * name what they waited for, process helpers that start commands in their own process group and stop them by
 * pid, and a nats-server on a free port. It sits just above `@brine/transport` and depends on no other Brine
 * package, so the transport compliance suite can use it without a cycle; `Fleet`, which runs the CLI's daemons,
 * is `@brine/harness`'s, at the top beside the CLI.
 */
export * from './errors.js'
export * from './deadline.js'
export * from './events.js'
export * from './ports.js'
export * from './processes.js'
export * from './nats-server.js'
