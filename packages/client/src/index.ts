/**
 * @packageDocumentation
 * `@brine/client` is Brine's Node API to a local master, as Salt's `salt.client` is: `LocalClient`
 * publishes jobs with the master's root key and gathers the returns from the master's event bus
 * (with Salt's find_job wait), and `MasterEvent` reads that bus as async iterators.
 */
export * from './master-event.js'
export * from './local-client.js'
