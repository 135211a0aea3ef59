/**
 * Salt's argument handling on the minion side: `key=value` strings and `__kwarg__` dicts become
 * keyword arguments (salt.minion.load_args_and_kwargs), the values of `key=value` strings typed by
 * Salt's `yamlify_arg` (from @brine/config, with Salt's YAML loader), and a call is bound to a
 * function's declared parameters with Python's rules and Python's error messages. Positional
 * strings are left as they arrive, as Salt's minion leaves them: the CLI typed them already.
 */
import { isKwargDict, parseKwarg, yamlifyArg } from '@brine/config'
import { ArgumentError, InvocationError } from '../errors.js'
import type { ModuleFunction } from './types.js'

// parse_input with condition=False, as Salt's minion-side callers use it: {args, kwargs}.
export { isKwargDict, parseKwarg, splitInput as parseInput, yamlifyArg } from '@brine/config'

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
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
    throw new ArgumentError(fn.name, `${short}() missing ${missing.length} required positional argument${missing.length === 1 ? '' : 's'}: ${list}`)
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
