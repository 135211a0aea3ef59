import { readdir, readFile, readlink } from 'node:fs/promises'
import { dirname, join, resolve, sep } from 'node:path'
import { iterTransportOpts, suggestTransport } from '@brine/transport'
import { silentLogger, UnknownTransportError, type Logger } from '@brine/core'
import { BUILTIN_TRANSPORTS, CONFIG_SCHEMA, PATH_KEYS, defaultsFor, keySpec, type ConfigFor, type Role, type TransportName } from './config-schema.js'
import { COMMAND_LINE, coerceValue, describeValue, isPlainObject } from './config-values.js'
import { ConfigError, formatSource, type ConfigSource } from './errors.js'
import type { ConfigParseCache, ParsedConfigFile } from './config-cache.js'
import { checkMinionMasters, checkSyndicMasters } from './masters.js'
import { SALT_YAML_OPTIONS } from './salt-yaml.js'
import { yamlModule } from './yaml-module.js'

export { coerceValue, MAX_PATH_BYTES, parseOverride, parseOverrides } from './config-values.js'

export interface LoadConfigOptions {
  /** Directory holding `<role>` and `<role>.d/*.conf` (Salt's `-c`, default `/etc/brine`). */
  configDir?: string
  /** Command-line values, already typed (see {@link parseOverride}); applied last. */
  overrides?: Record<string, unknown>
  /** Where unknown-key warnings are logged (they are also returned). */
  logger?: Logger
  /**
   * Collect every problem here instead of throwing the first (`--check-config`): a value in error is left
   * out (its default applies) and loading goes on, so one run reports each bad key, file and line.
   */
  problems?: ConfigError[]
  /** Where a file's parse may be kept and found again, so a text read before is not parsed again (a command's). */
  parseCache?: ConfigParseCache
}

/** A key the schema does not know, or one the role does not read; the daemon still starts. */
export interface ConfigWarning {
  key: string
  file: string
  line?: number
  message: string
}

export interface LoadedConfig<R extends Role> {
  opts: ConfigFor<R>
  warnings: ConfigWarning[]
  /** The files that were read, in the order they were applied. */
  files: string[]
  /** Where each key that was set came from (`transport_opts.tcp.ret_port` for nested ones). */
  sources: ReadonlyMap<string, ConfigSource>
}

/** What `--check-config` reports: every error and warning of a role's config files. */
export interface ConfigCheck<R extends Role> extends LoadedConfig<R> {
  errors: ConfigError[]
}

/** Separates path segments in the line index; keys such as `postgres.host` contain dots. */
const PATH_SEPARATOR = '\u0000'

/** Salt reads its config files with the same loader as everything else (salt-yaml.ts): YAML 1.1 as PyYAML, plus Salt's changes. */
const YAML_OPTIONS = SALT_YAML_OPTIONS

type ParsedFile = ParsedConfigFile

/**
 * Loads a daemon's config the way Salt does: defaults, then `<configDir>/<role>` (a missing file
 * means defaults), then `<configDir>/<role>.d/*.conf` in sorted order (each replacing whole
 * top-level keys, as Salt's `opts.update` does), then `overrides`. Values are type-checked where
 * they are read, so errors name the key, the file and the line; `root_dir` is prepended to path
 * keys last. YAML is parsed as YAML 1.1, as Salt's PyYAML does (`yes`/`on` are booleans).
 */
