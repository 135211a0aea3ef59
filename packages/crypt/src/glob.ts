/**
 * Salt-key style globs (Python's fnmatch): `*`, `?`, `[abc]`, `[a-z]`, `[!abc]`; everything else is
 * literal. Matching is case-sensitive, as fnmatchcase is on POSIX.
 */
export function globToRegExp(pattern: string): RegExp {
  let source = ''
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i] as string
    if (char === '*') source += '[\\s\\S]*'
    else if (char === '?') source += '[\\s\\S]'
    else if (char === '[') {
      const close = findClass(pattern, i)
      if (close === -1) source += '\\['
      else {
        let body = pattern.slice(i + 1, close)
        let negate = false
        if (body.startsWith('!')) {
          negate = true
          body = body.slice(1)
        }
        // Escape everything inside the class except `-` ranges, as fnmatch treats the rest literally.
        const escaped = body.replace(/[\\\]^[]/g, '\\$&')
        source += `[${negate ? '^' : ''}${escaped}]`
        i = close
      }
    } else source += char.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
  }
  return new RegExp(`^${source}$`, 'u')
}

/** Index of the `]` closing the class that opens at `open`, or -1 (then `[` is literal, as in fnmatch). */
function findClass(pattern: string, open: number): number {
  let j = open + 1
  if (pattern[j] === '!') j++
  if (pattern[j] === ']') j++ // a leading `]` is a member, not the end
  const close = pattern.indexOf(']', j)
  return close
}

export const hasGlobMagic = (pattern: string): boolean => /[*?[]/.test(pattern)

/** Ids from `ids` matching any of `patterns` (each a glob or a literal id). */
export function matchIds(ids: readonly string[], patterns: string | readonly string[]): string[] {
  const list = typeof patterns === 'string' ? [patterns] : patterns
  const tests = list.map((pattern): ((id: string) => boolean) => {
    try {
      const regexp = globToRegExp(pattern)
      return (id) => regexp.test(id)
    } catch {
      // An impossible class such as `[z-a]` cannot match a glob; compare it literally instead.
      return (id) => id === pattern
    }
  })
  return ids.filter((id) => tests.some((test) => test(id)))
}
