/**
 * @packageDocumentation
 * `@brine/client` is Brine's Node API to a local master, as Salt's `salt.client` is: `LocalClient`
 * publishes jobs with the master's root key and gathers the returns from the master's event bus
 * (with Salt's find_job wait), `RunnerClient` runs `jobs.*`/`manage.*` runners, `WheelClient` manages
 * keys, and `MasterEvent` reads the bus as async iterators.
 */
export * from './master-event.js'
export * from './clear-request.js'
export * from './local-client.js'
export * from './runner-client.js'
export * from './wheel-client.js'
