import type { Tgt } from '@brine/protocol'
import { TargetError } from './errors.js'
import { TARGET_LIMITS } from './limits.js'

/** The words of a compound expression that are not targets. */
export const OPERATORS: ReadonlySet<string> = new Set(['and', 'or', 'not', '(', ')'])

/** Python's str.split(): runs of whitespace. */
const WHITESPACE = /\s+/

/**
 * Splits a compound target into words on whitespace, then peels parentheses off words they
 * touch: every leading `(`, but only unbalanced trailing `)`, so `E@web(1|2)` keeps its own group.
 * Linear in the target's length, and stops at {@link TARGET_LIMITS}.words words.
 */
export function tokenize(tgt: Tgt | readonly unknown[], shown: string, tgtType: string): string[] {
  const tokens: string[] = []
  const push = (token: string): void => {
    if (tokens.length >= TARGET_LIMITS.words) throw new TargetError(shown, tgtType, `it has more than ${TARGET_LIMITS.words} words`)
    tokens.push(token)
  }
  const items = Array.isArray(tgt) ? tgt : [tgt]
  for (const item of items) {
    for (const word of String(item).split(WHITESPACE)) {
      if (word === '') continue
      let start = 0
      // No minion id or glob starts with '(', so a leading one always opens a group.
      while (word.length - start > 1 && word[start] === '(') {
        push('(')
        start++
      }
      let opens = 0
      let closes = 0
      for (let i = start; i < word.length; i++) {
        if (word[i] === '(') opens++
        else if (word[i] === ')') closes++
      }
      let end = word.length
      while (end - start > 1 && word[end - 1] === ')' && closes > opens) {
        closes--
        end--
      }
      push(start === 0 && end === word.length ? word : word.slice(start, end))
      for (let i = end; i < word.length; i++) push(')')
    }
  }
  if (tokens.length === 0) throw new TargetError(shown, tgtType, 'the target is empty')
  return tokens
}

/** `G@…`, `E@…`, `G|@…` (a custom delimiter, for the grain and pillar engines): a word naming its engine. */
export function hasEnginePrefix(word: string): boolean {
  return /^[A-Z]@/.test(word) || /^[GPIJ][^@\s]@/.test(word)
}
