import { globToRegExp } from '@brine/targeting'
import { normalizeMinionId } from './minion-id.js'

/**
 * Ids from `ids` matching any of `patterns`. A pattern that names one of the `known` ids exactly
 * (default: `ids` itself) matches that id only, literally: an id `x[1]` is reached by its own name,
 * never by `x1` through the glob, and `x[1]` does not reach `x1` while `x[1]` exists. Any other
 * pattern is a glob (Salt's fnmatch). Patterns are compared in Unicode NFC, as ids are stored.
 */
export function matchIds(ids: readonly string[], patterns: string | readonly string[], known: Iterable<string> = ids): string[] {
  const list = (typeof patterns === 'string' ? [patterns] : patterns).map((pattern) => normalizeMinionId(pattern))
  const names = known instanceof Set ? (known as ReadonlySet<string>) : new Set(known)
  const tests = list.map((pattern): ((id: string) => boolean) => {
    if (names.has(pattern)) return (id) => id === pattern
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
