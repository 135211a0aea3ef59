/** A shell glob (`*`, `?`, `[...]`) as a whole-string regular expression (Salt's fnmatch). */
export function globToRegExp(glob: string): RegExp {
  let out = ''
  for (let index = 0; index < glob.length; index++) {
    const char = glob[index]!
    if (char === '*') out += '.*'
    else if (char === '?') out += '.'
    else if (char === '[') {
      const end = glob.indexOf(']', index + 1)
      if (end < 0) out += '\\['
      else {
        const body = glob.slice(index + 1, end).replace(/\\/g, '\\\\')
        out += `[${body.startsWith('!') ? `^${body.slice(1)}` : body}]`
        index = end
      }
    } else out += char.replace(/[.+^${}()|\\/]/g, '\\$&')
  }
  return new RegExp(`^${out}$`)
}

/** What the minions filter box means: `key:glob` matches a grain (Salt's `-G`), anything else the minion id. */
export interface MinionFilter {
  grain?: string
  pattern: RegExp
}

export function parseMinionFilter(text: string): MinionFilter | undefined {
  const trimmed = text.trim()
  if (trimmed === '') return undefined
  // Salt's grain target: the last colon separates the (possibly nested, a:b) key from the value glob.
  const colon = trimmed.lastIndexOf(':')
  if (colon > 0) return { grain: trimmed.slice(0, colon), pattern: globToRegExp(trimmed.slice(colon + 1) || '*') }
  return { pattern: globToRegExp(trimmed.includes('*') || trimmed.includes('?') ? trimmed : `*${trimmed}*`) }
}

/** Whether a minion (its id and grains) passes the filter; a grain given as a list matches if any item does. */
export function minionMatches(filter: MinionFilter | undefined, id: string, grains: Record<string, unknown>): boolean {
  if (filter === undefined) return true
  if (filter.grain === undefined) return filter.pattern.test(id)
  let value: unknown = grains
  for (const part of filter.grain.split(':')) value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[part] : undefined
  const values = Array.isArray(value) ? value : [value]
  return values.some((item) => item !== undefined && item !== null && filter.pattern.test(String(item)))
}
