import type { Target } from '@brine/protocol'
import { TargetError } from './errors.js'
import { checkTargetLength, showTarget, TARGET_LIMITS } from './limits.js'
import { hasEnginePrefix, OPERATORS, tokenize } from './words.js'

/** Nodegroups from the master config: each a compound string, or a YAML list of compound words. */
export type Nodegroups = Record<string, unknown>

/** What one expansion shares: the target being expanded (for errors), and each group's words once built. */
interface Expansion {
  nodegroups: Nodegroups
  shown: string
  tgtType: string
  built: Map<string, string[]>
}

/** `N@name` (Salt expands only words of three characters or more). */
export function isNodegroupWord(word: string): boolean {
  return word.length >= 3 && word.startsWith('N@')
}

/** Characters that make salt.utils.minions' _nodegroup_regex read a nodegroup of bare words as one regular expression. */
const REGEX_CHARACTERS = /[([{\\?}\])]/

/**
 * Salt's _nodegroup_regex: words with no operator, no `*` and no engine prefix are one target of
 * their own — `E@` with the words joined by commas when any has a regex character (so, as in Salt,
 * several such words make one regex that only an id with those commas matches), else `L@`.
 * Anything else is left to the compound parser (undefined).
 */
function bareWordsTarget(words: readonly string[]): string | undefined {
  if (words.some((word) => OPERATORS.has(word) || word.includes('*') || hasEnginePrefix(word))) return undefined
  const engine = words.some((word) => REGEX_CHARACTERS.test(word)) ? 'E@' : 'L@'
  return `${engine}${words.join(',')}`
}

/**
 * A nodegroup's own words (before nested `N@` are expanded), as salt.utils.minions.nodegroup_comp
 * reads them: a string is split on whitespace; a list is taken item by item, its operators
 * (`and`, `or`, `not`, `(`, `)`) being items of their own. Bare words become one `L@`/`E@` target
 * as in Salt ({@link bareWordsTarget}). Beyond Salt: a list of other target expressions with no
 * operator matches any of them (Salt builds an expression that matches nothing).
 */
function definitionWords(name: string, expansion: Expansion): string[] {
  const { shown, tgtType } = expansion
  const definition = expansion.nodegroups[name]
  const scalar = (item: unknown): boolean => typeof item === 'string' || typeof item === 'number' || typeof item === 'boolean'
  const isList = Array.isArray(definition)
  if (!(typeof definition === 'string' || (isList && definition.every(scalar)))) {
    throw new TargetError(shown, tgtType, `nodegroup '${name}' must be a compound string or a list of targets`)
  }
  const items = isList ? (definition as unknown[]).map(String) : [definition as string]
  if (items.every((item) => item.trim() === '')) throw new TargetError(shown, tgtType, `nodegroup '${name}' is empty`)
  const words = tokenize(items, shown, tgtType)
  const bare = bareWordsTarget(words)
  if (bare !== undefined) return [bare]
  if (words.some((word) => OPERATORS.has(word))) return words
  if (isList) return words.flatMap((word, index) => (index === 0 ? [word] : ['or', word]))
  return words
}

/** One nodegroup as compound words in parentheses, nested `N@` expanded; a cycle is a TargetError naming it. */
function expandGroup(name: string, expansion: Expansion, path: string[]): string[] {
  const { shown, tgtType, nodegroups } = expansion
  const cycleAt = path.indexOf(name)
  if (cycleAt !== -1) {
    throw new TargetError(shown, tgtType, `nodegroup '${name}' includes itself (${[...path.slice(cycleAt), name].join(' → ')})`)
  }
  const built = expansion.built.get(name)
  if (built !== undefined) return built
  if (!Object.hasOwn(nodegroups, name)) {
    const known = Object.keys(nodegroups)
    const listed = known.length === 0 ? 'none' : known.length > 20 ? `${known.slice(0, 20).join(', ')}, …` : known.join(', ')
    throw new TargetError(shown, tgtType, `unknown nodegroup '${name}' (known: ${listed})`)
  }
  path.push(name)
  const words = ['(']
  for (const word of definitionWords(name, expansion)) appendWord(words, word, expansion, path)
  words.push(')')
  path.pop()
  expansion.built.set(name, words)
  return words
}

function appendWord(words: string[], word: string, expansion: Expansion, path: string[]): void {
  const added = isNodegroupWord(word) ? expandGroup(word.slice(2), expansion, path) : [word]
  // A group used twice is built once, but its words count each time: nesting cannot multiply them past the bound.
  if (words.length + added.length > TARGET_LIMITS.words) {
    throw new TargetError(expansion.shown, expansion.tgtType, `with its nodegroups expanded it has more than ${TARGET_LIMITS.words} words`)
  }
  for (const item of added) words.push(item)
}

/** Compound words with every `N@name` replaced by that nodegroup's expansion (Salt's nodegroup_comp, in place). */
export function expandNodegroupWords(tokens: readonly string[], nodegroups: Nodegroups, shown: string, tgtType: string): string[] {
  const expansion: Expansion = { nodegroups, shown, tgtType, built: new Map() }
  const words: string[] = []
  for (const token of tokens) appendWord(words, token, expansion, [])
  return words
}

/** A `nodegroup` target's words: the named group, expanded. */
export function nodegroupTargetWords(name: string, nodegroups: Nodegroups, shown: string, tgtType: string): string[] {
  return expandNodegroupWords([`N@${name}`], nodegroups, shown, tgtType)
}

/**
 * What the master publishes for a target: a `nodegroup` target, and any compound target with
 * `N@` words, become one compound expression with every nodegroup expanded from the master's
 * config (as Salt's LocalClient does before its publish), so minions need no nodegroups of
 * their own. Other targets come back unchanged (the same object). Throws TargetError for an
 * unknown nodegroup, a cycle (naming it), or an expansion past {@link TARGET_LIMITS}.
 */
export function resolveNodegroups(target: Target, nodegroups: Nodegroups = {}): Target {
  const tgtType = target.tgt_type ?? 'glob'
  if (tgtType !== 'nodegroup' && tgtType !== 'compound') return target
  checkTargetLength(target.tgt, tgtType)
  const shown = showTarget(target.tgt)
  let words: string[]
  if (tgtType === 'nodegroup') {
    if (typeof target.tgt !== 'string') throw new TargetError(shown, tgtType, 'a nodegroup target is the name of one nodegroup')
    words = nodegroupTargetWords(target.tgt, nodegroups, shown, tgtType)
  } else {
    const tokens = tokenize(target.tgt, shown, tgtType)
    if (!tokens.some(isNodegroupWord)) return target
    words = expandNodegroupWords(tokens, nodegroups, shown, tgtType)
  }
  const tgt = words.join(' ')
  if (tgt.length > TARGET_LIMITS.length) {
    throw new TargetError(shown, tgtType, `with its nodegroups expanded it is ${tgt.length} characters long; the limit is ${TARGET_LIMITS.length}`)
  }
  return { tgt, tgt_type: 'compound' }
}
