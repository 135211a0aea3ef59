/**
 * Salt's command-line argument typing (salt.utils.args): `key=value` words become keyword
 * arguments, and every word is typed by `yamlify_arg` with Salt's YAML loader, so
 * `salt '*' test.arg 1 2.5 True None '[1, 2]' '{a: 1}' 0755 mode=0755` sends
 * `[1, 2.5, true, null, [1, 2], {a: 1}, 755, {__kwarg__: true, mode: 755}]`.
 *
 * Where it runs, as in Salt: `brine` and `brine-call` type every word (Salt's CLI calls
 * `parse_input`); the minion types the values of `key=value` strings it receives (Salt's
 * `load_args_and_kwargs`), so an API caller's `'mode=0755'` arrives as 755 while a positional
 * `'0755'` from the Node API stays the string it was, exactly as through Salt's Python LocalClient.
 */
import { loadSaltYaml } from './salt-yaml.js'

/** Salt's KWARG_REGEX: an identifier (dots and dashes allowed), `=`, not `==`, then the value. */
// Python's `$` also matches before a final newline; `.` stops at any other (Salt leaves `a=b\nc` positional).
const KWARG_PATTERN = /^([\p{L}_][\p{L}\p{N}_.-]*)=(?!=)(.*)\n?$/u

/** A dict in an argument list that carries keyword arguments (Salt's `__kwarg__` marker). */
export type KwargDict = Record<string, unknown> & { __kwarg__: true }

/** Splits `name=value` into its parts, or returns undefined for a plain positional string. */
export function parseKwarg(arg: string): [string, string] | undefined {
  const match = KWARG_PATTERN.exec(arg)
  if (match === null) return undefined
  return [match[1] as string, match[2] as string]
}

export function isKwargDict(value: unknown): value is KwargDict {
  return isPlainRecord(value) && value.__kwarg__ === true
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** What yamlify_arg keeps: scalars (numbers, booleans and None included), lists and dicts; not bytes. */
function isSupported(value: unknown): boolean {
  return value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' || Array.isArray(value) || isPlainRecord(value)
}

/**
 * salt.utils.args.yamlify_arg: types one command-line word with Salt's YAML loader. A list must be
 * written as `[…]` and a dict as `{…}` (a word that loads as a block collection stays the text);
 * empty words, `---`, `...`, digits with underscores and words with a tab or line break are kept
 * as they are; `None` is None; a word with `#` keeps its text unless it loads as a non-string;
 * anything the loader refuses is kept as it was typed, and so is an integer beyond 2^53, which a
 * JavaScript number cannot hold (Salt sends a Python int).
 */
export function yamlifyArg(arg: unknown): unknown {
  if (typeof arg !== 'string') return arg
  const trimmed = arg.trim()
  if (trimmed === '' || trimmed === '---' || trimmed === '...') return arg
  if (arg.includes('_') && /^[0-9_]*$/.test(trimmed)) return arg
  if (/[\t\r\n]/.test(arg)) return arg
  let loaded: unknown
  try {
    if (arg.includes('#')) {
      loaded = loadSaltYaml(arg)
      return typeof loaded === 'string' || loaded === null ? arg : loaded
    }
    loaded = arg === 'None' ? null : loadSaltYaml(arg)
  } catch {
    return arg
  }
  if (isPlainRecord(loaded)) return arg.startsWith('{') ? loaded : arg
  if (Array.isArray(loaded)) return arg.startsWith('[') ? loaded : arg
  if (!isSupported(loaded)) return arg
  // PyYAML loads '|' and '!' as '' and '!' or a comment as None; Salt keeps those words.
  if (loaded === '' && (arg === '|' || arg === '!')) return arg
  if (loaded === null && (trimmed.startsWith('#') || arg === '!')) return arg
  return loaded
}

export interface ParseInputOptions {
  /** Salt's `--no-parse`: names of keyword arguments whose values stay strings. */
  noParse?: readonly string[]
}

/**
 * salt.utils.args.parse_input with `condition=False`: splits command-line words into positional
 * and keyword arguments, typing each with {@link yamlifyArg}. A `{__kwarg__: true, …}` dict adds
 * keyword arguments; any other value is positional.
 */
export function splitInput(args: readonly unknown[], options: ParseInputOptions = {}): { args: unknown[]; kwargs: Record<string, unknown> } {
  const noParse = new Set(options.noParse ?? [])
  const positional: unknown[] = []
  const kwargs: Record<string, unknown> = {}
  for (const arg of args) {
    if (typeof arg === 'string') {
      const pair = parseKwarg(arg)
      if (pair === undefined) positional.push(yamlifyArg(arg))
      else kwargs[pair[0]] = noParse.has(pair[0]) ? pair[1] : yamlifyArg(pair[1])
    } else if (isKwargDict(arg)) {
      for (const [key, value] of Object.entries(arg)) if (key !== '__kwarg__') kwargs[key] = value
    } else {
      positional.push(arg)
    }
  }
  return { args: positional, kwargs }
}

/**
 * salt.utils.args.condition_input: the single argument list a publish carries, keyword arguments
 * riding at the end as one `{__kwarg__: true, …}` dict. (Salt also turns an integer that reads as a
 * 20-digit jid back into its string; here such a number never became one, see {@link yamlifyArg}.)
 */
export function conditionInput(args: readonly unknown[], kwargs: Readonly<Record<string, unknown>> = {}): unknown[] {
  const out = [...args]
  if (Object.keys(kwargs).length > 0) out.push({ __kwarg__: true, ...kwargs })
  return out
}

/** salt.utils.args.parse_input: what `salt` (and `brine`) publish for the words after the function name. */
export function parseInput(args: readonly unknown[], options: ParseInputOptions = {}): unknown[] {
  const split = splitInput(args, options)
  return conditionInput(split.args, split.kwargs)
}
