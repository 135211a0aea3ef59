/** Names of arguments whose values are secrets (a password, a token, a key…): masked in the audit log. */
const SECRET_NAME = /pass|secret|token|key|pwd|credential|auth/i
/** What a masked value becomes. */
export const MASK = '******'
/** How deep masking walks an argument before it masks what is left (a bound on what a caller can make it walk). */
const MAX_DEPTH = 8
/** Strings and entries kept per value; the rest is cut (an audit line stays a line). */
const MAX_ITEMS = 50
const MAX_CHARS = 1000

/**
 * `value` with every value that looks like a secret masked: mapping entries whose name says so
 * (`password`, `api_key`, `token`), and `name=value` strings with such a name (Salt's CLI keyword form).
 * Long strings and lists are cut, deep values masked, so a line in the audit log stays bounded.
 */
export function maskSecrets(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') {
    const assignment = /^([A-Za-z_][\w.-]*)=/.exec(value)
    if (assignment !== null && SECRET_NAME.test(assignment[1]!)) return `${assignment[1]}=${MASK}`
    return value.length > MAX_CHARS ? `${value.slice(0, MAX_CHARS)}… (${value.length} characters)` : value
  }
  if (typeof value !== 'object' || value === null) return value
  if (depth >= MAX_DEPTH) return MASK
  if (Array.isArray(value)) return value.slice(0, MAX_ITEMS).map((item) => maskSecrets(item, depth + 1))
  if (ArrayBuffer.isView(value)) return `(${value.byteLength} bytes)`
  const out: Record<string, unknown> = {}
  for (const [name, item] of Object.entries(value).slice(0, MAX_ITEMS)) out[name] = SECRET_NAME.test(name) ? MASK : maskSecrets(item, depth + 1)
  return out
}
