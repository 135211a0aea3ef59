/**
 * Salt's `json` outputter: indent 4 by default; `--out-indent` 0 puts each item on its own line
 * without indenting, and a negative indent prints one line with Python's `, ` and `: ` separators.
 */
export function jsonOutput(data: unknown, options: { indent?: number } = {}): string {
  const indent = options.indent ?? 4
  if (indent < 0) return compact(data)
  if (indent === 0) return JSON.stringify(data, replacer, '\u0000').replace(/\n\u0000+/g, '\n')
  return JSON.stringify(data, replacer, indent) ?? 'null'
}

/** Values JSON cannot spell (bytes, bigints) become strings, as Salt's `default=repr` makes them. */
function replacer(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString()
  if (value instanceof Uint8Array) return Buffer.from(value).toString('latin1')
  if (value === undefined) return null
  return value
}

function compact(value: unknown): string {
  const prepared = replacer('', value)
  if (Array.isArray(prepared)) return `[${prepared.map(compact).join(', ')}]`
  if (typeof prepared === 'object' && prepared !== null && !ArrayBuffer.isView(prepared)) {
    return `{${Object.entries(prepared).map(([key, item]) => `${JSON.stringify(key)}: ${compact(item)}`).join(', ')}}`
  }
  return JSON.stringify(prepared) ?? 'null'
}
