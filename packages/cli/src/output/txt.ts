import { pythonStr, splitLines } from './python.js'

/** Salt's `txt` outputter: `id: value`, one line per line of a string value. */
export function txtOutput(data: unknown): string {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return pythonStr(data)
  let out = ''
  for (const [key, value] of Object.entries(data)) {
    if (typeof value === 'string') for (const text of splitLines(value)) out += `${key}: ${text}\n`
    else out += `${key}: ${pythonStr(value)}\n`
  }
  return out
}
