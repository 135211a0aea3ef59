import type { Command } from 'commander'
import { parseLogLevel, type Logger } from '@brine/transport'
import { loadConfig, parseOverride, type MasterConfig, type MinionConfig } from '@brine/common'
import { DaemonLoadError } from '../errors.js'
import { addCommonOptions, cliLogger, createProgram, EXIT_GENERIC, EXIT_OK, parseArgv, usageError, type CommandIO } from '../io.js'

/** A daemon as the bins drive it: constructed from its loaded config, then start() and stop(). */
export interface Daemon {
  start(): Promise<void>
  stop(): Promise<void>
}
export type DaemonClass<C> = new (opts: C, options: { logger: Logger }) => Daemon

export interface DaemonDeps<C> {
  /** Loads the daemon class (default: `Master` from @brine/master, `Minion` from @brine/minion). */
  load?: () => Promise<DaemonClass<C>>
}

type Role = 'master' | 'minion'

/** A flag that becomes a config override: `--ret-port 4606` → `ret_port=4606`. */
interface OverrideFlag {
  flags: string
  key: string
  help: string
}

const MASTER_FLAGS: OverrideFlag[] = [
  { flags: '--transport <name>', key: 'transport', help: 'transport to serve: zeromq or tcp' },
  { flags: '--interface <address>', key: 'interface', help: 'address to bind' },
  { flags: '--publish-port <port>', key: 'publish_port', help: 'publish port' },
  { flags: '--ret-port <port>', key: 'ret_port', help: 'request (return) port' },
  { flags: '--id <id>', key: 'id', help: "the master's id" },
  { flags: '--root-dir <dir>', key: 'root_dir', help: 'prefix for every path in the config' },
]

const MINION_FLAGS: OverrideFlag[] = [
  { flags: '--transport <name>', key: 'transport', help: 'transport to use: zeromq or tcp' },
  { flags: '--id <id>', key: 'id', help: "this minion's id" },
  { flags: '--master <host>', key: 'master', help: 'the master to connect to' },
  { flags: '--master-port <port>', key: 'master_port', help: "the master's request port" },
  { flags: '--publish-port <port>', key: 'publish_port', help: "the master's publish port" },
  { flags: '--root-dir <dir>', key: 'root_dir', help: 'prefix for every path in the config' },
]

function buildProgram(role: Role, io: CommandIO): Command {
  const name = `brine-${role}`
  const program = addCommonOptions(createProgram(name, io)).description(
    role === 'master' ? "Run the Brine master (Salt's `salt-master`)." : "Run a Brine minion (Salt's `salt-minion`).",
  )
  for (const flag of role === 'master' ? MASTER_FLAGS : MINION_FLAGS) program.option(flag.flags, flag.help)
  program
    .option('--set <key=value>', 'set any config key (repeatable), e.g. --set timeout=10', (value: string, previous: string[]) => [...previous, value], [] as string[])
    .option('-d, --daemon', 'not supported: run under a process supervisor instead')
  return program
}

/** The daemon's loaded config, or an exit code. */
export async function loadDaemonConfig(role: Role, argv: readonly string[], io: CommandIO): Promise<{ opts: MasterConfig | MinionConfig; logger: Logger } | number> {
  const name = `brine-${role}`
  const program = buildProgram(role, io)
  const code = parseArgv(program, argv)
  if (code !== undefined) return code
  const o = program.opts<Record<string, unknown>>()
  if (o.daemon === true) {
    return usageError(io, name, `-d/--daemon is not supported; run ${name} in the foreground under a process supervisor (systemd, runit, a container)`, program.usage())
  }
  try {
    const overrides: Record<string, unknown> = {}
    for (const flag of role === 'master' ? MASTER_FLAGS : MINION_FLAGS) {
      const attribute = program.options.find((option) => option.flags === flag.flags)?.attributeName()
      const value = attribute === undefined ? undefined : o[attribute]
      if (typeof value === 'string') Object.assign(overrides, { [flag.key]: parseOverride(`${flag.key}=${value}`).value })
    }
    for (const text of o.set as string[]) {
      const { key, value } = parseOverride(text)
      overrides[key] = value
    }
    // -l on the command line wins over log_level in the file, as in Salt.
    const cliLevel = program.getOptionValueSource('logLevel') === 'cli' ? String(o.logLevel) : undefined
    const bootLogger = cliLogger(cliLevel ?? 'warning', io, name)
    const { opts } = await loadConfig(role, { configDir: String(o.configDir), overrides, logger: bootLogger })
    const level = cliLevel ?? parseLogLevel(String(opts.log_level ?? 'warning'))
    return { opts, logger: cliLogger(level, io, name) }
  } catch (error) {
    io.stderr.write(`${name}: ${(error as Error).message}\n`)
    return EXIT_GENERIC
  }
}

/** Resolves when `signal` aborts. */
function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal === undefined) return // runs until the process is killed
    if (signal.aborted) return resolve()
    signal.addEventListener('abort', () => resolve(), { once: true })
  })
}

async function defaultLoader(role: Role): Promise<DaemonClass<never>> {
  // Looked up by name so the CLI builds whatever the daemon packages currently export.
  const module = (role === 'master' ? await import('@brine/master') : await import('@brine/minion')) as Record<string, unknown>
  const exported = module[role === 'master' ? 'Master' : 'Minion']
  if (typeof exported !== 'function') throw new DaemonLoadError(role, role === 'master' ? 'Master' : 'Minion')
  return exported as DaemonClass<never>
}

/**
 * Runs a daemon until `io.signal` aborts (the bin wires SIGTERM and SIGINT to it), then stops it.
 * 0 after a clean stop; 1 when the config, the start or the stop failed; 2 for a usage error.
 */
export async function runDaemon<C>(role: Role, argv: readonly string[], io: CommandIO, deps: DaemonDeps<C> = {}): Promise<number> {
  const name = `brine-${role}`
  const loaded = await loadDaemonConfig(role, argv, io)
  if (typeof loaded === 'number') return loaded
  const { opts, logger } = loaded
  let daemon: Daemon | undefined
  try {
    const Daemon = deps.load === undefined ? ((await defaultLoader(role)) as unknown as DaemonClass<C>) : await deps.load()
    // The master opens the job cache master_job_cache names (local_cache or postgres) itself.
    daemon = new Daemon(opts as C, { logger })
    await daemon.start()
  } catch (error) {
    io.stderr.write(`${name}: cannot start: ${(error as Error).message}\n`)
    // A half-started daemon must not keep ports or sockets.
    await daemon?.stop().catch(() => {})
    return EXIT_GENERIC
  }
  logger.info(`${name} started (transport ${String(opts.transport)}, id ${String(opts.id)})`)
  await aborted(io.signal)
  logger.info(`${name} stopping`)
  try {
    await daemon.stop()
  } catch (error) {
    io.stderr.write(`${name}: error while stopping: ${(error as Error).message}\n`)
    return EXIT_GENERIC
  }
  return EXIT_OK
}

export const runMaster = (argv: readonly string[], io: CommandIO, deps: DaemonDeps<MasterConfig> = {}): Promise<number> => runDaemon('master', argv, io, deps)
export const runMinion = (argv: readonly string[], io: CommandIO, deps: DaemonDeps<MinionConfig> = {}): Promise<number> => runDaemon('minion', argv, io, deps)