export async function loadConfig<R extends Role>(role: R, options: LoadConfigOptions = {}): Promise<LoadedConfig<R>> {
  const configDir = options.configDir ?? '/etc/brine'
  const logger = options.logger ?? silentLogger
  const problems = options.problems
  /** Keys whose value was left out because it was in error. */
  const dropped = new Set<string>()
  /** Throws `error`, or records it when collecting every problem. */
  const report = (error: unknown): void => {
    if (problems === undefined || !(error instanceof ConfigError)) throw error
    problems.push(error)
    if (error.key !== undefined) dropped.add(error.key)
  }
  const warnings: ConfigWarning[] = []
  const merged: Record<string, unknown> = {}
  /** Where each top-level key was last set, for cross-key errors. */
  const origins = new Map<string, ConfigSource>()
  const apply = async (values: Record<string, unknown>, source: (path: readonly string[]) => ConfigSource): Promise<void> => {
    const checked = await checkValues(role, values, source, warnings, report)
    for (const [key, value] of Object.entries(checked)) {
      merged[key] = value
      origins.set(key, source([key]))
      if (key !== 'transport_opts') continue
      // Nested origins let a port clash point at the exact line of `transport_opts.tcp.ret_port`.
      for (const name of [...origins.keys()]) if (name.startsWith('transport_opts.')) origins.delete(name)
      for (const [name, entry] of Object.entries(value as Record<string, Record<string, unknown>>)) {
        origins.set(`transport_opts.${name}`, source([key, name]))
        for (const inner of Object.keys(entry)) origins.set(`transport_opts.${name}.${inner}`, source([key, name, inner]))
      }
    }
  }

  const files = await readConfigFiles(role, configDir, apply, report, options.parseCache)
  if (options.overrides !== undefined) await apply(options.overrides, () => ({ file: COMMAND_LINE }))

  const opts: Record<string, unknown> = defaultsFor(role, configDir)
  for (const [key, value] of Object.entries(merged)) {
    // rest_cherrypy is a settings block: a file that sets only `port` keeps the default `host`.
    opts[key] = key === 'rest_cherrypy' && role !== 'minion' ? { ...(opts[key] as object), ...(value as object) } : value
  }
  if (role === 'minion' && !origins.has('id')) {
    // Salt's minion_id_caching: a minion keeps the id it was first given in <configDir>/minion_id.
    const cached = (await readOptional(join(configDir, 'minion_id')))?.trim()
    if (cached) opts.id = cached
  }
  checkAcrossKeys(role, opts, origins, dropped, report)
  // The master's file names the master's log file and pidfile; the syndic has its own (Salt's syndic_log_file, syndic_pidfile).
  if (role === 'syndic') useSyndicOwnFiles(opts, origins)
  prependRootDir(opts)
  checkResolvedPaths(opts, origins, report)
  // A daemon's audit log defaults to `audit` beside its log file (a library's Master, without it, keeps it under cachedir).
  if (role === 'master' && opts['audit_log'] === '') opts['audit_log'] = defaultAuditLog(opts)

  for (const warning of warnings) logger.warning(warning.message)
  return { opts: opts as ConfigFor<R>, warnings, files, sources: origins }
}

type ApplyValues = (values: Record<string, unknown>, source: (path: readonly string[]) => ConfigSource) => Promise<void>

/**
 * `<configDir>/<role>` then `<configDir>/<role>.d/*.conf` in sorted order, each applied; the files read.
 * A file that is not valid YAML is reported (every syntax error) and its values are not applied.
 */
async function readConfigFiles(
  role: Role,
  configDir: string,
  apply: ApplyValues,
  report: (error: unknown) => void,
  cache: ConfigParseCache | undefined,
): Promise<string[]> {
  // Salt's syndic reads the master's config file (its keys sit beside the master's).
  const base = role === 'syndic' ? 'master' : role
  const includeDir = join(configDir, `${base}.d`)
  const includes = (await listDir(includeDir).catch((error: unknown) => (report(error), [] as string[]))).filter((name) => name.endsWith('.conf')).sort()
  const files: string[] = []
  for (const file of [join(configDir, base), ...includes.map((name) => join(includeDir, name))]) {
    const text = await readOptional(file).catch((error: unknown) => report(error))
    if (text === undefined) continue
    files.push(file)
    let parsed = cache?.get(file, text)
    if (parsed === undefined) {
      const fresh = parseConfigFile(text, file)
      if (fresh.errors.length > 0) {
        for (const error of fresh.errors) report(error)
        continue
      }
      cache?.set(file, text, fresh)
      parsed = fresh
    }
    await apply(parsed.values, (path) => ({ file, line: parsed.lines.get(path.join(PATH_SEPARATOR)) }))
  }
  return files
}

/**
 * Checks that span keys: distinct ports per transport (master), the minion's masters, the syndic's masters. A key
 * left out for being invalid has its default back, which could only report a clash that is not there: its checks are skipped.
 */
function checkAcrossKeys(
  role: Role,
  opts: Record<string, unknown>,
  origins: Map<string, ConfigSource>,
  dropped: ReadonlySet<string>,
  report: (error: unknown) => void,
): void {
  const originOf = (key: string): ConfigSource | undefined => origins.get(key)
  if (role === 'master') {
    const portDropped = [...dropped].some((key) => key.startsWith('transport_opts') || key === 'publish_port' || key === 'ret_port')
    if (!portDropped) checkDistinctPorts(opts, origins, report)
  } else if (role === 'minion') {
    if (!['master', 'master_type', 'master_finger'].some((key) => dropped.has(key))) for (const error of checkMinionMasters(opts, originOf)) report(error)
  } else if (!dropped.has('syndic_master')) {
    for (const error of checkSyndicMasters(opts, originOf)) report(error)
  }
}

