import { globToRegExp } from '@brine/common'

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
