import { dirname } from 'node:path'
import v8 from 'node:v8'
import { parseLogLevel, type Logger, type LogLevel } from '@brine/core'
import {
  ConfigError,
  loadConfig,
  openDaemonLogging,
  parseOverride,
  type ConfigSource,
  type DaemonLogging,
  type MasterConfig,
  type MinionConfig,
  type SyndicConfig,
} from '@brine/config'
import { flushCompileCache } from '../compile-cache.js'
import { DaemonLoadError } from '../errors.js'
import { cliLogger, EXIT_GENERIC, EXIT_OK, type CommandIO } from '../io.js'
import { quickDaemonArgs, type DaemonArgs, type Role } from './daemon-args.js'
import {
  chownPath,
  chownTree,
  heapGrowthFlag,
  MASTER_HEAP_GROWING_PERCENT,
  makeDaemonDir,
  workerHeapFlag,
  removePidfile,
  resolveRunAs,
  switchUser,
  writePidfile,
  type RunAs,
} from '../daemon-process.js'
import { fullGc, MINION_IDLE_COLLECTION, processIdleCollector, type IdleCollection } from '../idle-collector.js'
import { HeapGovernor } from '../heap-governor.js'
import { runCheckConfig } from './check-config.js'
import { parseCacheOption } from '../parse-cache.js'

/** A daemon as the bins drive it: constructed from its loaded config, then start() and stop(). */
export interface Daemon {
  start(): Promise<void>
  stop(): Promise<void>
}
export type DaemonClass<C> = new (opts: C, options: { logger: Logger }) => Daemon

export interface DaemonDeps<C> {
  /** Loads the daemon class (default: `Master` from @brine/master, `Minion` from @brine/minion, `Syndic` from @brine/syndic). */
  load?: () => Promise<DaemonClass<C>>
  /** Sets V8 flags in this process (default: `v8.setFlagsFromString`). */
  setV8Flags?: (flags: string) => void
  /**
   * The collector after a load (default: {@link processIdleCollector}), made with the daemon's `settings`: the master's
   * (none: the defaults) and the minion's ({@link MINION_IDLE_COLLECTION}); the syndic has none.
   */
  idleCollector?: (logger: Logger, settings: IdleCollection) => { start(): void; stop(): void }
  /**
   * The master's old-generation growth under memory pressure, given the setter of `--heap-growing-percent` and the
   * share it set (default: a {@link HeapGovernor} over this process); only when the master set the share itself.
   */
  heapGovernor?: (setGrowingPercent: (percent: number) => void, relaxedPercent: number, logger: Logger) => { start(): void; stop(): void }
}

/** The daemon class each role's package exports. */
const DAEMON_CLASSES: Record<Role, string> = { master: 'Master', minion: 'Minion', syndic: 'Syndic' }

/** `argv` as the daemon reads it: without commander when it can (daemon-args.ts), else with its program. */
async function readDaemonArgs(role: Role, argv: readonly string[], io: CommandIO): Promise<DaemonArgs | number> {
  const quick = quickDaemonArgs(role, argv)
  if (quick !== undefined) return quick
  const { programDaemonArgs } = await import('./daemon-program.js')
  return programDaemonArgs(role, argv, io)
}

/** A daemon's loaded config; `logger` writes to the command's stderr only (runDaemon adds the log file). */
export interface LoadedDaemonConfig {
  opts: MasterConfig | MinionConfig | SyndicConfig
  logger: Logger
  /** `-l` when given on the command line (it wins over `log_level`). */
  consoleLevel: LogLevel | undefined
  /** Where each key was set (file and line), for errors about values checked after loading (`user`). */
  sources: ReadonlyMap<string, ConfigSource>
}