/** The syndic's `log_file` and `pidfile` are its `syndic_log_file` and `syndic_pidfile`, with their origins. */
function useSyndicOwnFiles(opts: Record<string, unknown>, origins: Map<string, ConfigSource>): void {
  for (const [key, own] of [
    ['log_file', 'syndic_log_file'],
    ['pidfile', 'syndic_pidfile'],
  ] as const) {
    opts[key] = opts[own]
    const origin = origins.get(own)
    if (origin === undefined) origins.delete(key)
    else origins.set(key, origin)
  }
}

/** `audit` beside `log_file`, or under `<root_dir>/var/log/brine` when the log goes to syslog or nowhere. */
export function defaultAuditLog(opts: Record<string, unknown>): string {
  const logFile = opts['log_file']
  if (typeof logFile === 'string' && logFile !== '' && !logFile.includes('://')) return join(dirname(logFile), 'audit')
  return join(typeof opts['root_dir'] === 'string' ? opts['root_dir'] : '/', 'var/log/brine/audit')
}

/**
 * Loads a role's config as {@link loadConfig} does but reports every problem instead of the first:
 * each invalid YAML line, wrong type, unknown transport and port clash, with its file and line.
 * `errors` is empty when the config is clean (warnings, e.g. unknown keys, do not count as errors).
 */
export async function checkConfig<R extends Role>(role: R, options: Omit<LoadConfigOptions, 'problems'> = {}): Promise<ConfigCheck<R>> {
  const errors: ConfigError[] = []
  const loaded = await loadConfig(role, { ...options, problems: errors })
  return { ...loaded, errors }
}

/**
 * Parses one config file's text; invalid YAML or a top level that is not a mapping throws a
 * ConfigError with the file and line. Returns the values and the line of every key (three levels deep).
 */
export function parseConfigText(text: string, file: string): ParsedFile {
  const parsed = parseConfigFile(text, file)
  const first = parsed.errors[0]
  if (first !== undefined) throw first
  return parsed
}

/** Parses one config file's text, returning every YAML error (with its line) instead of throwing. */
function parseConfigFile(text: string, file: string): ParsedFile & { errors: ConfigError[] } {
  const { LineCounter, isMap, isScalar, parseDocument } = yamlModule()
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { ...YAML_OPTIONS, lineCounter, prettyErrors: false })
  const lines = new Map<string, number>()
  if (doc.errors.length > 0) {
    const errors = doc.errors.map((error) => {
      const line = error.linePos?.[0].line ?? lineCounter.linePos(error.pos[0]).line
      const reason = error.message.split('\n')[0] ?? error.message
      return new ConfigError(`${file}:${line}: invalid YAML: ${reason}`, { file, line }, { cause: error })
    })
    return { values: {}, lines, errors }
  }
  if (doc.contents === null) return { values: {}, lines, errors: [] }
  if (!isMap(doc.contents)) {
    const line = doc.contents.range === undefined || doc.contents.range === null ? 1 : lineCounter.linePos(doc.contents.range[0]).line
    return { values: {}, lines, errors: [new ConfigError(`${file}:${line}: a config file must be a mapping of key: value`, { file, line })] }
  }
  const walk = (node: unknown, path: string[]): void => {
    if (!isMap(node) || path.length >= 3) return
    for (const pair of node.items) {
      if (!isScalar(pair.key)) continue
      const keyPath = [...path, String(pair.key.value)]
      if (pair.key.range) lines.set(keyPath.join(PATH_SEPARATOR), lineCounter.linePos(pair.key.range[0]).line)
      walk(pair.value, keyPath)
    }
  }
  walk(doc.contents, [])
  try {
    const values = (doc.toJS({ maxAliasCount: 100 }) ?? {}) as Record<string, unknown>
    return { values, lines, errors: [] }
  } catch (error) {
    // e.g. an alias bomb past maxAliasCount
    return { values: {}, lines, errors: [new ConfigError(`${file}: invalid YAML: ${(error as Error).message}`, { file }, { cause: error })] }
  }
}

/**
 * Type-checks every key of one source; unknown keys become warnings and are kept (Salt keeps
 * them too, for custom modules). Returns the values, coerced where the schema allows it.
 */
