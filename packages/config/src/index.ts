/**
 * @packageDocumentation
 * `@brine/config` is Brine's configuration, as Salt users write it: the schema of every key with Salt's names
 * and defaults, config files loaded and checked (YAML as Salt loads it; unknown keys warned about; a wrong
 * type is an error naming the key, the file and the line), `--set` overrides, the one place seconds and other
 * Salt units become the milliseconds and bytes the TypeScript APIs take, a minion's list of masters, a daemon's
 * logging from config (`log_file`, reopened after logrotate), and Salt's YAML loader and command-line argument
 * typing (`yamlify_arg`, `parse_input`).
 */
export * from './errors.js'
export * from './config-schema.js'
export * from './config.js'
export * from './config-cache.js'
export * from './masters.js'
export * from './units.js'
export * from './logging.js'
export * from './salt-yaml.js'
export * from './args.js'
