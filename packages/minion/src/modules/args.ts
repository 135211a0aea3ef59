/**
 * Salt's argument handling on the minion side: `key=value` strings and `__kwarg__` dicts become
 * keyword arguments (salt.utils.args.parse_input / load_args_and_kwargs), string values are typed
 * the way Salt's `yamlify_arg` types them (YAML 1.1 scalars and flow collections), and a call is
 * bound to a function's declared parameters with Python's rules and Python's error messages.
 */
import { ArgumentError, InvocationError } from '../errors.js'
import type { ModuleFunction } from './types.js'

/** Salt's KWARG_REGEX: an identifier (dots and dashes allowed), `=`, not `==`, then the value. */
const KWARG_PATTERN = /^([\p{L}_][\p{L}\p{N}_.-]*)=(?!=)(.*)$/u

/** Splits `name=value` into its parts, or returns undefined for a plain positional string. */
export function parseKwarg(arg: string): [string, string] | undefined {
  const match = KWARG_PATTERN.exec(arg)
  if (match === null) return undefined
  return [match[1] as string, match[2] as string]
}

export function isKwargDict(value: unknown): value is Record<string, unknown> & { __kwarg__: true } {
  return isPlainObject(value) && value.__kwarg__ === true
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** salt.utils.args.parse_input: positional args and keyword args, values of `k=v` yamlified. */
export function parseInput(args: readonly unknown[]): { args: unknown[]; kwargs: Record<string, unknown> } {
  const positional: unknown[] = []
  const kwargs: Record<string, unknown> = {}
  for (const arg of args) {
    if (typeof arg === 'string') {
      const parsed = parseKwarg(arg)
      if (parsed === undefined) positional.push(arg)
      else kwargs[parsed[0]] = yamlifyArg(parsed[1])
    } else if (isKwargDict(arg)) {
      for (const [key, value] of Object.entries(arg)) if (key !== '__kwarg__') kwargs[key] = value
    } else {
      positional.push(arg)
    }
  }
  return { args: positional, kwargs }
}

/**
 * salt.minion.load_args_and_kwargs: splits a publish's `arg` list for `fn`. Keyword arguments the
 * function cannot take raise Salt's "The following keyword arguments are not valid" error; when
 * the function takes `**kwargs` the publish data is added as `__pub_<key>`.
 */
export function loadArgsAndKwargs(
  fn: Pick<ModuleFunction, 'args' | 'kwargs'>,
  args: readonly unknown[],
  data?: Record<string, unknown>,
): { args: unknown[]; kwargs: Record<string, unknown> } {
  const positional: unknown[] = []
  const kwargs: Record<string, unknown> = {}
  const invalid: string[] = []
  const accept = (key: string, value: unknown): void => {
    if (fn.kwargs === true || fn.args.includes(key)) kwargs[key] = value
    else invalid.push(`${key}=${pythonStr(value)}`)
  }
  for (const arg of args) {
    if (isKwargDict(arg)) {
      for (const [key, value] of Object.entries(arg)) if (key !== '__kwarg__') accept(key, value)
    } else if (typeof arg === 'string' && parseKwarg(arg) !== undefined) {
      const [key, value] = parseKwarg(arg) as [string, string]
      accept(key, yamlifyArg(value))
    } else {
      positional.push(arg)
    }
  }
  if (invalid.length > 0) {
    throw new InvocationError(`The following keyword arguments are not valid: ${invalid.join(', ')}`)
  }
  if (fn.kwargs === true && data !== undefined) {
    for (const [key, value] of Object.entries(data)) kwargs[`__pub_${key}`] = value
  }
  return { args: positional, kwargs }
}

/**
 * Binds a call to `fn`'s parameters as Python would, raising Python's TypeError wording as an
 * {@link ArgumentError}. Returns the declared parameters in order (then extra positionals when the
 * function takes `*args`) and the keyword arguments left over for `**kwargs`.
 */
export function bindArguments(
  fn: Pick<ModuleFunction, 'name' | 'args' | 'defaults' | 'varargs' | 'kwargs'>,
  positional: readonly unknown[],
  keywords: Readonly<Record<string, unknown>>,
): { args: unknown[]; kwargs: Record<string, unknown> } {
  const short = fn.name.slice(fn.name.indexOf('.') + 1)
  const names = fn.args
  if (positional.length > names.length && fn.varargs !== true) {
    const takes = `${names.length} positional argument${names.length === 1 ? '' : 's'}`
    const given = `${positional.length} ${positional.length === 1 ? 'was' : 'were'} given`
    throw new ArgumentError(fn.name, `${short}() takes ${takes} but ${given}`)
  }
  const rest: Record<string, unknown> = { ...keywords }
  const bound: unknown[] = []
  const missing: string[] = []
  names.forEach((name, index) => {
    if (index < positional.length) {
      if (Object.hasOwn(rest, name)) throw new ArgumentError(fn.name, `${short}() got multiple values for argument '${name}'`)
      bound.push(positional[index])
    } else if (Object.hasOwn(rest, name)) {
      bound.push(rest[name])
      delete rest[name]
    } else if (fn.defaults !== undefined && Object.hasOwn(fn.defaults, name)) {
      bound.push(fn.defaults[name])
    } else {
      missing.push(name)
      bound.push(undefined)
    }
  })
  if (missing.length > 0) {
    const quoted = missing.map((name) => `'${name}'`)
    const list = quoted.length === 1 ? quoted[0] : `${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}`
    throw new ArgumentError(
      fn.name,
      `${short}() missing ${missing.length} required positional argument${missing.length === 1 ? '' : 's'}: ${list}`,
    )
  }
  if (fn.kwargs !== true) {
    const unexpected = Object.keys(rest)[0]
    if (unexpected !== undefined) throw new ArgumentError(fn.name, `${short}() got an unexpected keyword argument '${unexpected}'`)
  }
  return { args: [...bound, ...positional.slice(names.length)], kwargs: fn.kwargs === true ? rest : {} }
}

/** salt.utils.args.clean_kwargs: drops the `__pub_*` and other dunder keys. */
export function cleanKwargs(kwargs: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(kwargs).filter(([key]) => !key.startsWith('__')))
}

