/**
 * How Python shows values decoded from msgpack/JSON, for outputters that print Python's text:
 * repr() and str(), float repr, str.splitlines() and sorted() of dict keys.
 *
 * JavaScript has one number type, so a number with an integral value prints as an int (`2`, where
 * Python would print a float 2.0 as `2.0`); other numbers print as Python prints floats.
 */

/** Python's str.isprintable() is false for these (categories Cc, Cf, Cs, Co, Cn, Zl, Zp, and Zs but space). */
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u

/** Python's repr() of a string: single quotes unless the text has a ' and no ". */
export function pythonStringRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'"
  let out = ''
  for (const char of text) {
    const code = char.codePointAt(0) as number
    if (char === '\\') out += '\\\\'
    else if (char === quote) out += `\\${quote}`
    else if (char === '\n') out += '\\n'
    else if (char === '\r') out += '\\r'
    else if (char === '\t') out += '\\t'
    else if (char !== ' ' && NON_PRINTABLE.test(char)) {
      if (code < 0x100) out += `\\x${code.toString(16).padStart(2, '0')}`
      else if (code < 0x10000) out += `\\u${code.toString(16).padStart(4, '0')}`
      else out += `\\U${code.toString(16).padStart(8, '0')}`
    } else out += char
  }
  return `${quote}${out}${quote}`
}

/** Python's repr() of bytes: b'…' with \xNN for anything outside printable ASCII. */
export function pythonBytesRepr(bytes: Uint8Array): string {
  const quote = bytes.includes(0x27) && !bytes.includes(0x22) ? '"' : "'"
  let out = ''
  for (const byte of bytes) {
    if (byte === 0x5c) out += '\\\\'
    else if (byte === quote.charCodeAt(0)) out += `\\${quote}`
    else if (byte === 0x0a) out += '\\n'
    else if (byte === 0x0d) out += '\\r'
    else if (byte === 0x09) out += '\\t'
    else if (byte < 0x20 || byte >= 0x7f) out += `\\x${byte.toString(16).padStart(2, '0')}`
    else out += String.fromCharCode(byte)
  }
  return `b${quote}${out}${quote}`
}

/**
 * Python's repr() of a float that is not integral: the shortest round-trip digits (JavaScript finds
 * the same ones), in fixed notation from 1e-4 up to 1e16 and scientific outside it (`1e-05`, `1.5e+16`).
 */
export function pythonFloatRepr(value: number): string {
  if (Number.isNaN(value)) return 'nan'
  if (!Number.isFinite(value)) return value > 0 ? 'inf' : '-inf'
  if (value === 0) return Object.is(value, -0) ? '-0.0' : '0.0'
  const [mantissa, exponentText] = value.toExponential().split('e') as [string, string]
  const exponent = Number(exponentText)
  const sign = mantissa.startsWith('-') ? '-' : ''
  const digits = mantissa.replace('-', '').replace('.', '')
  if (exponent < -4 || exponent >= 16) {
    const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits
    return `${sign}${head}e${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0')
  const fraction = digits.slice(exponent + 1)
  return `${sign}${whole}.${fraction === '' ? '0' : fraction}`
}

/** repr() of a number: an int's digits, else a float's repr. */
export function pythonNumberRepr(value: number | bigint): string {
  if (typeof value === 'bigint') return value.toString()
  return Number.isInteger(value) ? (Object.is(value, -0) ? '0' : value.toFixed(0)) : pythonFloatRepr(value)
}

/** Python's repr() of a value decoded from msgpack/JSON. */
export function pythonRepr(value: unknown): string {
  if (value === null || value === undefined) return 'None'
  if (value === true) return 'True'
  if (value === false) return 'False'
  if (typeof value === 'number' || typeof value === 'bigint') return pythonNumberRepr(value)
  if (typeof value === 'string') return pythonStringRepr(value)
  if (value instanceof Uint8Array) return pythonBytesRepr(value)
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`
  if (typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([key, item]) => `${pythonStringRepr(key)}: ${pythonRepr(item)}`)
      .join(', ')}}`
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

const SURROGATE = /[\ud800-\udfff]/

/** Python's string order (by code point; JavaScript's default sort compares UTF-16 units). */
export function comparePython(a: string, b: string): number {
  if (!SURROGATE.test(a) && !SURROGATE.test(b)) return a < b ? -1 : a > b ? 1 : 0
  const left = [...a]
  const right = [...b]
  for (let index = 0; index < Math.min(left.length, right.length); index++) {
    const difference = (left[index] as string).codePointAt(0)! - (right[index] as string).codePointAt(0)!
    if (difference !== 0) return difference
  }
  return left.length - right.length
}

/** sorted() of a dict's keys. */
export function sortedKeys(record: object): string[] {
  return Object.keys(record).sort(comparePython)
}
