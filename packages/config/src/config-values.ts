/**
 * One config value against its key's spec: from a file (already YAML-typed) through a coercer per value
 * kind, and from the command line (`key=value`, text) through a parser per value kind. Both tables are
 * keyed by every {@link ValueKind}, so a new kind cannot be forgotten in one of them.
 */
import { parseLogLevel } from '@brine/core'
import { BUILTIN_TRANSPORTS, keySpec, type KeySpec, type ValueKind } from './config-schema.js'
import { ConfigError, formatSource, type ConfigSource } from './errors.js'
import { SALT_YAML_OPTIONS } from './salt-yaml.js'
import { yamlModule } from './yaml-module.js'

export const COMMAND_LINE = 'command line'

/** Longest path accepted (Linux PATH_MAX is 4096 bytes with its NUL). */
export const MAX_PATH_BYTES = 4095

/** What a coercer is given: the value, where it was set, and how to fail naming the key, file and line. */
interface Coercion {
  key: string
  spec: KeySpec
  value: unknown
  where: ConfigSource
  fail: (expected: string) => never
}

type Coercer = (c: Coercion) => unknown

const FINGERPRINTS = 'a fingerprint, a list of fingerprints or a mapping of master to fingerprint'

const isStringList = (value: unknown): value is string[] => Array.isArray(value) && value.every((item) => typeof item === 'string')

const coerceString: Coercer = ({ spec, value, fail }) => {
  if (value === null && spec.kind === 'nullable-string') return null
  // Salt str()s scalars, so `id: 1234` is the id "1234".
  const text = typeof value === 'number' && Number.isFinite(value) ? String(value) : value
  if (typeof text !== 'string') return fail(spec.kind === 'string' ? 'a string' : 'a string or null')
  if (spec.values !== undefined && !spec.values.includes(text)) return fail(`one of ${spec.values.join(', ')}`)
  return text
}

const rangeText = (min: number | undefined, max: number | undefined): string => (min === undefined || max === undefined ? '' : ` from ${min} to ${max}`)

const coercePort: Coercer = ({ spec, value, fail }) => {
  const min = spec.min ?? 0
  const max = spec.max ?? 65535
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max ? value : fail(`a port number (an integer${rangeText(min, max)})`)
}

const coerceNumber: Coercer = ({ spec, value, fail }) => {
  const what = spec.kind === 'number' ? 'a number' : 'an integer'
  const unit = spec.unit === undefined ? '' : ` (${spec.unit})`
  const typed = typeof value === 'number' && (spec.kind === 'number' ? Number.isFinite(value) : Number.isInteger(value))
  // A value of the wrong type says what type; one out of range also says the range.
  if (!typed) return fail(`${what}${unit}`)
  if ((spec.min !== undefined && value < spec.min) || (spec.max !== undefined && value > spec.max))
    return fail(`${what}${rangeText(spec.min, spec.max)}${unit}`)
  return value
}

/** A path key's value: a string (never a number: `root_dir: 5` is not `./5`), without NUL, at most MAX_PATH_BYTES. */
const coercePath: Coercer = ({ key, value, where, fail }) => {
  if (typeof value !== 'string') return fail('a path (a string)')
  if (value.includes('\u0000')) return fail('a path without NUL bytes')
  if (Buffer.byteLength(value) > MAX_PATH_BYTES) {
    throw new ConfigError(`${formatSource(where)}: ${key} is ${Buffer.byteLength(value)} bytes long; a path may be at most ${MAX_PATH_BYTES}`, {
      key,
      file: where.file,
      line: where.line,
    })
  }
  return value
}

const coerceMasterFinger: Coercer = ({ value, fail }) => {
  if (typeof value === 'string') return value
  if (Array.isArray(value)) return isStringList(value) ? value : fail(FINGERPRINTS)
  if (isPlainObject(value) && Object.values(value).every((item) => typeof item === 'string')) return value
  return fail(FINGERPRINTS)
}

const coerceLogLevel: Coercer = ({ spec, value, fail }) => {
  if (value === null && spec.kind === 'nullable-log-level') return null
  if (typeof value !== 'string') return fail(spec.kind === 'log-level' ? 'a log level' : 'a log level or null')
  try {
    return parseLogLevel(value)
  } catch {
    return fail('one of quiet, error, warning, info, debug, trace')
  }
}

const coerceTransport: Coercer = ({ spec, value, fail }) => {
  if (value === null && spec.kind === 'nullable-transport') return null
  return typeof value === 'string' && (BUILTIN_TRANSPORTS as readonly string[]).includes(value) ? value : fail(`one of ${BUILTIN_TRANSPORTS.join(', ')}`)
}

/** A check that only accepts or refuses: the value as it is, or `expected` in the error. */
const accepts =
  (test: (value: unknown) => boolean, expected: string): Coercer =>
  ({ value, fail }) =>
    test(value) ? value : fail(expected)

const COERCERS: { readonly [K in ValueKind]: Coercer } = {
  string: coerceString,
  'nullable-string': coerceString,
  integer: coerceNumber,
  number: coerceNumber,
  port: coercePort,
  path: coercePath,
  boolean: accepts((value) => typeof value === 'boolean', 'true or false'),
  map: accepts(isPlainObject, 'a mapping'),
  'string-or-list': accepts((value) => typeof value === 'string' || isStringList(value), 'a string or a list of strings'),
  list: accepts(isStringList, 'a list of strings'),
  'boolean-or-map': accepts((value) => typeof value === 'boolean' || isPlainObject(value), 'true, false or a mapping'),
  'map-list': accepts((value) => Array.isArray(value) && value.every((item) => isPlainObject(item)), 'a list of mappings'),
  'master-finger': coerceMasterFinger,
  'log-level': coerceLogLevel,
  'nullable-log-level': coerceLogLevel,
  transport: coerceTransport,
  'nullable-transport': coerceTransport,
  'transport-opts': accepts(isPlainObject, 'a mapping of transport name to options'),
  // Salt's json outputter takes an int, `pretty`, null (one line) or a string used as the indent.
  'output-indent': accepts(
    (value) => value === null || typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value)),
    'an integer, pretty or null',
  ),
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
  return COERCERS[spec.kind]({ key, spec, value, where, fail })
}

