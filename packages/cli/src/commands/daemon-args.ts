// A daemon's command line read without commander. A daemon is started with a few flags that are almost always right:
// those it reads with Node's own `util.parseArgs` here. Anything else (--help, --version, a mistake, -d) goes to the
// commander program (daemon-program.ts), which prints what the commands print. commander is thus loaded only then: its
// code, and node:child_process that it requires as it loads, stay out of an idle minion (docs/performance.md, "An idle
// minion, fourth pass").
import { statSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { LOG_LEVEL_NAMES } from '../io.js'

export type Role = 'master' | 'minion' | 'syndic'

/** A flag that becomes a config override: `--ret-port 4606` → `ret_port=4606`. */
export interface OverrideFlag {
  flags: string
  key: string
  help: string
}

/** Salt's daemon flags for the process itself (salt-master/salt-minion: -u, --pid-file, --log-file, --log-file-level). */
const PROCESS_FLAGS: OverrideFlag[] = [
  { flags: '-u, --user <user>', key: 'user', help: 'run as this user (started as root: switch to it after binding ports and reading keys)' },
  { flags: '--pid-file <path>', key: 'pidfile', help: 'where to write the pid (default /var/run/brine-<role>.pid)' },
  { flags: '--log-file <path>', key: 'log_file', help: 'log file path (default /var/log/brine/<role>)' },
  { flags: '--log-file-level <level>', key: 'log_level_logfile', help: 'log file level (default: the log level)' },
]

const MASTER_FLAGS: OverrideFlag[] = [
  { flags: '--transport <name>', key: 'transport', help: 'transport to serve: zeromq, tcp or nats' },
  { flags: '--interface <address>', key: 'interface', help: 'address to bind' },
  { flags: '--publish-port <port>', key: 'publish_port', help: 'publish port' },
  { flags: '--ret-port <port>', key: 'ret_port', help: 'request (return) port' },
  { flags: '--id <id>', key: 'id', help: "the master's id" },
  { flags: '--root-dir <dir>', key: 'root_dir', help: 'prefix for every path in the config' },
  ...PROCESS_FLAGS,
]

const MINION_FLAGS: OverrideFlag[] = [
  { flags: '--transport <name>', key: 'transport', help: 'transport to use: zeromq, tcp or nats' },
  { flags: '--id <id>', key: 'id', help: "this minion's id" },
  { flags: '--master <host>', key: 'master', help: 'the master to connect to' },
  { flags: '--master-port <port>', key: 'master_port', help: "the master's request port" },
  { flags: '--publish-port <port>', key: 'publish_port', help: "the master's publish port" },
  { flags: '--root-dir <dir>', key: 'root_dir', help: 'prefix for every path in the config' },
  ...PROCESS_FLAGS,
]

/**
 * Salt's salt-syndic reads the master's config file; its process keys are syndic_pidfile and
 * syndic_log_file (the master's own pidfile and log_file stay the master's).
 */
const SYNDIC_FLAGS: OverrideFlag[] = [
  { flags: '--id <id>', key: 'id', help: "the syndic's id (what the upper master sees)" },
  { flags: '--syndic-master <host>', key: 'syndic_master', help: 'the upper master to connect to' },
  { flags: '--syndic-master-port <port>', key: 'syndic_master_port', help: "the upper master's request port" },
  { flags: '--syndic-transport <name>', key: 'syndic_transport', help: "transport to the upper master: zeromq, tcp or nats (default: the master's transport)" },
  { flags: '--root-dir <dir>', key: 'root_dir', help: 'prefix for every path in the config' },
  { flags: '-u, --user <user>', key: 'user', help: 'run as this user (started as root: switch to it after connecting and reading keys)' },
  { flags: '--pid-file <path>', key: 'syndic_pidfile', help: 'where to write the pid (default /var/run/brine-syndic.pid)' },
  { flags: '--log-file <path>', key: 'syndic_log_file', help: 'log file path (default /var/log/brine/syndic)' },
  { flags: '--log-file-level <level>', key: 'log_level_logfile', help: 'log file level (default: the log level)' },
]

export const ROLE_FLAGS: Record<Role, OverrideFlag[]> = { master: MASTER_FLAGS, minion: MINION_FLAGS, syndic: SYNDIC_FLAGS }

/** What a daemon's command line asks for, whichever parser read it. */
export interface DaemonArgs {
  configDir: string
  /** `-l` when given on the command line (it wins over `log_level`), unchecked. */
  logLevel: string | undefined
  /** The overrides in the order they apply: the role's flags (as `key=value`), then each `--set`. */
  overrides: string[]
  checkConfig: boolean
}

/** The default of `-c`, as the commands' programs have it. */
export const DEFAULT_CONFIG_DIR = '/etc/brine'

/** `'-u, --user <user>'` → `{ long: 'user', short: 'u' }`. */
function flagNames(flags: string): { long: string; short: string | undefined } {
  const match = /^(?:-(\w), )?--([\w-]+)/.exec(flags)
  if (match === null) throw new Error(`malformed flag spec ${flags}`)
  return { long: match[2]!, short: match[1] }
}

/** `util.parseArgs`'s options for `role`: the common flags, the role's, and the daemon's own. */
function parseOptions(role: Role): NonNullable<Parameters<typeof parseArgs>[0]>['options'] {
  const options: NonNullable<Parameters<typeof parseArgs>[0]>['options'] = {
    'config-dir': { type: 'string', short: 'c' },
    'log-level': { type: 'string', short: 'l' },
    set: { type: 'string', multiple: true },
    'check-config': { type: 'boolean' },
  }
  for (const flag of ROLE_FLAGS[role]) {
    const { long, short } = flagNames(flag.flags)
    options[long] = short === undefined ? { type: 'string' } : { type: 'string', short }
  }
  return options
}

/**
 * `argv` read without commander when it holds only known flags with good values; undefined when commander must read it:
 * any other flag or an argument, a flag's value that starts with a dash, --help, --version, --versions-report, -d, a
 * log level not among the names, or a `-c` that is not a directory (commander's program reports each as the commands do).
 */
export function quickDaemonArgs(role: Role, argv: readonly string[]): DaemonArgs | undefined {
  let values: Record<string, string | boolean | string[] | undefined>
  try {
    values = parseArgs({ args: [...argv], options: parseOptions(role), strict: true, allowPositionals: false }).values
  } catch {
    return undefined
  }
  const logLevel = values['log-level'] as string | undefined
  if (logLevel !== undefined && !(LOG_LEVEL_NAMES as readonly string[]).includes(logLevel)) return undefined
  const configDir = values['config-dir'] as string | undefined
  if (configDir !== undefined && !isDirectory(configDir)) return undefined
  const overrides: string[] = []
  for (const flag of ROLE_FLAGS[role]) {
    const value = values[flagNames(flag.flags).long]
    if (typeof value === 'string') overrides.push(`${flag.key}=${value}`)
  }
  overrides.push(...((values.set as string[] | undefined) ?? []))
  return { configDir: configDir ?? DEFAULT_CONFIG_DIR, logLevel, overrides, checkConfig: values['check-config'] === true }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}
