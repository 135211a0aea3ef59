import { appendFileSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { createLogger, parseLogLevel } from '@brine/transport'
import type { Logger, LogLevel } from '@brine/transport'

export { createLogger, parseLogLevel, silentLogger, LOG_LEVELS } from '@brine/transport'
export type { Logger, LogLevel, LoggerOptions } from '@brine/transport'

/** The config keys a daemon's logger reads. */
export interface LoggingConfig {
  log_level?: string
  log_file?: string
  log_level_logfile?: string
}

export interface LoggerFromConfigOptions {
  /** Where stderr lines go (default: process.stderr); for tests. */
  write?: (line: string) => void
}

const rank = (level: LogLevel): number => (level === 'quiet' ? -1 : ['error', 'warning', 'info', 'debug', 'trace'].indexOf(level))

/**
 * A logger for a daemon: `log_level` on stderr and, when `log_file` is set (and not a URL),
 * every line up to `log_level_logfile` appended to that file as well, as Salt does. The file is
 * written synchronously so the last lines before a crash are not lost.
 */
export function loggerFromConfig(opts: LoggingConfig, name: string, options: LoggerFromConfigOptions = {}): Logger {
  const consoleLevel = parseLogLevel(opts.log_level ?? 'warning')
  const file = opts.log_file !== undefined && opts.log_file !== '' && !opts.log_file.includes('://') ? opts.log_file : undefined
  const fileLevel = file === undefined ? 'quiet' : parseLogLevel(opts.log_level_logfile ?? opts.log_level ?? 'warning')
  const toStderr = options.write ?? ((line: string) => process.stderr.write(line))
  if (file === undefined) return createLogger({ level: consoleLevel, name, write: toStderr })

  let fileBroken = false
  const toFile = (line: string): void => {
    if (fileBroken) return
    try {
      appendFileSync(file, line)
    } catch (error) {
      // A log file we cannot write must not take the daemon down; say so once on stderr.
      fileBroken = true
      toStderr(`[ERROR   ] [${name}] cannot write log_file ${file}: ${(error as Error).message}\n`)
    }
  }
  try {
    mkdirSync(dirname(file), { recursive: true })
  } catch {
    // reported by the first failed append
  }
  // The shared logger filters at the more verbose of the two levels; each sink filters again by the line's tag.
  const level = rank(fileLevel) > rank(consoleLevel) ? fileLevel : consoleLevel
  return createLogger({
    level,
    name,
    write: (line) => {
      const lineLevel = levelOfLine(line)
      if (lineLevel === undefined || rank(lineLevel) <= rank(consoleLevel)) toStderr(line)
      if (lineLevel === undefined || rank(lineLevel) <= rank(fileLevel)) toFile(line)
    },
  })
}

/** Reads the level back from the logger's `[LEVEL   ]` tag. */
function levelOfLine(line: string): LogLevel | undefined {
  const match = /\[(ERROR|WARNING|INFO|DEBUG|TRACE) *\]/.exec(line)
  return match?.[1] === undefined ? undefined : (match[1].toLowerCase() as LogLevel)
}
