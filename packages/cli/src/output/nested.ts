import { getColors, stripEscSequence } from './colors.js'
import { pythonNumberRepr, sortedKeys, splitLines } from './python.js'

export interface NestedOptions {
  color?: boolean
  /** A non-zero retcode paints dicts and lists red, as Salt does. */
  retcode?: number
  /** Salt's nested_indent: where the top level starts. */
  indent?: number
  /** Salt's strip_colors: escape characters in strings become `?` (Brine's default; Salt's is false). */
  stripColors?: boolean
}

/**
 * Salt's default `nested` outputter (salt/output/nested.py): dict keys sorted, each followed by `:`
 * with its value indented four spaces; dicts below the top level preceded by `----------`; list
 * items as `- item`, and `|_` before a list item that is itself a list or dict. Colours as Salt's:
 * keys cyan, strings green, numbers, booleans and None bold yellow, everything red after a failure.
 */
export function nestedOutput(data: unknown, options: NestedOptions = {}): string {
  const c = getColors(options.color)
  const failed = (options.retcode ?? 0) !== 0
  const stripColors = options.stripColors ?? true
  const line = (indent: number, color: string, message: string, prefix = '', suffix = ''): string =>
    `${' '.repeat(indent)}${color}${prefix}${message}${c.ENDC}${suffix}`
  const out: string[] = []
  const display = (value: unknown, indent: number, prefix: string): void => {
    if (value instanceof Uint8Array) {
      // Bytes that decode as UTF-8 print as a string; others print nothing, as in Salt.
      try {
        value = new TextDecoder('utf-8', { fatal: true }).decode(value)
      } catch {
        return
      }
    }
    if (value === null || value === undefined || typeof value === 'boolean') {
      out.push(line(indent, c.LIGHT_YELLOW, value === true ? 'True' : value === false ? 'False' : 'None', prefix))
    } else if (typeof value === 'number' || typeof value === 'bigint') {
      out.push(line(indent, c.LIGHT_YELLOW, pythonNumberRepr(value), prefix))
    } else if (typeof value === 'string') {
      let first = true
      for (const text of splitLines(value)) {
        out.push(line(indent, c.GREEN, stripColors ? stripEscSequence(text) : text, first ? prefix : ' '.repeat(prefix.length)))
        first = false
      }
    } else if (Array.isArray(value)) {
      const color = failed ? c.RED : c.GREEN
      for (const item of value) {
        if (typeof item === 'object' && item !== null && !(item instanceof Uint8Array)) {
          out.push(line(indent, color, '|_'))
          display(item, indent + 2, Array.isArray(item) ? '- ' : '')
        } else {
          display(item, indent, '- ')
        }
      }
    } else if (typeof value === 'object') {
      const color = failed ? c.RED : c.CYAN
      if (indent > 0) out.push(line(indent, color, '----------'))
      const record = value as Record<string, unknown>
      for (const key of sortedKeys(record)) {
        out.push(line(indent, color, key, prefix, ':'))
        display(record[key], indent + 4, '')
      }
    }
  }
  display(data, options.indent ?? 0, '')
  return out.join('\n')
}

/** Salt's `no_return` outputter: a minion that did not answer, its id cyan and the notice red. */
export function noReturnOutput(data: Record<string, string>, options: { color?: boolean } = {}): string {
  const c = getColors(options.color)
  let out = ''
  for (const key of sortedKeys(data)) {
    out += `${c.CYAN}${key}${c.ENDC}:\n`
    for (const text of (data[key] ?? '').split('\n')) out += `${c.RED}    ${text}${c.ENDC}\n`
  }
  return out
}
