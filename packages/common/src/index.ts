/**
 * @packageDocumentation
 * `@brine/common` is what every Brine daemon shares above the transport: Salt-style config
 * loading (YAML, Salt's key names and defaults, errors naming key, file and line), the one
 * seconds-to-milliseconds conversion, Salt's jid format, the wire payload types and their
 * validators, Salt's target matchers (bounded, with Python's regular expressions matched in a
 * worker thread under a deadline, and nodegroups resolved for the master), the one return collector
 * (find_job, job-cache recovery), Salt's YAML loader and command-line argument typing, logging from config
 * (a daemon's `log_file`, reopened after logrotate), Salt's versions report, and the registration of the
 * built-in `zeromq` and `tcp` transports.
 */
export * from './errors.js'
export * from './config-schema.js'
export * from './config.js'
export * from './masters.js'
export * from './units.js'
export * from './login-throttle.js'
export * from './jid.js'
export * from './protocol/index.js'
export * from './target/index.js'
export * from './regex-guard.js'
export * from './logging.js'
export * from './transports.js'
// The bus socket's name, the event's shape and its stamp, shared by @brine/master and @brine/client.
export * from './event-bus.js'
export * from './job-cache.js'
export * from './return-collector.js'
// Salt's YAML loader and command-line argument typing (yamlify_arg, parse_input), shared by the CLI and the minion.
export * from './salt-yaml.js'
export * from './args.js'
export * from './versions.js'
export * from './schedule.js'
export * from './scheduler.js'
