/**
 * @packageDocumentation
 * `@brine/bench` starts a real Brine master and minions as processes on loopback in a temporary root
 * ({@link Fleet}), for the README demo, the end-to-end tests and the transport comparison bench.
 * Everything it starts it stops by pid.
 */
export * from './fleet.js'
