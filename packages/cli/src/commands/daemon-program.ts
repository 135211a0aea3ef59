// A daemon's command line read by commander: what daemon-args.ts leaves to it (help, version, mistakes, -d).
import type { Command } from 'commander'
import { usageError, type CommandIO } from '../io.js'
import { addCommonOptions, createProgram, parseArgv } from '../program.js'
import { ROLE_FLAGS, type DaemonArgs, type Role } from './daemon-args.js'

const DESCRIPTIONS: Record<Role, string> = {
  master: "Run the Brine master (Salt's `salt-master`).",
  minion: "Run a Brine minion (Salt's `salt-minion`).",
  syndic: "Run the Brine syndic beside a master, relaying an upper master's jobs (Salt's `salt-syndic`); it reads the master's config file.",
}

function buildProgram(role: Role, io: CommandIO): Command {
  const name = `brine-${role}`
  const program = addCommonOptions(createProgram(name, io)).description(DESCRIPTIONS[role])
  for (const flag of ROLE_FLAGS[role]) program.option(flag.flags, flag.help)
  program
    .option(
      '--set <key=value>',
      'set any config key (repeatable), e.g. --set timeout=10',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option('-d, --daemon', 'not supported: run under a process supervisor instead')
    .option('--check-config', 'check the config files, print every problem with its file and line, and exit (1 if any is an error)')
  return program
}

/** `argv` read by the daemon's commander program: its arguments, or the exit code when reading it ended the run. */
export function programDaemonArgs(role: Role, argv: readonly string[], io: CommandIO): DaemonArgs | number {
  const name = `brine-${role}`
  const program = buildProgram(role, io)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const o = program.opts<Record<string, unknown>>()
  if (o.daemon === true) {
    return usageError(
      io,
      name,
      `-d/--daemon is not supported; run ${name} in the foreground under a process supervisor (systemd, runit, a container)`,
      program.usage(),
    )
  }
  const overrides: string[] = []
  for (const flag of ROLE_FLAGS[role]) {
    const attribute = program.options.find((option) => option.flags === flag.flags)?.attributeName()
    const value = attribute === undefined ? undefined : o[attribute]
    if (typeof value === 'string') overrides.push(`${flag.key}=${value}`)
  }
  overrides.push(...(o.set as string[]))
  const logLevel = program.getOptionValueSource('logLevel') === 'cli' ? String(o.logLevel) : undefined
  return { configDir: String(o.configDir), logLevel, overrides, checkConfig: o.checkConfig === true }
}
