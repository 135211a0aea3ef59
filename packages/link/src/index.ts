/**
 * @packageDocumentation
 * `@brine/link` is a minion's link to its masters, which the minion and the syndic both stand on: authentication
 * and the session key, the publish subscription and the opening of each publish, returns and events sent with
 * their spool, the master policies (`str`, `failover`), the master's clock and the link's lifecycle events.
 */
export * from './auth.js'
export * from './lifecycle.js'
export * from './master-link.js'
export * from './master-time.js'
export * from './publish-opener.js'
export * from './publish-subscription.js'
export * from './resolve-master.js'
export * from './returner.js'
export * from './spool.js'
export * from './truncate-return.js'
export * from './master-policy.js'
export * from './identity.js'
export * from './errors.js'
export * from './link-config.js'
