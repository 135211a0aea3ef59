/**
 * @packageDocumentation
 * `@brine/bench` starts a real Brine master and minions as processes on loopback in a temporary root
 * ({@link Fleet}), for the README demo, the end-to-end tests and the transport comparison bench
 * (`brine-bench`: connect, latency, throughput, memory, restart and overload per transport and N, with
 * swarm minions — many real Minion instances per process — for large N; and brine-api's `POST /`
 * latency against the command line's and its event-stream delivery rate at N = 1 and 50). Everything it
 * starts it stops by pid.
 */
export * from './fleet.js'
export * from './swarm.js'
export * from './bench.js'
export * from './report.js'
export * from './api-bench.js'
