import { statSync } from 'node:fs'
import { createLogger, parseLogLevel, type Logger, type LogLevel } from '@brine/core'
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander'
import { collectVersions, formatVersionsReport } from '@brine/common'

/** Where a command writes, so tests can run it without spawning a process. */
export interface OutputStream {
  write(text: string): unknown
  readonly isTTY?: boolean
  /** Terminal width, when a TTY. */
  readonly columns?: number
}

export interface CommandIO {
  stdout: OutputStream
  stderr: OutputStream
  /** Reads one answer line for a confirmation; absent when stdin is not a TTY. */
  prompt?: (question: string) => Promise<string>
  /** Reads a password without echoing it; absent when stdin is not a TTY. */
  promptSecret?: (question: string) => Promise<string>
  /** Aborted on SIGINT/SIGTERM by the bin wrapper. */
  signal?: AbortSignal
  env?: Record<string, string | undefined>
}

/** The version every bin prints for --version. */
export const BRINE_VERSION = '0.1.0'

export const EXIT_OK = 0
export const EXIT_GENERIC = 1
/** Salt's salt.defaults.exitcodes.EX_USAGE: every Salt CLI's option parser exits 64 on bad usage. */
export const EXIT_USAGE = 64
export const EXIT_NO_MINIONS = 2

/**
 * A usage error as Salt's option parser reports it: the usage line, a blank line, then
 * `<bin>: error: <message>`, all on stderr; returns EX_USAGE (64).
 */
export function usageError(io: CommandIO, name: string, message: string, usage?: string): number {
  io.stderr.write(`${usage === undefined ? '' : `Usage: ${name} ${usage}\n\n`}${name}: error: ${message}\n`)
  return EXIT_USAGE
}

export const LOG_LEVEL_NAMES = ['quiet', 'error', 'warning', 'info', 'debug', 'trace'] as const

/** Salt's `--versions-report`: Brine, Node, the libraries this install loads and the OS. */
export function versionsReport(): string {
  return formatVersionsReport(
    collectVersions({ version: BRINE_VERSION, from: import.meta.url, dependencies: [{ name: 'commander' }, { name: 'cli-progress' }] }),
  )
}

/** The options every bin shares: -c/--config-dir, -l/--log-level, --version, --versions-report. */
export function addCommonOptions(command: Command, options: { shortLogLevel?: boolean } = {}): Command {
  // salt-key uses -l for --list, so brine-key has only the long --log-level.
  const flags = options.shortLogLevel === false ? '--log-level <level>' : '-l, --log-level <level>'
  return command
    .option('-c, --config-dir <dir>', 'directory holding the config files', '/etc/brine')
    .addOption(new Option(flags, 'console log level').choices(LOG_LEVEL_NAMES).default('warning'))
    .version(BRINE_VERSION, '--version', 'print the version and exit')
    .option('--versions-report', "print the program's dependencies and version numbers, and exit")
    .on('option:versions-report', () => {
      // Before any argument check, as --version: `brine --versions-report` needs no target.
      command.configureOutput().writeOut?.(versionsReport())
      throw new CommanderError(EXIT_OK, 'commander.version', 'versions report')
    })
}

/**
 * A commander program that writes to `io` and throws instead of exiting, so the caller maps
 * errors to exit codes. Unknown options and bad values are usage errors.
 */
export function createProgram(name: string, io: CommandIO): Command {
  const program = new Command(name)
  program
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      // optparse's layout, as Salt's parsers print it: the usage line first, then `<bin>: error: ...`.
      outputError: (text, write) => write(text.startsWith('error:') ? `Usage: ${name} ${program.usage()}\n\n${name}: ${text}` : text),
    })
    .showSuggestionAfterError(true)
    .allowExcessArguments(false)
  return program
}

/** Parses `argv` (without node and the script); returns an exit code when parsing ended the run (help, version, error). */
export function parseArgv(program: Command, argv: readonly string[]): number | undefined {
  try {
    program.parse([...argv], { from: 'user' })
    return checkGivenConfigDir(program)
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help') return EXIT_OK
      return EXIT_USAGE
    }
    throw error
  }
}

/**
 * A `-c` given on the command line must be a directory: starting on defaults (and writing keys under
 * /etc/brine) because of a typo would hide the mistake. The default directory may be absent, as in Salt.
 */
function checkGivenConfigDir(program: Command): number | undefined {
  if (program.getOptionValueSource('configDir') !== 'cli') return undefined
  const dir = String(program.opts<{ configDir: string }>().configDir)
  let problem: string | undefined
  try {
    if (!statSync(dir).isDirectory()) problem = `config directory '${dir}' (-c) is not a directory`
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    problem =
      code === 'ENOENT' || code === 'ENOTDIR'
        ? `config directory '${dir}' (-c) does not exist`
        : `config directory '${dir}' (-c) cannot be read: ${(error as Error).message}`
  }
  if (problem === undefined) return undefined
  program.configureOutput().writeErr?.(`Usage: ${program.name()} ${program.usage()}\n\n${program.name()}: error: ${problem}\n`)
  return EXIT_USAGE
}

/** Option parser for a non-negative number of seconds; the error names the flag through commander. */
export function nonNegativeSeconds(value: string): number {
  const number = value.trim() === '' ? Number.NaN : Number(value)
  if (!Number.isFinite(number) || number < 0) throw new InvalidArgumentError(`must be a non-negative number of seconds, got '${value}'`)
  return number
}

/** Option parser for an integer. */
export function integer(value: string): number {
  if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError(`must be an integer, got '${value}'`)
  return Number(value)
}

/** A logger on the command's stderr at the level given by -l. */
export function cliLogger(level: string, io: CommandIO, name: string): Logger {
  return createLogger({ level: parseLogLevel(level) as LogLevel, name, write: (line) => io.stderr.write(line) })
}

/** Prints a fatal error as `<bin>: <message>` and returns its exit code. */
export function fail(io: CommandIO, name: string, message: string, code: number = EXIT_GENERIC): number {
  io.stderr.write(`${name}: ${message}\n`)
  return code
}

/** The stream and prompt wiring the bins use. */
export function processIO(signal?: AbortSignal): CommandIO {
  const io: CommandIO = { stdout: process.stdout, stderr: process.stderr, env: process.env }
  if (signal !== undefined) io.signal = signal
  if (process.stdin.isTTY === true) {
    io.prompt = async (question) => {
      const { createInterface } = await import('node:readline/promises')
      const rl = createInterface({ input: process.stdin, output: process.stderr })
      try {
        return await rl.question(question)
      } finally {
        rl.close()
      }
    }
    io.promptSecret = async (question) => {
      const { createInterface } = await import('node:readline/promises')
      const { Writable } = await import('node:stream')
      process.stderr.write(question)
      // Echo nothing of what is typed (getpass).
      const muted = new Writable({ write: (_chunk, _encoding, callback) => callback() })
      const rl = createInterface({ input: process.stdin, output: muted, terminal: true })
      try {
        return await rl.question('')
      } finally {
        rl.close()
        process.stderr.write('\n')
      }
    }
  }
  return io
}
