import { LruMap } from '@brine/core'

/**
 * Python's fnmatch.translate: `*`, `?`, `[seq]`, `[!seq]`, whole-string match; a `[` with no
 * closing `]` is literal. Case-sensitive, as fnmatch is on POSIX.
 *
 * Linear, whatever the pattern: as Python (3.9+) does, every `*` but the last matches lazily
 * inside a look-ahead whose text is then taken by a back-reference, so the engine never
 * backtracks into an earlier star. `*a*a*a*a*b` against a long run of `a`s is as quick as `*b`.
 */
export function globToRegExp(pattern: string): RegExp {
  let compiled = compiledGlobs.get(pattern)
  if (compiled === undefined) {
    // A RegExp without the g or y flag keeps no state between test() calls, so one may be shared.
    compiled = translateGlob(pattern)
    compiledGlobs.set(pattern, compiled)
  }
  return compiled
}

/** What a glob target term needs: a test. */
export interface GlobMatcher {
  test(text: string): boolean
}

/** More stars than this in one glob is refused: each costs the regex a group, and no one types them. */
export const MAX_GLOB_STARS = 256

/**
 * A glob for targeting: a word without wildcards (a minion id, as compound `or` chains and
 * nodegroups are full of) is compared as a string; the rest compile through {@link globToRegExp}.
 * Throws for a glob with more than {@link MAX_GLOB_STARS} runs of `*`, or a set JavaScript cannot compile.
 */
export function globMatcher(pattern: string): GlobMatcher {
  if (!/[*?[]/.test(pattern)) return { test: (text) => text === pattern }
  const stars = pattern.match(/\*+/g)?.length ?? 0
  if (stars > MAX_GLOB_STARS) throw new Error(`it has ${stars} runs of '*'; the limit is ${MAX_GLOB_STARS}`)
  return globToRegExp(pattern)
}

/** Every publish is matched by every minion, and the master matches each job against every id: compile once. */
const compiledGlobs = new LruMap<string, RegExp>(256)

function translateGlob(pattern: string): RegExp {
  // The regex source of each run of non-star characters, split at the stars.
  const segments: string[] = ['']
  let i = 0
  const add = (piece: string): void => {
    segments[segments.length - 1] += piece
  }
  while (i < pattern.length) {
    const char = pattern[i++] as string
    if (char === '*') {
      segments.push('')
      while (pattern[i] === '*') i++
    } else if (char === '?') {
      add('.')
    } else if (char === '[') {
      let j = i
      if (pattern[j] === '!') j++
      if (pattern[j] === ']') j++
      while (j < pattern.length && pattern[j] !== ']') j++
      if (j >= pattern.length) {
        add('\\[')
      } else {
        let set = pattern.slice(i, j)
        i = j + 1
        const negate = set.startsWith('!')
        if (negate) set = set.slice(1)
        set = set.replace(/[\\\]^[]/g, (special) => `\\${special}`)
        add(negate ? `[^${set}]` : `[${set}]`)
      }
    } else {
      add(char.replace(/[.*+?^${}()|[\]\\/]/g, (special) => `\\${special}`))
    }
  }
  if (segments.length === 1) return new RegExp(`^(?:${segments[0]})$`, 's')
  let source = segments[0] as string
  // Middle segments: the earliest place each one fits is always a right place (each piece takes one character), so take it and never look back.
  for (let k = 1; k < segments.length - 1; k++) source += `(?=(.*?${segments[k]}))\\${k}`
  source += `.*${segments[segments.length - 1]}`
  return new RegExp(`^(?:${source})$`, 's')
}