/** Python's `str()` of a value, for messages Salt formats with `{}`. */
export function pythonStr(value: unknown): string {
  if (value === null || value === undefined) return 'None'
  if (value === true) return 'True'
  if (value === false) return 'False'
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  try {
    return JSON.stringify(value)
  } catch {
    return String(value)
  }
}

// ---------------------------------------------------------------------------------------------
// yamlify_arg: YAML 1.1 typing of a CLI value, as PyYAML's safe_load does it, with Salt's guards.

const NULLS = new Set(['~', 'null', 'Null', 'NULL'])
const TRUES = new Set(['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'])
const FALSES = new Set(['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'])
const INT_DEC = /^[-+]?(?:0|[1-9][0-9_]*)$/
const INT_HEX = /^[-+]?0x[0-9a-fA-F_]+$/
const INT_OCT = /^[-+]?0[0-7_]+$/
const INT_BIN = /^[-+]?0b[01_]+$/
const FLOAT = /^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?)$/

/** Resolves a plain (unquoted) YAML 1.1 scalar. */
export function resolvePlainScalar(text: string): unknown {
  if (text === '' || NULLS.has(text)) return null
  // PyYAML's bool set is yes/no/true/false/on/off; bare y/n stay strings there.
  if (TRUES.has(text) && text.length > 1) return true
  if (FALSES.has(text) && text.length > 1) return false
  const sign = text.startsWith('-') ? -1 : 1
  const digits = text.replace(/^[-+]/, '').replaceAll('_', '')
  if (INT_DEC.test(text)) return sign * Number(digits)
  if (INT_HEX.test(text)) return sign * Number.parseInt(digits.slice(2), 16)
  if (INT_BIN.test(text)) return sign * Number.parseInt(digits.slice(2), 2)
  if (INT_OCT.test(text)) return sign * Number.parseInt(digits.slice(1), 8)
  if (FLOAT.test(text)) return Number(text.replaceAll('_', ''))
  if (/^[-+]?\.(?:inf|Inf|INF)$/.test(text)) return sign * Number.POSITIVE_INFINITY
  if (/^\.(?:nan|NaN|NAN)$/.test(text)) return Number.NaN
  return text
}

