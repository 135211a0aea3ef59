// The commander programs of the commands. Apart from io.ts so that a daemon, which parses its flags without commander
// unless they need commander's help or errors (commands/daemon-args.ts), does not load it.
import { statSync } from 'node:fs'
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander'
import { BRINE_VERSION, EXIT_OK, EXIT_USAGE, LOG_LEVEL_NAMES, versionsReport, type CommandIO } from './io.js'

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
