import { SHOWN_TARGET_CHARS, type Tgt } from '@brine/protocol'
import { TargetError } from './errors.js'
import { DEFAULT_REGEX_TIMEOUT_MS } from './regex-guard.js'

/**
 * The bounds on a target, checked before any work that grows with it. Salt has none; these are
 * far above anything a person types, and low enough that parsing and matching stay quick.
 */
export const TARGET_LIMITS = {
  /** Characters in a target (a list target's ids joined by commas). */
  length: 65_536,
  /** Characters in a `list` target, which batch runs and scripts build from many ids. */
  listLength: 4_194_304,
  /** Words in a compound target, after nodegroups are expanded. */
  words: 10_000,
  /** Nesting of parentheses and `not` in a compound target. */
  depth: 100,
  /** Delimiters (`:`) in one grain expression; Salt tries every split, so the work grows with their square. */
  grainDelimiters: 64,
  /** Milliseconds one target's regular expressions may spend matching (in a worker thread) before they are stopped. */
  regexTimeoutMs: DEFAULT_REGEX_TIMEOUT_MS,
} as const

/** The target as error messages show it (a list target's ids joined by spaces, as typed). */
export function showTarget(tgt: Tgt): string {
  return Array.isArray(tgt) ? tgt.join(' ') : String(tgt)
}

/**
 * Throws TargetError when `tgt` is longer than {@link TARGET_LIMITS} allow for `tgtType`; returns
 * its length (a list's items counted with a separator between them). O(items), no copying.
 */
export function checkTargetLength(tgt: Tgt, tgtType: string): number {
  let length: number
  if (Array.isArray(tgt)) {
    length = Math.max(0, tgt.length - 1)
    for (const item of tgt) {
      length += typeof item === 'string' ? item.length : String(item).length
      if (length > TARGET_LIMITS.listLength) break
    }
  } else {
    length = typeof tgt === 'string' ? tgt.length : String(tgt).length
  }
  const limit = tgtType === 'list' ? TARGET_LIMITS.listLength : TARGET_LIMITS.length
  if (length > limit) {
    // The problem says how long it is; the target shown is only its start.
    const start = (Array.isArray(tgt) ? tgt.slice(0, 50).join(' ') : String(tgt)).slice(0, SHOWN_TARGET_CHARS - 1)
    throw new TargetError(
      `${start}…`,
      tgtType,
      `the target is ${length > TARGET_LIMITS.listLength ? `over ${TARGET_LIMITS.listLength}` : length} characters long; the limit is ${limit}`,
    )
  }
  return length
}