/**
 * salt.utils.args.yamlify_arg: types a string the way `salt '*' fun key=value` does. Lists and
 * dicts must be written in flow style (`[1, 2]`, `{a: 1}`); anything else that would parse into a
 * collection stays the original string, and a value with `#` keeps its text unless it parses to a
 * non-string.
 */
export function yamlifyArg(arg: unknown): unknown {
  if (typeof arg !== 'string') return arg
  const trimmed = arg.trim()
  if (trimmed === '') return arg
  if (arg.includes('_') && /^[0-9_]+$/.test(trimmed)) return arg
  if (arg === 'None') return null
  let parsed: unknown
  try {
    parsed = parseYamlValue(arg)
  } catch {
    return arg
  }
  if (arg.includes('#')) return typeof parsed === 'string' || parsed === null ? arg : parsed
  if (Array.isArray(parsed)) return trimmed.startsWith('[') ? parsed : arg
  if (isPlainObject(parsed)) return trimmed.startsWith('{') ? parsed : arg
  if (parsed === null && (trimmed.startsWith('#') || arg === '!')) return arg
  if (parsed === '' && (arg === '|' || arg === '!')) return arg
  return parsed
}

/** Parses one YAML value on a single line: a flow collection, a quoted string or a plain scalar. */
function parseYamlValue(text: string): unknown {
  const parser = new FlowParser(text)
  const value = parser.parseTop()
  return value
}

class FlowParser {
  #pos = 0
  constructor(private readonly text: string) {}

