import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'
import { createLogger, parseLogLevel, type Logger, type LogLevel } from '@brine/core'
import { LogFileError } from './errors.js'

/** The config keys a daemon's logger reads. */
export interface LoggingConfig {
  log_level?: string
  log_file?: string
  /** Salt's default is null: the file then logs at `log_level`. */
  log_level_logfile?: string | null
}

export interface LoggerFromConfigOptions {
  /** Where stderr lines go (default: process.stderr); for tests. */
  write?: (line: string) => void
  /** The console level from `-l`, which wins over `log_level` (and so also sets the file's level when `log_level_logfile` is null, as in Salt). */
  consoleLevel?: LogLevel
}

/** A daemon's logger and the log file behind it. */
export interface DaemonLogging {
  logger: Logger
  /** The open log file, or undefined when there is none (no `log_file`, a syslog URL, or it could not be opened). */
  file: LogFile | undefined
  /** Opens `log_file` again (after logrotate moved it; the daemons do it on SIGHUP). Failures are logged, never thrown. */
  reopen(): void
  close(): void
}

const rank = (level: LogLevel): number => (level === 'quiet' ? -1 : ['error', 'warning', 'info', 'debug', 'trace'].indexOf(level))

/**
 * A log file held open for appending, mode 0640 (Salt's umask 027). Lines are written synchronously, so
 * the last lines before a crash are on disk. After logrotate moves the file, {@link reopen} starts a new one
 * at the same path; until then lines keep going to the moved file, so none is lost.
 */
export class LogFile {
  readonly path: string
  /** The outermost directory the first open created for the file, if any (a daemon that switches users gives it away). */
  readonly createdDir: string | undefined
  #fd: number | undefined

  constructor(path: string) {
    this.path = path
    const { fd, createdDir } = LogFile.#open(path, 'open')
    this.#fd = fd
    this.createdDir = createdDir
  }

  static #open(path: string, action: 'open' | 'reopen'): { fd: number; createdDir: string | undefined } {
    try {
      const createdDir = mkdirSync(dirname(path), { recursive: true, mode: 0o750 })
      return { fd: openSync(path, 'a', 0o640), createdDir }
    } catch (error) {
      throw new LogFileError(path, action, { cause: error })
    }
  }

  /** Appends one line; throws LogFileError when the write fails (a full disk). */
  write(line: string): void {
    if (this.#fd === undefined) return
    try {
      writeSync(this.#fd, line)
    } catch (error) {
      throw new LogFileError(this.path, 'write', { cause: error })
    }
  }

  /** Opens the path again and closes the old descriptor; on failure keeps writing where it was and throws. */
  reopen(): void {
    const { fd } = LogFile.#open(this.path, 'reopen')
    const old = this.#fd
    this.#fd = fd
    if (old !== undefined) closeSync(old)
  }

  close(): void {
    if (this.#fd === undefined) return
    closeSync(this.#fd)
    this.#fd = undefined
  }
}

/**
 * A daemon's logging as Salt sets it up: `log_level` (or `-l`) on stderr and, when `log_file` is a path
 * (not a `udp://`/`tcp://`/`file://` syslog URL, which Brine does not send to), every line up to
 * `log_level_logfile` — or `log_level` when that is null — appended to the file too. A file that cannot
 * be opened is reported on stderr and the daemon goes on logging there, as Salt does.
 */
export function openDaemonLogging(opts: LoggingConfig, name: string, options: LoggerFromConfigOptions = {}): DaemonLogging {
  const consoleLevel = options.consoleLevel ?? parseLogLevel(opts.log_level ?? 'warning')
  const toStderr = options.write ?? ((line: string) => process.stderr.write(line))
  const path = opts.log_file !== undefined && opts.log_file !== '' && !opts.log_file.includes('://') ? opts.log_file : undefined
  const fileLevel = path === undefined ? 'quiet' : opts.log_level_logfile == null ? consoleLevel : parseLogLevel(opts.log_level_logfile)
  const say = (message: string): void => toStderr(`${new Date().toISOString()} [ERROR   ] [${name}] ${message}\n`)

  let file: LogFile | undefined
  if (path !== undefined && fileLevel !== 'quiet') {
    try {
      file = new LogFile(path)
    } catch (error) {
      say(`${(error as Error).message}; logging to stderr only`)
    }
  }
  if (file === undefined) {
    return { logger: createLogger({ level: consoleLevel, name, write: toStderr }), file: undefined, reopen: () => {}, close: () => {} }
  }
  const logFile = file
  // A file we cannot write must not take the daemon down: say so once on stderr, and try again after a reopen.
  let broken = false
  const toFile = (line: string): void => {
    if (broken) return
    try {
      logFile.write(line)
    } catch (error) {
      broken = true
      say((error as Error).message)
    }
  }
  // The shared logger filters at the more verbose of the two levels; each sink filters again by the line's tag.
  const level = rank(fileLevel) > rank(consoleLevel) ? fileLevel : consoleLevel
  const logger = createLogger({
    level,
    name,
    write: (line) => {
      const lineLevel = levelOfLine(line)
      if (lineLevel === undefined || rank(lineLevel) <= rank(consoleLevel)) toStderr(line)
      if (lineLevel === undefined || rank(lineLevel) <= rank(fileLevel)) toFile(line)
    },
  })
  return {
    logger,
    file: logFile,
    reopen: () => {
      try {
        logFile.reopen()
        broken = false
        logger.info(`reopened log_file ${logFile.path}`)
      } catch (error) {
        logger.error(`${(error as Error).message}; still writing to the file it had open`)
      }
    },
    close: () => logFile.close(),
  }
}

/** A logger for a daemon (see {@link openDaemonLogging}); the file stays open for the life of the process. */
export function loggerFromConfig(opts: LoggingConfig, name: string, options: LoggerFromConfigOptions = {}): Logger {
  return openDaemonLogging(opts, name, options).logger
}

/** Reads the level back from the logger's `[LEVEL   ]` tag. */
function levelOfLine(line: string): LogLevel | undefined {
  const match = /\[(ERROR|WARNING|INFO|DEBUG|TRACE) *\]/.exec(line)
  return match?.[1] === undefined ? undefined : (match[1].toLowerCase() as LogLevel)
}