/** What an override parser is given: the key, its spec, the text after `=`, and how to fail naming the key. */
interface Override {
  key: string
  spec: KeySpec
  raw: string
  fail: (expected: string) => never
}

type OverrideParser = (o: Override) => unknown

const COMMAND_LINE_SOURCE: ConfigSource = { file: COMMAND_LINE }
const coerceText = (o: Override, value: unknown): unknown => coerceValue(o.key, o.spec, value, COMMAND_LINE_SOURCE)
const isNullText = (raw: string): boolean => raw === '' || raw === 'null' || raw === '~'
const nullOrText: OverrideParser = ({ raw }) => (isNullText(raw) ? null : raw)
/** YAML flow text (coerced) when it opens with one of `openers`, else the text itself. */
const yamlWhenOpened =
  (openers: RegExp): OverrideParser =>
  (o) =>
    openers.test(o.raw) ? coerceText(o, parseYamlValue(o.raw, o.key)) : o.raw
const yamlValue: OverrideParser = (o) => coerceText(o, parseYamlValue(o.raw, o.key))

const parseIntegerText: OverrideParser = (o) => {
  const unit = o.spec.unit === undefined ? '' : ` (${o.spec.unit})`
  if (!/^-?\d+$/.test(o.raw.trim())) return o.fail(o.spec.kind === 'port' ? 'a port number (an integer from 0 to 65535)' : `an integer${unit}`)
  return coerceText(o, Number(o.raw))
}

const parseNumberText: OverrideParser = (o) => {
  const unit = o.spec.unit === undefined ? '' : ` (${o.spec.unit})`
  const value = o.raw.trim() === '' ? Number.NaN : Number(o.raw)
  return Number.isFinite(value) ? coerceText(o, value) : o.fail(`a number${unit}`)
}

const parseBooleanText: OverrideParser = ({ raw, fail }) => {
  const lower = raw.trim().toLowerCase()
  if (['true', 'yes', 'on', '1'].includes(lower)) return true
  if (['false', 'no', 'off', '0'].includes(lower)) return false
  return fail('true or false (true/false, yes/no, on/off, 1/0)')
}

const OVERRIDE_PARSERS: { readonly [K in ValueKind]: OverrideParser } = {
  string: (o) => coerceText(o, o.raw),
  path: (o) => coerceText(o, o.raw),
  transport: ({ raw }) => raw,
  'log-level': ({ raw }) => raw,
  'nullable-log-level': nullOrText,
  'nullable-string': nullOrText,
  'nullable-transport': nullOrText,
  integer: parseIntegerText,
  port: parseIntegerText,
  number: parseNumberText,
  boolean: parseBooleanText,
  'string-or-list': yamlWhenOpened(/^\s*\[/),
  // `netapi_enable_clients=local,runner` or YAML `[local, runner]`.
  list: (o) =>
    coerceText(
      o,
      /^\s*\[/.test(o.raw)
        ? parseYamlValue(o.raw, o.key)
        : o.raw
            .split(',')
            .map((item) => item.trim())
            .filter((item) => item !== ''),
    ),
  'master-finger': yamlWhenOpened(/^\s*[[{]/),
  map: yamlValue,
  'transport-opts': yamlValue,
  'boolean-or-map': yamlValue,
  'map-list': yamlValue,
  'output-indent': ({ raw }) => (raw === 'null' || raw === '~' ? null : /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw),
}

/**
 * Parses a command-line `key=value` into a typed override, coercing with the schema's type:
 * `timeout=30` → 30, `auto_accept=yes` → true, `grains={role: web}` → a mapping (YAML flow).
 * A key the schema does not know keeps its YAML-parsed value (loadConfig will warn about it).
 */
export function parseOverride(text: string): { key: string; value: unknown } {
  const at = text.indexOf('=')
  if (at <= 0) {
    throw new ConfigError(`${COMMAND_LINE}: override '${text}' must look like key=value`, { file: COMMAND_LINE })
  }
  const key = text.slice(0, at).trim()
  const raw = text.slice(at + 1)
  const spec = keySpec(key)
  if (spec === undefined) return { key, value: parseYamlValue(raw, key) }
  const fail = (expected: string): never => {
    throw new ConfigError(`${COMMAND_LINE}: ${key} must be ${expected}, got '${raw}'`, { key, file: COMMAND_LINE })
  }
  return { key, value: OVERRIDE_PARSERS[spec.kind]({ key, spec, raw, fail }) }
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
    return yamlModule().parse(raw, SALT_YAML_OPTIONS) as unknown
  } catch (error) {
    throw new ConfigError(`${COMMAND_LINE}: ${key}: cannot parse '${raw}' as YAML`, { key, file: COMMAND_LINE }, { cause: error })
  }
}

export function describeValue(value: unknown): string {
  if (value === null || value === undefined) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  if (typeof value === 'string') return `string '${value}'`
  return `${typeof value} ${String(value)}`
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
