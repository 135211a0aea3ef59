import { pythonRepr, splitLines } from './python.js'

/** ANSI colours as Salt's get_colors() names them; all empty when colour is off. */
export interface Colors {
  GREEN: string
  LIGHT_YELLOW: string
  CYAN: string
  RED: string
  ENDC: string
}

export const ANSI_COLORS: Colors = { GREEN: '\x1b[0;32m', LIGHT_YELLOW: '\x1b[1;33m', CYAN: '\x1b[0;36m', RED: '\x1b[0;31m', ENDC: '\x1b[0m' }
export const NO_COLORS: Colors = { GREEN: '', LIGHT_YELLOW: '', CYAN: '', RED: '', ENDC: '' }

export interface NestedOptions {
  color?: boolean
  /** A non-zero retcode paints dicts and lists red, as Salt does. */
  retcode?: number
  /** Salt's nested_indent: where the top level starts. */
  indent?: number
}

/** Scalars as Python prints them: True/False/None, numbers as they are. */
function scalar(value: unknown): string {
  return typeof value === 'number' || typeof value === 'bigint' ? String(value) : pythonRepr(value)
}

/**
 * Salt's default `nested` outputter: dict keys sorted, each followed by `:` with its value
 * indented four spaces; dicts below the top level preceded by `----------`; list items as `- item`,
 * and `|_` before a list item that is itself a list or dict.
 */
export function nestedOutput(data: unknown, options: NestedOptions = {}): string {
  const c = options.color === true ? ANSI_COLORS : NO_COLORS
  const failed = (options.retcode ?? 0) !== 0
  const line = (indent: number, color: string, message: string, prefix = '', suffix = ''): string =>
    `${' '.repeat(indent)}${color}${prefix}${message}${c.ENDC}${suffix}`
  const out: string[] = []
  const display = (value: unknown, indent: number, prefix: string): void => {
    if (value === null || value === undefined || typeof value === 'boolean' || typeof value === 'number' || typeof value === 'bigint') {
      out.push(line(indent, c.LIGHT_YELLOW, scalar(value), prefix))
    } else if (typeof value === 'string') {
      let first = true
      for (const text of splitLines(value)) {
        // Escape sequences a command printed are stripped, as Salt's strip_colors does.
        const clean = text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
        out.push(line(indent, c.GREEN, clean, first ? prefix : ' '.repeat(prefix.length)))
        first = false
      }
    } else if (value instanceof Uint8Array) {
      out.push(line(indent, c.GREEN, pythonRepr(value), prefix))
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
      for (const key of Object.keys(record).sort()) {
        out.push(line(indent, color, key, prefix, ':'))
        display(record[key], indent + 4, '')
      }
    } else {
      out.push(line(indent, c.GREEN, String(value), prefix))
    }
  }
  display(data, options.indent ?? 0, '')
  return out.join('\n')
}

/** Salt's `no_return` outputter: a minion that did not answer, in red. */
export function noReturnOutput(data: Record<string, string>, options: { color?: boolean } = {}): string {
  const c = options.color === true ? ANSI_COLORS : NO_COLORS
  let out = ''
  for (const key of Object.keys(data).sort()) {
    out += `${c.CYAN}${key}${c.ENDC}:\n`
    for (const text of (data[key] ?? '').split('\n')) out += `${c.RED}    ${text}${c.ENDC}\n`
  }
  return out
}
