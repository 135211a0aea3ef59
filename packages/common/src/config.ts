import { readdir, readFile, readlink } from 'node:fs/promises'
import { dirname, join, resolve, sep } from 'node:path'
import { LineCounter, isMap, isScalar, parse as parseYaml, parseDocument } from 'yaml'
import { iterTransportOpts, parseLogLevel, silentLogger, suggestTransport, UnknownTransportError } from '@brine/transport'
import type { Logger } from '@brine/transport'
import {
  BUILTIN_TRANSPORTS,
  CONFIG_SCHEMA,
  PATH_KEYS,
  defaultsFor,
  keySpec,
  type ConfigFor,
  type KeySpec,
  type Role,
  type TransportName,
} from './config-schema.js'
import { ConfigError, formatSource, type ConfigSource } from './errors.js'
import { checkMinionMasters, checkSyndicMasters } from './masters.js'
import { SALT_YAML_OPTIONS } from './salt-yaml.js'
import { registerBuiltinTransports } from './transports.js'

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
const COMMAND_LINE = 'command line'

interface ParsedFile {
  values: Record<string, unknown>
  lines: Map<string, number>
}

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
  /** Throws `error`, or records it when collecting every problem. */
  /** Keys whose value was left out because it was in error. */
  const dropped = new Set<string>()
  const report = (error: unknown): void => {
    if (problems === undefined || !(error instanceof ConfigError)) throw error
    problems.push(error)
    if (error.key !== undefined) dropped.add(error.key)
  }
  const warnings: ConfigWarning[] = []
  const merged: Record<string, unknown> = {}
  /** Where each top-level key was last set, for cross-key errors. */
  const origins = new Map<string, ConfigSource>()
  const files: string[] = []
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

  // Salt's syndic reads the master's config file (its keys sit beside the master's).
  const file = role === 'syndic' ? 'master' : role
  const mainFile = join(configDir, file)
  const includeDir = join(configDir, `${file}.d`)
  const includes = (await listDir(includeDir).catch((error: unknown) => (report(error), [] as string[]))).filter((name) => name.endsWith('.conf')).sort()
  for (const file of [mainFile, ...includes.map((name) => join(includeDir, name))]) {
    const text = await readOptional(file).catch((error: unknown) => report(error))
    if (text === undefined) continue
    files.push(file)
    const parsed = parseConfigFile(text, file)
    // A file that is not valid YAML is reported (every syntax error) and its values are not applied.
    if (parsed.errors.length > 0) {
      for (const error of parsed.errors) report(error)
      continue
    }
    await apply(parsed.values, (path) => ({ file, line: parsed.lines.get(path.join(PATH_SEPARATOR)) }))
  }
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
  // A port left out for being invalid falls back to its default, which could only report a clash that is not there.
  const portDropped = [...dropped].some((key) => key.startsWith('transport_opts') || key === 'publish_port' || key === 'ret_port')
  if (role === 'master' && !portDropped) checkDistinctPorts(opts, origins, report)
  // A key left out for being invalid has its default back, which could only report a clash that is not there.
  if (role === 'minion' && !['master', 'master_type', 'master_finger'].some((key) => dropped.has(key))) {
    for (const error of checkMinionMasters(opts, (key) => origins.get(key))) report(error)
  }
  if (role === 'syndic') {
    if (!dropped.has('syndic_master')) for (const error of checkSyndicMasters(opts, (key) => origins.get(key))) report(error)
    // The master's file names the master's log file and pidfile; the syndic has its own (Salt's syndic_log_file, syndic_pidfile).
    for (const [key, own] of [['log_file', 'syndic_log_file'], ['pidfile', 'syndic_pidfile']] as const) {
      opts[key] = opts[own]
      const origin = origins.get(own)
      if (origin === undefined) origins.delete(key)
      else origins.set(key, origin)
    }
  }
  prependRootDir(opts)
  checkResolvedPaths(opts, origins, report)
  // A daemon's audit log defaults to `audit` beside its log file (a library's Master, without it, keeps it under cachedir).
  if (role === 'master' && opts['audit_log'] === '') opts['audit_log'] = defaultAuditLog(opts)

  for (const warning of warnings) logger.warning(warning.message)
  return { opts: opts as ConfigFor<R>, warnings, files, sources: origins }
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

