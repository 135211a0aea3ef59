/**
 * @packageDocumentation
 * `@brine/bench` is the transport comparison bench (`brine-bench`: connect, latency, throughput, memory,
 * restart and overload per transport and N; and brine-api's `POST /` latency against the command line's
 * and its event-stream delivery rate at N = 1 and 50; and two scenarios: `cp.get_file` to 100 minions, and the web
 * console rendering a 1,000-minion job), run on `@brine/harness`'s `Fleet` (a real master and
 * minions as processes on loopback in a temporary root), with swarm minions — many real Minion instances per
 * process (`brine-swarm`, started by {@link startSwarm}) — for large N. Everything it starts it stops by pid.
 */
export * from './fleet-swarm.js'
export * from './swarm.js'
export * from './bench.js'
export * from './report.js'
export * from './api-bench.js'
export * from './files-bench.js'
export * from './console-bench.js'
