/**
 * YAML as Salt 3006 loads it: PyYAML's SafeLoader (YAML 1.1 resolvers) with the changes of Salt's
 * `SaltYamlSafeLoader`. Parsing is the `yaml` package's; only the scalar resolution and the
 * construction of the result follow PyYAML and Salt:
 *
 * - integers written with a leading zero are decimal (`0755` is 755, Salt strips the zeros);
 *   a signed one (`-0755`) still goes through YAML 1.1's octal rule, as in Salt;
 * - YAML 1.1 forms that YAML 1.2 lacks: `0b1010`, sexagesimal `1:30` (90), `yes`/`no`/`on`/`off`
 *   (but not `y`/`n`, which PyYAML leaves as strings), `1_000`;
 * - what YAML 1.1 does *not* type stays a string: `1e5` (PyYAML wants a signed exponent, `1.0e+5`),
 *   `-.5`, `08`;
 * - timestamps stay strings (`2024-01-31`), as Salt 3006 constructs them with construct_scalar;
 * - a duplicate key, a list or mapping used as a key, and an unknown tag are errors.
 */
import type { Document, DocumentOptions, ParseOptions, ScalarTag, SchemaOptions } from 'yaml'
import { YamlLoadError } from './errors.js'
import { yamlModule } from './yaml-module.js'

// PyYAML's implicit resolvers (yaml/resolver.py, YAML 1.1), as regular expressions on the whole scalar.
const NULL = /^(?:~|null|Null|NULL|)$/
const BOOL = /^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$/
const INT = /^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$/
const FLOAT =
  /^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/

const TRUE_WORDS = new Set(['yes', 'true', 'on'])
const FALSE_WORDS = new Set(['no', 'false', 'off'])

/** Base-60 digits `1:30:05` → 5405, as PyYAML adds them up. */
function sexagesimal(text: string, parse: (part: string) => number): number {
  return text.split(':').reduce((total, part) => total * 60 + parse(part), 0)
}

/**
 * PyYAML's construct_yaml_int after Salt's construct_scalar, which strips the leading zeros of an
 * unsigned integer (not `0b`/`0x`). Integers past JavaScript's 2^53 keep their text, since a
 * JavaScript number would silently change them.
 */
function constructInt(source: string, onError: (message: string) => void): unknown {
  let text = source
  if (text !== '0' && text.startsWith('0') && !text.startsWith('0b') && !text.startsWith('0x')) text = text.replace(/^0+/, '') || '0'
  let digits = text.replaceAll('_', '')
  const sign = digits.startsWith('-') ? -1 : 1
  if (digits.startsWith('-') || digits.startsWith('+')) digits = digits.slice(1)
  let value: number
  if (digits === '0') value = 0
  else if (digits.startsWith('0b')) value = parseStrict(digits.slice(2), 2)
  else if (digits.startsWith('0x')) value = parseStrict(digits.slice(2), 16)
  else if (digits.startsWith('0')) value = parseStrict(digits, 8)
  else if (digits.includes(':')) value = sexagesimal(digits, (part) => parseStrict(part, 10))
  else value = parseStrict(digits.trim(), 10)
  if (Number.isNaN(value)) {
    onError(`invalid literal for int(): '${source}'`)
    return source
  }
  const signed = sign * value
  return Number.isSafeInteger(signed) ? signed : source
}

function parseStrict(digits: string, radix: number): number {
  const valid = { 2: /^[01]+$/, 8: /^[0-7]+$/, 10: /^[0-9]+$/, 16: /^[0-9a-fA-F]+$/ }[radix as 2 | 8 | 10 | 16]
  return valid.test(digits) ? Number.parseInt(digits, radix) : Number.NaN
}

