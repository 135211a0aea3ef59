/**
 * @packageDocumentation
 * `@brine/client` is Brine's Node API to a local master, as Salt's `salt.client` is: `LocalClient`
 * publishes jobs with the master's root key and hands back a `Job` whose `returns()` gathers them
 * from the master's event bus (the one return collector of `@brine/common`: Salt's find_job wait,
 * and the job cache for what the bus did not show), `RunnerClient` runs `jobs.*`/`manage.*` runners,
 * `WheelClient` manages keys, `EauthClient` runs Salt's eauth token flow (`mk_token`, `get_token`,
 * `rm_token`), and `MasterEvent` reads the bus as async iterators. Every client authenticates with the
 * master's root key, or with eauth `credentials` (a token, or a backend, user and password) whose ACL
 * the master applies; runner and wheel calls have Salt's async forms (`cmdAsync`: `{tag, jid}`); `cmdBatch()` is Salt's
 * batch mode as an async iterator, `cmdSubset()` Salt's cmd_subset.
 */
export * from './errors.js'
export * from './master-event.js'
export * from './clear-request.js'
export * from './job.js'
export * from './batch.js'
export * from './subset.js'
export * from './local-client.js'
export * from './runner-client.js'
export * from './wheel-client.js'
export * from './eauth-client.js'
// Salt's salt.utils.jid helpers, for programs that read jids (Salt-compatible; the master's own check is stricter).
export { isSaltJid, jidToTime } from '@brine/protocol'
