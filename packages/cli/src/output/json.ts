import { comparePython, pythonBytesRepr, pythonNumberRepr } from './python.js'

export interface JsonOutputOptions {
  /**
   * Salt's `output_indent` (`--out-indent N` or the config key): absent → 4 spaces in the data's
   * order; `pretty` → 4 spaces, keys sorted; a negative number or null → one line; 0 → a line per
   * item without indenting; N → N spaces; a string → that string as the indent (as json.dumps takes it).
   */
  indent?: number | string | null
}

/** What Python's json.dumps takes: indent (None for one line) and sort_keys. */
interface DumpOptions {
  indent: string | undefined
  sortKeys: boolean
}

/**
 * Salt's `json` outputter (salt/output/json_out.py): `json.dumps(data, default=repr, indent=…,
 * sort_keys=…)` with Python's text: `, ` and `: ` on one line, `,` at line ends when indented,
 * floats as Python prints them, NaN and Infinity as Python writes them, non-ASCII kept.
 */
export function jsonOutput(data: unknown, options: JsonOutputOptions = {}): string {
  const indent = options.indent
  if (indent === undefined) return dumps(data, { indent: '    ', sortKeys: false })
  if (indent === 'pretty') return dumps(data, { indent: '    ', sortKeys: true })
  if (indent === null || (typeof indent === 'number' && indent < 0)) return dumps(data, { indent: undefined, sortKeys: false })
  return dumps(data, { indent: typeof indent === 'number' ? ' '.repeat(indent) : indent, sortKeys: false })
}

/**
 * Python's json.dumps(value, ensure_ascii=False, default=repr) with the given indent and sort_keys. The pieces are
 * collected and joined once: joined level by level, a 64 MB string in a return was copied once per level above it.
 */
export function dumps(value: unknown, options: DumpOptions): string {
  const pieces: string[] = []
  writeJson(value, 0, options, pieces)
  return pieces.join('')
}

/** A scalar's JSON text, or undefined for an array or object. */
function scalarJson(item: unknown): string | undefined {
  if (item === null || item === undefined) return 'null'
  if (item === true) return 'true'
  if (item === false) return 'false'
  if (typeof item === 'number') {
    if (Number.isNaN(item)) return 'NaN'
    if (!Number.isFinite(item)) return item > 0 ? 'Infinity' : '-Infinity'
    return pythonNumberRepr(item)
  }
  if (typeof item === 'bigint') return item.toString()
  if (typeof item === 'string') return JSON.stringify(item)
  // default=repr: what json cannot encode becomes its repr(), as a string.
  if (item instanceof Uint8Array) return JSON.stringify(pythonBytesRepr(item))
  return undefined
}

/** Appends `item`'s JSON text, at nesting `level`, to `pieces`. */
function writeJson(item: unknown, level: number, options: DumpOptions, pieces: string[]): void {
  const scalar = scalarJson(item)
  if (scalar !== undefined) {
    pieces.push(scalar)
    return
  }
  const entries: Array<[string | undefined, unknown]> = Array.isArray(item)
    ? item.map((element): [undefined, unknown] => [undefined, element])
    : Object.keys(item as object).map((key): [string, unknown] => [key, (item as Record<string, unknown>)[key]])
  if (!Array.isArray(item) && options.sortKeys) entries.sort(([a], [b]) => comparePython(a as string, b as string))
  const [open, close] = Array.isArray(item) ? ['[', ']'] : ['{', '}']
  if (entries.length === 0) {
    pieces.push(`${open}${close}`)
    return
  }
  const newline = options.indent === undefined ? '' : `\n${options.indent.repeat(level + 1)}`
  const end = options.indent === undefined ? '' : `\n${options.indent.repeat(level)}`
  const separator = `${options.indent === undefined ? ', ' : ','}${newline}`
  pieces.push(`${open}${newline}`)
  entries.forEach(([key, element], index) => {
    if (index > 0) pieces.push(separator)
    if (key !== undefined) pieces.push(`${JSON.stringify(key)}: `)
    writeJson(element, level + 1, options, pieces)
  })
  pieces.push(`${end}${close}`)
}