/** PyYAML's construct_yaml_float: `.inf`, `.nan`, base 60, else Python's float(). */
function constructFloat(source: string, onError: (message: string) => void): unknown {
  let text = source.replaceAll('_', '').toLowerCase()
  const sign = text.startsWith('-') ? -1 : 1
  if (text.startsWith('-') || text.startsWith('+')) text = text.slice(1)
  if (text === '.inf') return sign * Number.POSITIVE_INFINITY
  if (text === '.nan') return Number.NaN
  if (text.includes(':')) return sign * sexagesimal(text, Number)
  const trimmed = text.trim()
  if (/^(?:inf|infinity)$/.test(trimmed)) return sign * Number.POSITIVE_INFINITY
  if (trimmed === 'nan') return Number.NaN
  const value = /^(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?$/.test(trimmed) ? Number(trimmed) : Number.NaN
  if (Number.isNaN(value)) {
    onError(`could not convert string to float: '${source}'`)
    return source
  }
  return sign * value
}

/** Both forms of a type: the explicit `!!tag` (PyYAML constructs whatever text it is given) first, then the implicit one. */
function scalarTags(tag: string, test: RegExp, resolve: ScalarTag['resolve']): ScalarTag[] {
  return [
    { tag, resolve },
    { tag, default: true, test, resolve },
  ]
}

const TAG = 'tag:yaml.org,2002:'

/** The scalar tags of Salt's loader, on top of the failsafe schema's map, seq and str. */
const SALT_SCALAR_TAGS: ScalarTag[] = [
  ...scalarTags(`${TAG}null`, NULL, () => null),
  ...scalarTags(`${TAG}bool`, BOOL, (text, onError) => {
    const word = text.toLowerCase()
    if (TRUE_WORDS.has(word)) return true
    if (FALSE_WORDS.has(word)) return false
    onError(`'${text}' is not a boolean`)
    return text
  }),
  ...scalarTags(`${TAG}int`, INT, constructInt),
  ...scalarTags(`${TAG}float`, FLOAT, constructFloat),
  // Salt 3006 builds timestamps with construct_scalar: the text, not a datetime. Only an explicit
  // `!!timestamp` needs a tag; a plain date is already a string when no other resolver claims it.
  { tag: `${TAG}timestamp`, resolve: (text) => text },
  // Salt's loader accepts Python 2's unicode tag as a plain string.
  { tag: `${TAG}python/unicode`, resolve: (text) => text },
]

/**
 * Types a plain (unquoted) scalar as PyYAML's implicit resolvers and Salt's constructors do:
 * `0755` → 755, `yes` → true, `~` → null, `1e5` → '1e5', `2024-01-31` → '2024-01-31'.
 */
export function resolveSaltScalar(text: string): unknown {
  const tag = SALT_SCALAR_TAGS.find((candidate) => candidate.default === true && candidate.test?.test(text) === true)
  if (tag === undefined) return text
  let failed = false
  const value = tag.resolve(text, () => (failed = true), {})
  return failed ? text : value
}

/**
 * Parse options giving the `yaml` package Salt's rules: the failsafe schema plus the tags above,
 * `<<` merge keys (PyYAML's, which Salt flattens the same way), `!!binary`, unique keys, and no
 * fallback to the yaml package's own 1.1 tags (`!!set`, `!!omap` and a datetime `!!timestamp`
 * are not what Salt builds). Shared with the config loader, since Salt reads its config files the same way.
 */
export const SALT_YAML_OPTIONS: ParseOptions & DocumentOptions & SchemaOptions = {
  version: '1.1',
  schema: 'failsafe',
  customTags: [...SALT_SCALAR_TAGS, 'binary'],
  resolveKnownTags: false,
  merge: true,
  uniqueKeys: true,
  strict: true,
}

/** How many aliases one load may expand: enough for real documents, not for a billion laughs. */
const MAX_ALIAS_COUNT = 100

/**
 * Loads one YAML document as Salt 3006's `salt.utils.yaml.safe_load` does; throws
 * {@link YamlLoadError} where Salt's loader raises. Mapping keys become strings as Python's `str()`
 * shows them (`None`, `True`, `1`), since JavaScript objects only have string keys.
 */
export function loadSaltYaml(text: string): unknown {
  let doc: Document.Parsed
  try {
    doc = yamlModule().parseDocument(text, { ...SALT_YAML_OPTIONS, prettyErrors: false }) as Document.Parsed
  } catch (error) {
    throw new YamlLoadError(text, (error as Error).message, { cause: error })
  }
  // An unknown tag is only a warning to the yaml package; PyYAML cannot construct it.
  const problem = doc.errors[0] ?? doc.warnings[0]
  if (problem !== undefined) throw new YamlLoadError(text, problem.message.split('\n')[0] ?? problem.message, { cause: problem })
  let value: unknown
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT, mapAsMap: true })
  } catch (error) {
    throw new YamlLoadError(text, (error as Error).message, { cause: error })
  }
  return fromMaps(value, text, new Set())
}

/** Python's str() of a mapping key. */
function keyText(key: unknown): string {
  if (key === null || key === undefined) return 'None'
  if (key === true) return 'True'
  if (key === false) return 'False'
  if (typeof key === 'string') return key
  if (typeof key === 'number' || typeof key === 'bigint') return String(key)
  if (typeof key === 'symbol') return key.description ?? ''
  return String(key)
}

function fromMaps(value: unknown, text: string, open: Set<unknown>): unknown {
  if (value instanceof Map || Array.isArray(value)) {
    // A document can alias its own ancestor (`&a [*a]`); Python builds a cycle, JSON-like data cannot hold one.
    if (open.has(value)) throw new YamlLoadError(text, 'recursive structure (an alias to its own ancestor)')
    open.add(value)
    try {
      if (Array.isArray(value)) return value.map((item) => fromMaps(item, text, open))
      const out: Record<string, unknown> = {}
      const seen = new Set<string>()
      for (const [key, item] of value) {
        if (key instanceof Map || Array.isArray(key)) throw new YamlLoadError(text, 'found unacceptable key (a list or mapping cannot be a key)')
        // Python compares keys by value: `true` and `1` are the same key, as are `1` and `1.0`.
        const identity = typeof key === 'boolean' ? String(Number(key)) : typeof key === 'number' ? String(key) : `${typeof key}:${String(key)}`
        if (seen.has(identity)) throw new YamlLoadError(text, `found conflicting ID '${keyText(key)}'`)
        seen.add(identity)
        out[keyText(key)] = fromMaps(item, text, open)
      }
      return out
    } finally {
      open.delete(value)
    }
  }
  if (value instanceof Set) throw new YamlLoadError(text, 'sets are not supported')
  return value
}