/** The daemon's loaded config, or an exit code (`--check-config` runs the check and returns its exit code). */
export async function loadDaemonConfig(role: Role, argv: readonly string[], io: CommandIO): Promise<LoadedDaemonConfig | number> {
  const name = `brine-${role}`
  const args = await readDaemonArgs(role, argv, io)
  if (typeof args === 'number') return args
  try {
    const overrides: Record<string, unknown> = {}
    // --check-config reports a bad flag value with the other problems instead of stopping at it.
    const overrideErrors: ConfigError[] = []
    const override = (text: string): void => {
      try {
        const { key, value } = parseOverride(text)
        overrides[key] = value
      } catch (error) {
        if (!args.checkConfig || !(error instanceof ConfigError)) throw error
        overrideErrors.push(error)
      }
    }
    for (const text of args.overrides) override(text)
    // -l on the command line wins over log_level in the file, as in Salt.
    const cliLevel = args.logLevel === undefined ? undefined : parseLogLevel(args.logLevel)
    if (args.checkConfig) return await runCheckConfig(role, { configDir: args.configDir, overrides }, io, overrideErrors)
    const bootLogger = cliLogger(cliLevel ?? 'warning', io, name)
    const { opts, sources } = await loadConfig(role, { configDir: args.configDir, overrides, logger: bootLogger, ...parseCacheOption(io) })
    const level = cliLevel ?? parseLogLevel(String(opts.log_level ?? 'warning'))
    return { opts, logger: cliLogger(level, io, name), consoleLevel: cliLevel, sources }
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
  const module = (
    role === 'master' ? await import('@brine/master') : role === 'minion' ? await import('@brine/minion') : await import('@brine/syndic')
  ) as Record<string, unknown>
  const exported = module[DAEMON_CLASSES[role]]
  if (typeof exported !== 'function') throw new DaemonLoadError(role, DAEMON_CLASSES[role])
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
  const { opts } = loaded
  let runAs: RunAs | undefined
  try {
    // Checked before anything is written: a daemon that cannot become its user must not start as root.
    // Only a `user` the config or -u sets is switched to; the default is whoever started the daemon.
    const userSource = loaded.sources.get('user')
    runAs = userSource === undefined ? undefined : resolveRunAs(String(opts.user), userSource)
  } catch (error) {
    io.stderr.write(`${name}: ${(error as Error).message}\n`)
    return EXIT_GENERIC
  }
  const logging = openDaemonLogging(opts, name, { consoleLevel: loaded.consoleLevel, write: (line) => io.stderr.write(line) })
  const logger = logging.logger
  const pidfile = typeof opts.pidfile === 'string' && opts.pidfile !== '' ? opts.pidfile : undefined
  const onHangup = (): void => logging.reopen()
  let daemon: Daemon | undefined
  let memory: MemoryKeeping | undefined
  /** Directories created here (for the pidfile, and for a daemon that switches users), given to its user once it has started. */
  const created: string[] = []
  try {
    if (pidfile !== undefined) created.push(...writePidfile(pidfile, name, logger))
    if (runAs !== undefined) created.push(...daemonDirs(opts).flatMap((dir) => makeDaemonDir(dir)))
    const Daemon = deps.load === undefined ? ((await defaultLoader(role)) as unknown as DaemonClass<C>) : await deps.load()
    // The master opens the job cache master_job_cache names (local_cache or postgres) itself.
    daemon = new Daemon(opts as C, { logger })
    await daemon.start()
    memory = startMemoryKeeping(role, deps, logger)
    if (runAs !== undefined) becomeUser(runAs, opts, created, logging, pidfile, logger)
  } catch (error) {
    io.stderr.write(`${name}: cannot start: ${(error as Error).message}\n`)
    // A half-started daemon must not keep ports or sockets.
    memory?.stop()
    await daemon?.stop().catch(() => {})
    if (pidfile !== undefined) removePidfile(pidfile, logger)
    logging.close()
    return EXIT_GENERIC
  }
  // logrotate moves the file and sends SIGHUP (see packaging/logrotate/brine): start a new file at log_file.
  process.on('SIGHUP', onHangup)
  logger.info(`${name} started (transport ${String(opts.transport)}, id ${String(opts.id)}, pid ${process.pid})`)
  await aborted(io.signal)
  logger.info(`${name} stopping`)
  memory?.stop()
  let code = EXIT_OK
  try {
    await daemon.stop()
  } catch (error) {
    io.stderr.write(`${name}: error while stopping: ${(error as Error).message}\n`)
    code = EXIT_GENERIC
  }
  process.off('SIGHUP', onHangup)
  if (pidfile !== undefined) removePidfile(pidfile, logger)
  logging.close()
  return code
}

/** What keeps a started daemon's memory in bounds, stopped as it stops. */
interface MemoryKeeping {
  stop(): void
}

/**
 * Sets a started daemon's V8 flags and starts what keeps the master's memory in bounds: its old generation's growth
 * (and the governor that tightens it under pressure), its workers' young generation, its collector after a load (and the
 * minion's after its start).
 * Set once started: a V8 flag changed earlier makes V8 refuse Node's compiled-code cache for every module loaded after it.
 */
function startMemoryKeeping<C>(role: Role, deps: DaemonDeps<C>, logger: Logger): MemoryKeeping {
  const setV8Flags = deps.setV8Flags ?? v8.setFlagsFromString
  const running: Array<{ stop(): void }> = []
  const heapFlag = heapGrowthFlag(role, process.execArgv)
  if (heapFlag !== undefined) {
    setV8Flags(heapFlag)
    const setGrowingPercent = (percent: number): void => setV8Flags(`--heap-growing-percent=${percent}`)
    const governor = (deps.heapGovernor ?? processHeapGovernor)(setGrowingPercent, MASTER_HEAP_GROWING_PERCENT, logger.child('memory'))
    governor.start()
    running.push(governor)
  }
  const workerFlag = workerHeapFlag(role)
  if (workerFlag !== undefined) setV8Flags(workerFlag)
  const collection = IDLE_COLLECTION[role]
  if (collection !== undefined) {
    const collector = (deps.idleCollector ?? processIdleCollector)(logger.child('memory'), collection)
    collector.start()
    running.push(collector)
  }
  return { stop: () => running.reverse().forEach((each) => each.stop()) }
}

/** Each daemon's collector after a load: the master's after a burst, the minion's after its start and a large job's; the syndic has none. */
const IDLE_COLLECTION: Partial<Record<Role, IdleCollection>> = { master: {}, minion: MINION_IDLE_COLLECTION }

/** The master's governor over this process's resident size. */
function processHeapGovernor(setGrowingPercent: (percent: number) => void, relaxedPercent: number, logger: Logger): HeapGovernor {
  return new HeapGovernor({ rssBytes: () => process.memoryUsage.rss(), setGrowingPercent, relaxedPercent, collect: fullGc(), logger })
}

/** The directories a daemon writes to while it runs. */
function daemonDirs(opts: MasterConfig | MinionConfig | SyndicConfig): string[] {
  return (['pki_dir', 'cachedir', 'sock_dir'] as const).map((key) => opts[key]).filter((path): path is string => typeof path === 'string' && path !== '')
}

/**
 * Salt's verify_env and check_user, after the daemon has bound its ports and read its keys as root: the
 * directories it writes (pki_dir, cachedir, sock_dir, with everything in them, and the parents created for
 * them), its log file (and the directories created for it) and its pidfile go to `runAs`, then the process
 * switches to it for good.
 */
function becomeUser(
  runAs: RunAs,
  opts: MasterConfig | MinionConfig | SyndicConfig,
  created: readonly string[],
  logging: DaemonLogging,
  pidfile: string | undefined,
  logger: Logger,
): void {
  for (const dir of created) chownPath(dir, runAs)
  for (const dir of daemonDirs(opts)) chownTree(dir, runAs)
  const file = logging.file
  if (file !== undefined) {
    if (file.createdDir !== undefined) {
      for (let dir = dirname(file.path); dir.startsWith(file.createdDir); dir = dirname(dir)) chownPath(dir, runAs)
    }
    chownPath(file.path, runAs)
  }
  if (pidfile !== undefined) chownPath(pidfile, runAs)
  // The master's audit log, created at start beside the log file: its user goes on appending to it.
  if (typeof opts['audit_log'] === 'string' && opts['audit_log'] !== '') chownPath(opts['audit_log'], runAs)
  flushCompileCache()
  switchUser(runAs)
  logger.info(`running as user ${runAs.name} (uid ${runAs.uid}, gid ${runAs.gid})`)
}

export const runMaster = (argv: readonly string[], io: CommandIO, deps: DaemonDeps<MasterConfig> = {}): Promise<number> => runDaemon('master', argv, io, deps)
export const runMinion = (argv: readonly string[], io: CommandIO, deps: DaemonDeps<MinionConfig> = {}): Promise<number> => runDaemon('minion', argv, io, deps)
export const runSyndic = (argv: readonly string[], io: CommandIO, deps: DaemonDeps<SyndicConfig> = {}): Promise<number> => runDaemon('syndic', argv, io, deps)
