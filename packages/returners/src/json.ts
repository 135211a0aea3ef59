import { UnstorableValueError } from './errors.js'

/**
 * jsonb cannot hold what msgpack can: binary (msgpack bin, a Buffer here) and strings with NUL
 * (PostgreSQL rejects `\u0000`). Both become a one-key marker object with base64 content, and come
 * back as Buffer / string. BigInt, functions, symbols and non-finite numbers are rejected, naming
 * where they are. Dates become ISO strings (JSON has no date type).
 */
export const BYTES_MARKER = '__brine_bytes__'
export const NUL_STRING_MARKER = '__brine_nul_string__'

export function toJsonValue(value: unknown, path = '$', seen = new Set<object>()): unknown {
  switch (typeof value) {
    case 'string':
      return value.includes('\u0000') ? { [NUL_STRING_MARKER]: Buffer.from(value, 'utf8').toString('base64') } : value
    case 'boolean':
      return value
    case 'number':
      if (!Number.isFinite(value)) throw new UnstorableValueError(path, `${value} is not a finite number`)
      return value
    case 'undefined':
      return null
    case 'bigint':
    case 'function':
    case 'symbol':
      throw new UnstorableValueError(path, `a ${typeof value} has no JSON form`)
  }
  if (value === null) return null
  if (value instanceof Uint8Array) return { [BYTES_MARKER]: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') }
  if (value instanceof Date) return value.toISOString()
  const object = value as object
  if (seen.has(object)) throw new UnstorableValueError(path, 'it contains itself (a cycle)')
  seen.add(object)
  try {
    if (Array.isArray(object)) return object.map((item, index) => toJsonValue(item, `${path}[${index}]`, seen))
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(object)) {
      if (key.includes('\u0000')) throw new UnstorableValueError(`${path}.${JSON.stringify(key)}`, 'a key contains a NUL character')
      if (item !== undefined) out[key] = toJsonValue(item, `${path}.${key}`, seen)
    }
    return out
  } finally {
    seen.delete(object)
  }
}

export function fromJsonValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromJsonValue)
  if (value === null || typeof value !== 'object') return value
  const entries = Object.entries(value)
  if (entries.length === 1) {
    const [key, content] = entries[0] as [string, unknown]
    if (key === BYTES_MARKER && typeof content === 'string') return Buffer.from(content, 'base64')
    if (key === NUL_STRING_MARKER && typeof content === 'string') return Buffer.from(content, 'base64').toString('utf8')
  }
  return Object.fromEntries(entries.map(([key, item]) => [key, fromJsonValue(item)]))
}