async function checkValues(
  role: Role,
  values: Record<string, unknown>,
  source: (path: readonly string[]) => ConfigSource,
  warnings: ConfigWarning[],
  report: (error: unknown) => void,
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(values)) {
    const spec = keySpec(key)
    const where = source([key])
    if (spec === undefined || !spec.roles.includes(role)) {
      warnings.push(unknownKeyWarning(key, where, spec === undefined ? undefined : role))
      out[key] = value
      continue
    }
    try {
      if (spec.kind === 'transport' || (spec.kind === 'nullable-transport' && value !== null)) {
        out[key] = await checkTransportName(value, key, where)
      } else if (spec.kind === 'transport-opts') {
        out[key] = await checkTransportOpts(role, value, key, source, warnings, report)
      } else {
        out[key] = coerceValue(key, spec, value, where)
      }
    } catch (error) {
      report(error)
    }
  }
  return out
}

function unknownKeyWarning(key: string, where: ConfigSource, notForRole: Role | undefined): ConfigWarning {
  const what = notForRole === undefined ? `unknown config key '${key}'` : `config key '${key}' is not used by the ${notForRole}`
  return { key, file: where.file, line: where.line, message: `${formatSource(where)}: ${what}; ignored` }
}

/**
 * Accepts exactly `zeromq` or `tcp`. A near miss (`zmq`, `ZeroMQ`) fails with the registry's
 * "did you mean", worded as UnknownTransportError words it, with the file and line as its source.
 */
async function checkTransportName(value: unknown, key: string, where: ConfigSource): Promise<TransportName> {
  if (typeof value !== 'string') {
    throw new ConfigError(`${formatSource(where)}: ${key} must be one of ${BUILTIN_TRANSPORTS.join(', ')}, got ${describeValue(value)}`, {
      key,
      file: where.file,
      line: where.line,
    })
  }
  if ((BUILTIN_TRANSPORTS as readonly string[]).includes(value)) return value as TransportName
  const unknown = new UnknownTransportError(value, BUILTIN_TRANSPORTS, suggestTransport(value, BUILTIN_TRANSPORTS), formatSource(where))
  throw new ConfigError(unknown.message, { key, file: where.file, line: where.line }, { cause: unknown })
}

async function checkTransportOpts(
  role: Role,
  value: unknown,
  key: string,
  source: (path: readonly string[]) => ConfigSource,
  warnings: ConfigWarning[],
  report: (error: unknown) => void,
): Promise<Record<string, Record<string, unknown>>> {
  const where = source([key])
  if (!isPlainObject(value)) coerceValue(key, CONFIG_SCHEMA.transport_opts, value, where)
  const out: Record<string, Record<string, unknown>> = {}
  for (const [name, entry] of Object.entries(value as Record<string, unknown>)) {
    try {
      await checkTransportName(name, `${key}.${name}`, source([key, name]))
    } catch (error) {
      report(error)
      continue
    }
    if (entry === null || entry === undefined) {
      out[name] = {}
      continue
    }
    const entryKey = `${key}.${name}`
    if (!isPlainObject(entry)) {
      try {
        coerceValue(entryKey, { kind: 'map', roles: [role], default: {} }, entry, source([key, name]))
      } catch (error) {
        report(error)
        continue
      }
    }
    const checked: Record<string, unknown> = {}
    for (const [innerKey, innerValue] of Object.entries(entry as Record<string, unknown>)) {
      const innerWhere = source([key, name, innerKey])
      const spec = keySpec(innerKey)
      const fullKey = `${entryKey}.${innerKey}`
      if (
        spec === undefined ||
        !spec.roles.includes(role) ||
        spec.kind === 'transport' ||
        spec.kind === 'nullable-transport' ||
        spec.kind === 'transport-opts'
      ) {
        warnings.push(unknownKeyWarning(fullKey, innerWhere, spec === undefined ? undefined : role))
        checked[innerKey] = innerValue
        continue
      }
      try {
        checked[innerKey] = coerceValue(fullKey, spec, innerValue, innerWhere)
      } catch (error) {
        report(error)
      }
    }
    out[name] = checked
  }
  return out
}

