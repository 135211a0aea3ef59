/**
 * Salt's log levels, quietest first. `warning` is Salt's spelling; `warn` is accepted as an alias
 * where a level is parsed from config or the command line.
 */
export const LOG_LEVELS = ['quiet', 'error', 'warning', 'info', 'debug', 'trace'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/** What every endpoint logs through (EndpointOptions.logger); `createLogger` makes the one Brine uses. */
export interface Logger {
  readonly level: LogLevel
  error(message: string, ...details: unknown[]): void
  warning(message: string, ...details: unknown[]): void
  info(message: string, ...details: unknown[]): void
  debug(message: string, ...details: unknown[]): void
  trace(message: string, ...details: unknown[]): void
  /** A logger that prefixes its lines with `name`, sharing this one's level and sink. */
  child(name: string): Logger
  isEnabled(level: LogLevel): boolean
}

/** Salt's other level names, folded onto ours. */
const SALT_LEVEL_ALIASES: Record<string, LogLevel> = { warn: 'warning', critical: 'error', profile: 'debug', garbage: 'trace', all: 'trace' }

/** Parses a level name from config or a flag; throws RangeError naming the choices. */
export function parseLogLevel(value: string): LogLevel {
  const normalized = value.toLowerCase()
  if ((LOG_LEVELS as readonly string[]).includes(normalized)) return normalized as LogLevel
  const saltAlias = SALT_LEVEL_ALIASES[normalized]
  if (saltAlias !== undefined) return saltAlias
  throw new RangeError(`unknown log level '${value}' (choose one of ${LOG_LEVELS.join(', ')})`)
}
