/**
 * @packageDocumentation
 * `@brine/common` is the composition the daemons share above config, protocol and targeting: the registration
 * of the built-in `zeromq`, `tcp` and `nats` transports (the composition root the daemons ask by name), the
 * job cache's interface, the one return collector (find_job, job-cache recovery), schedules and their
 * scheduler (the master's and the minion's), the login throttle (the master's eauth and the REST API), and
 * Salt's versions report.
 */
export * from './errors.js'
export * from './transports.js'
export * from './job-cache.js'
export * from './return-collector.js'
export * from './schedule.js'
export * from './scheduler.js'
export * from './login-throttle.js'
export * from './versions.js'