/** Two socket transports served by one master cannot share a port: the second bind would fail at start-up. */
function checkDistinctPorts(opts: Record<string, unknown>, origins: Map<string, ConfigSource>, report: (error: unknown) => void): void {
  const transportOpts = (opts.transport_opts ?? {}) as Record<string, Record<string, unknown>>
  for (const portKey of ['publish_port', 'ret_port'] as const) {
    const seen = new Map<number, { name: string; keyName: string }>()
    for (const [name, merged] of iterTransportOpts(opts as { transport: string; transport_opts?: typeof transportOpts; [key: string]: unknown })) {
      const port = merged[portKey]
      // Port 0 means "any free port", so two zeros do not collide; NATS binds nothing (its ports name subjects).
      if (typeof port !== 'number' || port === 0 || name === 'nats') continue
      const entry = transportOpts[name]
      const keyName =
        entry === undefined ? portKey : Object.hasOwn(entry, portKey) ? `transport_opts.${name}.${portKey}` : `${portKey} inherited by transport_opts.${name}`
      const other = seen.get(port)
      if (other !== undefined) {
        const source = origins.get(keyName) ?? origins.get(`transport_opts.${name}`) ?? { file: 'defaults' }
        report(
          new ConfigError(
            `${formatSource(source)}: transports '${other.name}' and '${name}' both use ${portKey} ${port} ` +
              `(${other.keyName} and ${keyName}); give each transport its own port`,
            { key: keyName, file: source.file, line: source.line },
          ),
        )
        continue
      }
      seen.set(port, { name, keyName })
    }
  }
}

/**
 * Virtual filesystems that cannot hold Brine's keys, caches, sockets, logs or pidfile: a root_dir
 * under /proc made a daemon spin at 100% CPU forever.
 */
export const VIRTUAL_FILESYSTEMS: readonly string[] = ['/proc', '/sys']

/** The virtual filesystem `path` lies in, if any. */
export function virtualFilesystemOf(path: string): string | undefined {
  const full = resolve(path)
  return VIRTUAL_FILESYSTEMS.find((root) => full === root || full.startsWith(`${root}${sep}`))
}

/**
 * After root_dir is prepended: every path key (and root_dir itself) must stay off the virtual
 * filesystems. The error names the key the bad part came from: root_dir when it put the path there.
 */
function checkResolvedPaths(opts: Record<string, unknown>, origins: Map<string, ConfigSource>, report: (error: unknown) => void): void {
  for (const key of ['root_dir', ...PATH_KEYS]) {
    const path = opts[key]
    if (typeof path !== 'string' || path === '' || path.includes('://')) continue
    const virtual = virtualFilesystemOf(path)
    if (virtual === undefined) continue
    const rootDir = typeof opts.root_dir === 'string' ? opts.root_dir : '/'
    const blame = key !== 'root_dir' && virtualFilesystemOf(rootDir) !== undefined ? 'root_dir' : key
    // root_dir makes every path key bad at once: one error for it is enough.
    if (blame === 'root_dir' && key !== 'root_dir') continue
    const source = origins.get(blame) ?? { file: 'defaults' }
    report(
      new ConfigError(
        `${formatSource(source)}: ${key} ${path} is on ${virtual}, a virtual filesystem that cannot hold Brine's files; choose a directory on a real filesystem`,
        {
          key: blame,
          file: source.file,
          line: source.line,
        },
      ),
    )
  }
}

/**
 * Salt's prepend_root_dir: each absolute or relative path key gets `root_dir` joined in front,
 * unless it is already under root_dir. URLs (`udp://…` log targets) are left alone.
 */
export function prependRootDir(opts: Record<string, unknown>): void {
  const rootDir = typeof opts.root_dir === 'string' ? resolve(opts.root_dir) : sep
  if (rootDir === sep) return
  for (const key of PATH_KEYS) {
    const path = opts[key]
    if (typeof path !== 'string' || path === '' || path.includes('://')) continue
    if (path === rootDir || path.startsWith(rootDir + sep)) continue
    opts[key] = join(rootDir, path)
  }
}

/**
 * A config file's text, or undefined when nothing is there. Something there that cannot be read (a
 * symlink to nothing, a directory, a file this user may not read) is a ConfigError naming the path:
 * starting on defaults instead would hide the operator's mistake.
 */
async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') {
      const target = await readlink(file).catch(() => undefined)
      if (target === undefined) return undefined
      throw new ConfigError(`${file}: config file is a symbolic link to ${JSON.stringify(target)}, which does not exist`, { file }, { cause: error })
    }
    const why = code === 'EISDIR' ? 'it is a directory, not a file' : code === 'EACCES' ? 'permission denied' : (error as Error).message
    throw new ConfigError(`${file}: cannot read config file: ${why}`, { file }, { cause: error })
  }
}

async function listDir(dir: string): Promise<string[]> {
  try {
    return await readdir(dir)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return []
    throw new ConfigError(`${dir}: cannot list config directory: ${(error as Error).message}`, { file: dir }, { cause: error })
  }
}
