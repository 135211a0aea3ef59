/** Python's str()/repr() of JSON-like values, as Salt's raw and txt outputters print them. */

/** Python's repr() of a string: single quotes unless the text has a ' and no ". */
export function pythonStringRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'"
  let out = ''
  for (const char of text) {
    if (char === '\\') out += '\\\\'
    else if (char === quote) out += `\\${quote}`
    else if (char === '\n') out += '\\n'
    else if (char === '\r') out += '\\r'
    else if (char === '\t') out += '\\t'
    else if (char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f) out += `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`
    else out += char
  }
  return `${quote}${out}${quote}`
}

/** Python's repr() of a value decoded from msgpack/JSON. */
export function pythonRepr(value: unknown): string {
  if (value === null || value === undefined) return 'None'
  if (value === true) return 'True'
  if (value === false) return 'False'
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : Number.isNaN(value) ? 'nan' : value > 0 ? 'inf' : '-inf'
  if (typeof value === 'bigint') return String(value)
  if (typeof value === 'string') return pythonStringRepr(value)
  if (value instanceof Uint8Array) return `b${pythonStringRepr(Buffer.from(value).toString('latin1'))}`
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`
  if (typeof value === 'object') {
    return `{${Object.entries(value).map(([key, item]) => `${pythonStringRepr(key)}: ${pythonRepr(item)}`).join(', ')}}`
  }
  return pythonStringRepr(String(value))
}

/** Python's str(): strings as they are, everything else as repr(). */
export function pythonStr(value: unknown): string {
  return typeof value === 'string' ? value : pythonRepr(value)
}

/** Python's str.splitlines(): no trailing empty line, every Unicode line break. */
export function splitLines(text: string): string[] {
  const lines = text.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/)
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
  return lines
}