  parseTop(): unknown {
    this.#skipSpace()
    const first = this.text[this.#pos]
    if (first === '[' || first === '{' || first === '"' || first === "'") {
      const value = this.#parseValue(false)
      this.#skipSpace()
      this.#skipComment()
      if (this.#pos < this.text.length) throw new SyntaxError(`trailing text at ${this.#pos}`)
      return value
    }
    // A plain scalar at top level runs to the end of the line (minus a ` #` comment).
    const commentAt = this.text.search(/(^|\s)#/)
    const raw = (commentAt === -1 ? this.text : this.text.slice(0, commentAt)).trim()
    if (/^(?:- |-$)|^[^'"\s][^:]*:(?:\s|$)/.test(raw)) return { block: raw } // block collection: Salt keeps the string
    return resolvePlainScalar(raw)
  }

  #skipSpace(): void {
    while (this.#pos < this.text.length && /\s/.test(this.text[this.#pos] as string)) this.#pos++
  }

  #skipComment(): void {
    if (this.text[this.#pos] === '#') this.#pos = this.text.length
  }

  #parseValue(inFlow: boolean, isKey = false): unknown {
    this.#skipSpace()
    const char = this.text[this.#pos]
    if (char === '[') return this.#parseSequence()
    if (char === '{') return this.#parseMapping()
    if (char === '"') return this.#parseDoubleQuoted()
    if (char === "'") return this.#parseSingleQuoted()
    return this.#parsePlain(inFlow, isKey)
  }

  #parseSequence(): unknown[] {
    this.#pos++ // [
    const items: unknown[] = []
    for (;;) {
      this.#skipSpace()
      if (this.text[this.#pos] === ']') {
        this.#pos++
        return items
      }
      items.push(this.#parseValue(true))
      this.#skipSpace()
      const next = this.text[this.#pos]
      if (next === ',') this.#pos++
      else if (next !== ']') throw new SyntaxError(`expected ',' or ']' at ${this.#pos}`)
    }
  }

  #parseMapping(): Record<string, unknown> {
    this.#pos++ // {
    const map: Record<string, unknown> = {}
    for (;;) {
      this.#skipSpace()
      if (this.text[this.#pos] === '}') {
        this.#pos++
        return map
      }
      const key = this.#parseValue(true, true)
      this.#skipSpace()
      let value: unknown = null
      if (this.text[this.#pos] === ':') {
        this.#pos++
        this.#skipSpace()
        const after = this.text[this.#pos]
        value = after === ',' || after === '}' ? null : this.#parseValue(true)
      }
      map[pythonStr(key)] = value
      this.#skipSpace()
      const next = this.text[this.#pos]
      if (next === ',') this.#pos++
      else if (next !== '}') throw new SyntaxError(`expected ',' or '}' at ${this.#pos}`)
    }
  }

  #parseDoubleQuoted(): string {
    const match = /^"(?:[^"\\]|\\.)*"/.exec(this.text.slice(this.#pos))
    if (match === null) throw new SyntaxError('unterminated double-quoted string')
    this.#pos += match[0].length
    return JSON.parse(match[0]) as string
  }

  #parseSingleQuoted(): string {
    const match = /^'(?:[^']|'')*'/.exec(this.text.slice(this.#pos))
    if (match === null) throw new SyntaxError('unterminated single-quoted string')
    this.#pos += match[0].length
    return match[0].slice(1, -1).replaceAll("''", "'")
  }

  #parsePlain(inFlow: boolean, isKey: boolean): unknown {
    const start = this.#pos
    while (this.#pos < this.text.length) {
      const char = this.text[this.#pos] as string
      const next = this.text[this.#pos + 1]
      if (inFlow && (char === ',' || char === ']' || char === '}')) break
      if (isKey && char === ':' && (next === undefined || /[\s,\]}]/.test(next))) break
      if (char === '#' && /\s/.test(this.text[this.#pos - 1] ?? '')) break
      this.#pos++
    }
    return resolvePlainScalar(this.text.slice(start, this.#pos).trim())
  }
}

// ---------------------------------------------------------------------------------------------

/** Python's fnmatch (posix, case-sensitive): `*`, `?`, `[seq]`, `[!seq]`. */
export function fnmatch(name: string, pattern: string): boolean {
  return globToRegExp(pattern).test(name)
}

export function globToRegExp(pattern: string): RegExp {
  let source = ''
  for (let index = 0; index < pattern.length; index++) {
    const char = pattern[index] as string
    if (char === '*') source += '.*'
    else if (char === '?') source += '.'
    else if (char === '[') {
      const close = pattern.indexOf(']', index + 2)
      if (close === -1) {
        source += '\\['
      } else {
        let body = pattern.slice(index + 1, close)
        const negate = body.startsWith('!')
        if (negate) body = body.slice(1)
        source += `[${negate ? '^' : ''}${body.replace(/[\\\]^]/g, '\\$&')}]`
        index = close
      }
    } else source += char.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
  }
  return new RegExp(`^${source}$`, 's')
}

/** salt.utils.data.traverse_dict_and_list: `a:b:0` walks dicts by key and lists by index. */
export function traverseDictAndList(data: unknown, key: string, fallback: unknown, delimiter = ':'): unknown {
  let current: unknown = data
  for (const part of key.split(delimiter)) {
    if (Array.isArray(current)) {
      const index = Number(part)
      if (Number.isInteger(index) && index >= 0 && index < current.length) {
        current = current[index]
        continue
      }
      // Salt also looks for a dict in the list holding the key.
      const holder = current.find((item) => isPlainObject(item) && Object.hasOwn(item, part))
      if (holder === undefined) return fallback
      current = (holder as Record<string, unknown>)[part]
    } else if (isPlainObject(current) && Object.hasOwn(current, part)) {
      current = current[part]
    } else {
      return fallback
    }
  }
  return current
}
