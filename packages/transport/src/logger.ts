/**
 * Salt's log levels, quietest first. `warning` is Salt's spelling; `warn` is accepted as an alias
 * where a level is parsed from config or the command line.
 */
export const LOG_LEVELS = ['quiet', 'error', 'warning', 'info', 'debug', 'trace'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

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

export interface LoggerOptions {
  level?: LogLevel
  name?: string
  /** Where lines go (default: stderr). */
  write?: (line: string) => void
}

/** Salt's other level names, folded onto ours. */
const SALT_LEVEL_ALIASES: Record<string, LogLevel> = { warn: 'warning', critical: 'error', profile: 'debug', garbage: 'trace', all: 'trace' }

const rank = (level: LogLevel): number => LOG_LEVELS.indexOf(level)

/** Parses a level name from config or a flag; throws RangeError naming the choices. */
export function parseLogLevel(value: string): LogLevel {
  const normalized = value.toLowerCase()
  if ((LOG_LEVELS as readonly string[]).includes(normalized)) return normalized as LogLevel
  const saltAlias = SALT_LEVEL_ALIASES[normalized]
  if (saltAlias !== undefined) return saltAlias
  throw new RangeError(`unknown log level '${value}' (choose one of ${LOG_LEVELS.join(', ')})`)
}

function formatDetail(detail: unknown): string {
  if (detail instanceof Error) return detail.stack ?? `${detail.name}: ${detail.message}`
  if (typeof detail === 'string') return detail
  try {
    return JSON.stringify(detail)
  } catch {
    return String(detail)
  }
}

/**
 * The one logger: human lines on stderr in Salt's shape, `[LEVEL   ] [name] message`.
 * A hand-written 60 lines rather than a logging library because Salt's level names and stderr
 * text are the contract, and pulling JSON-first loggers (and their worker-thread pretty printers)
 * into the transport layer would cost every daemon start-up time and memory for nothing.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const sink = { level: options.level ?? 'warning', write: options.write ?? ((line: string) => process.stderr.write(line)) }
  return makeLogger(sink, options.name)
}

function makeLogger(sink: { level: LogLevel; write: (line: string) => void }, name: string | undefined): Logger {
  const emit = (level: LogLevel, message: string, details: unknown[]): void => {
    if (rank(level) > rank(sink.level) || sink.level === 'quiet') return
    const tag = `[${level.toUpperCase().padEnd(8)}]`
    const prefix = name === undefined ? '' : `[${name}] `
    const rest = details.length === 0 ? '' : ` ${details.map(formatDetail).join(' ')}`
    sink.write(`${new Date().toISOString()} ${tag} ${prefix}${message}${rest}\n`)
  }
  return {
    get level() {
      return sink.level
    },
    error: (message, ...details) => emit('error', message, details),
    warning: (message, ...details) => emit('warning', message, details),
    info: (message, ...details) => emit('info', message, details),
    debug: (message, ...details) => emit('debug', message, details),
    trace: (message, ...details) => emit('trace', message, details),
    child: (child) => makeLogger(sink, name === undefined ? child : `${name}:${child}`),
    isEnabled: (level) => sink.level !== 'quiet' && rank(level) <= rank(sink.level),
  }
}

/** Logs nothing; the default where a caller passes no logger. */
export const silentLogger: Logger = createLogger({ level: 'quiet', write: () => {} })