/** Checks (and where harmless, coerces) one value against its spec; throws ConfigError naming key, file and line. */
export function coerceValue(key: string, spec: KeySpec, value: unknown, where: ConfigSource): unknown {
  const fail = (expected: string): never => {
    throw new ConfigError(`${formatSource(where)}: ${key} must be ${expected}, got ${describeValue(value)}`, {
      key,
      file: where.file,
      line: where.line,
    })
  }
  const unit = spec.unit === undefined ? '' : ` (${spec.unit})`
  switch (spec.kind) {
    case 'string':
    case 'nullable-string': {
      if (value === null && spec.kind === 'nullable-string') return null
      // Salt str()s scalars, so `id: 1234` is the id "1234".
      const text = typeof value === 'number' && Number.isFinite(value) ? String(value) : value
      if (typeof text !== 'string') return fail(spec.kind === 'string' ? 'a string' : 'a string or null')
      if (spec.values !== undefined && !spec.values.includes(text)) return fail(`one of ${spec.values.join(', ')}`)
      return text
    }
    case 'integer':
    case 'number':
    case 'port': {
      const what = spec.kind === 'number' ? 'a number' : 'an integer'
      const min = spec.min ?? (spec.kind === 'port' ? 0 : undefined)
      const max = spec.max ?? (spec.kind === 'port' ? 65535 : undefined)
      const range = min === undefined || max === undefined ? '' : ` from ${min} to ${max}`
      const typed = typeof value === 'number' && (spec.kind === 'number' ? Number.isFinite(value) : Number.isInteger(value))
      if (spec.kind === 'port') {
        return typed && value >= (min ?? 0) && value <= (max ?? 65535) ? value : fail(`a port number (an integer${range})`)
      }
      // A value of the wrong type says what type; one out of range also says the range.
      if (!typed) return fail(`${what}${unit}`)
      if ((min !== undefined && value < min) || (max !== undefined && value > max)) return fail(`${what}${range}${unit}`)
      return value
    }
    case 'path':
      return checkPathValue(key, value, where, fail)
    case 'boolean':
      return typeof value === 'boolean' ? value : fail('true or false')
    case 'map':
      return isPlainObject(value) ? value : fail('a mapping')
    case 'string-or-list':
      if (typeof value === 'string') return value
      return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : fail('a string or a list of strings')
    case 'list':
      return Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : fail('a list of strings')
    case 'boolean-or-map':
      return typeof value === 'boolean' || isPlainObject(value) ? value : fail('true, false or a mapping')
    case 'map-list':
      return Array.isArray(value) && value.every((item) => isPlainObject(item)) ? value : fail('a list of mappings')
    case 'master-finger':
      if (typeof value === 'string') return value
      if (Array.isArray(value)) return value.every((item) => typeof item === 'string') ? value : fail('a fingerprint, a list of fingerprints or a mapping of master to fingerprint')
      if (isPlainObject(value) && Object.values(value).every((item) => typeof item === 'string')) return value
      return fail('a fingerprint, a list of fingerprints or a mapping of master to fingerprint')
    case 'log-level':
    case 'nullable-log-level':
      if (value === null && spec.kind === 'nullable-log-level') return null
      if (typeof value !== 'string') return fail(spec.kind === 'log-level' ? 'a log level' : 'a log level or null')
      try {
        return parseLogLevel(value)
      } catch {
        return fail('one of quiet, error, warning, info, debug, trace')
      }
    case 'transport':
    case 'nullable-transport':
      if (value === null && spec.kind === 'nullable-transport') return null
      return typeof value === 'string' && (BUILTIN_TRANSPORTS as readonly string[]).includes(value)
        ? value
        : fail(`one of ${BUILTIN_TRANSPORTS.join(', ')}`)
    case 'transport-opts':
      return isPlainObject(value) ? value : fail('a mapping of transport name to options')
    case 'output-indent':
      // Salt's json outputter takes an int, `pretty`, null (one line) or a string used as the indent.
      return value === null || typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value)) ? value : fail('an integer, pretty or null')
  }
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
      if (spec === undefined || !spec.roles.includes(role) || spec.kind === 'transport' || spec.kind === 'nullable-transport' || spec.kind === 'transport-opts') {
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

/** Longest path accepted (Linux PATH_MAX is 4096 bytes with its NUL). */
export const MAX_PATH_BYTES = 4095
/**
 * Virtual filesystems that cannot hold Brine's keys, caches, sockets, logs or pidfile: a root_dir
 * under /proc made a daemon spin at 100% CPU forever.
 */
export const VIRTUAL_FILESYSTEMS: readonly string[] = ['/proc', '/sys']

/** A path key's value: a string (never a number: `root_dir: 5` is not `./5`), without NUL, at most MAX_PATH_BYTES. */
function checkPathValue(key: string, value: unknown, where: ConfigSource, fail: (expected: string) => never): string {
  if (typeof value !== 'string') return fail('a path (a string)')
  if (value.includes('\u0000')) return fail('a path without NUL bytes')
  if (Buffer.byteLength(value) > MAX_PATH_BYTES) {
    throw new ConfigError(`${formatSource(where)}: ${key} is ${Buffer.byteLength(value)} bytes long; a path may be at most ${MAX_PATH_BYTES}`, { key, file: where.file, line: where.line })
  }
  return value
}

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
      new ConfigError(`${formatSource(source)}: ${key} ${path} is on ${virtual}, a virtual filesystem that cannot hold Brine's files; choose a directory on a real filesystem`, {
        key: blame,
        file: source.file,
        line: source.line,
      }),
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
 * Parses a command-line `key=value` into a typed override, coercing with the schema's type:
 * `timeout=30` → 30, `auto_accept=yes` → true, `grains={role: web}` → a mapping (YAML flow).
 * A key the schema does not know keeps its YAML-parsed value (loadConfig will warn about it).
 */
export function parseOverride(text: string): { key: string; value: unknown } {
  const at = text.indexOf('=')
  const where: ConfigSource = { file: COMMAND_LINE }
  if (at <= 0) {
    throw new ConfigError(`${COMMAND_LINE}: override '${text}' must look like key=value`, { file: COMMAND_LINE })
  }
  const key = text.slice(0, at).trim()
  const raw = text.slice(at + 1)
  const spec = keySpec(key)
  const fail = (expected: string): never => {
    throw new ConfigError(`${COMMAND_LINE}: ${key} must be ${expected}, got '${raw}'`, { key, file: COMMAND_LINE })
  }
  if (spec === undefined) return { key, value: parseYamlValue(raw, key) }
  const unit = spec.unit === undefined ? '' : ` (${spec.unit})`
  switch (spec.kind) {
    case 'string':
    case 'path':
    case 'transport':
    case 'log-level':
      return { key, value: spec.kind === 'string' || spec.kind === 'path' ? coerceValue(key, spec, raw, where) : raw }
    case 'nullable-log-level':
      return { key, value: raw === '' || raw === 'null' || raw === '~' ? null : raw }
    case 'nullable-string':
    case 'nullable-transport':
      return { key, value: raw === '' || raw === 'null' || raw === '~' ? null : raw }
    case 'integer':
    case 'port': {
      if (!/^-?\d+$/.test(raw.trim())) return fail(spec.kind === 'port' ? 'a port number (an integer from 0 to 65535)' : `an integer${unit}`)
      return { key, value: coerceValue(key, spec, Number(raw), where) }
    }
    case 'number': {
      const value = raw.trim() === '' ? Number.NaN : Number(raw)
      return Number.isFinite(value) ? { key, value: coerceValue(key, spec, value, where) } : fail(`a number${unit}`)
    }
    case 'boolean': {
      const lower = raw.trim().toLowerCase()
      if (['true', 'yes', 'on', '1'].includes(lower)) return { key, value: true }
      if (['false', 'no', 'off', '0'].includes(lower)) return { key, value: false }
      return fail('true or false (true/false, yes/no, on/off, 1/0)')
    }
    case 'string-or-list':
      return { key, value: raw.trimStart().startsWith('[') ? coerceValue(key, spec, parseYamlValue(raw, key), where) : raw }
    case 'list':
      // `netapi_enable_clients=local,runner` or YAML `[local, runner]`.
      return { key, value: coerceValue(key, spec, raw.trimStart().startsWith('[') ? parseYamlValue(raw, key) : raw.split(',').map((item) => item.trim()).filter((item) => item !== ''), where) }
    case 'master-finger':
      return { key, value: /^\s*[[{]/.test(raw) ? coerceValue(key, spec, parseYamlValue(raw, key), where) : raw }
    case 'map':
    case 'transport-opts':
    case 'boolean-or-map':
    case 'map-list':
      return { key, value: coerceValue(key, spec, parseYamlValue(raw, key), where) }
    case 'output-indent':
      return { key, value: raw === 'null' || raw === '~' ? null : /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw }
  }
}

/** Parses several `key=value` overrides into the object loadConfig takes. */
export function parseOverrides(texts: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const text of texts) {
    const { key, value } = parseOverride(text)
    out[key] = value
  }
  return out
}

function parseYamlValue(raw: string, key: string): unknown {
  try {
    return parseYaml(raw, YAML_OPTIONS) as unknown
  } catch (error) {
    throw new ConfigError(`${COMMAND_LINE}: ${key}: cannot parse '${raw}' as YAML`, { key, file: COMMAND_LINE }, { cause: error })
  }
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  if (typeof value === 'string') return `string '${value}'`
  return `${typeof value} ${String(value)}`
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
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
