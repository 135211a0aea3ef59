import { createLogger, parseLogLevel, type Logger, type LogLevel } from '@brine/core'
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
