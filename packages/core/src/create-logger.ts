import { LOG_LEVELS, type LogLevel, type Logger } from './logger.js'

export interface LoggerOptions {
  level?: LogLevel
  name?: string
  /** Where lines go (default: stderr). */
  write?: (line: string) => void
}

const rank = (level: LogLevel): number => LOG_LEVELS.indexOf(level)

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
