import { BlockList, isIP } from 'node:net'
import { LruMap } from '@brine/transport'
import { TargetError } from './errors.js'
import type { Target, TargetType, Tgt } from './protocol/loads.js'

/**
 * Salt's minion-side target matchers (salt/matchers/*), plus the master's view of which known
 * minions a target expects. Differences from Salt, on purpose:
 * - an invalid target (bad regex, unbalanced parentheses, unknown prefix or nodegroup) throws
 *   TargetError instead of logging and matching nothing;
 * - in compound targets, parentheses may touch their words (`(web* or db*)`); Salt needs spaces;
 * - pcre targets are JavaScript regular expressions (Python's `(?P<name>…)`, `\A`, `\Z` are translated);
 * - pillar (`I@`, `J@`), range (`R@`) and the other rarely used engines are not supported.
 */

export type Grains = Record<string, unknown>

export interface MinionInfo {
  id: string
  /** The minion's grains; undefined on the master when it has not cached them yet. */
  grains?: Grains
}

/** Nodegroups from config: a compound expression, or a list of target expressions (or ids). */
export type Nodegroups = Record<string, unknown>

/** Salt's DEFAULT_TARGET_DELIM. */
export const DEFAULT_TARGET_DELIMITER = ':'

type Engine = 'glob' | 'pcre' | 'list' | 'grain' | 'grain_pcre' | 'ipcidr'

type Node =
  | { kind: 'term'; engine: Engine; pattern: string; delimiter: string; word: string; test: (minion: MinionInfo) => boolean }
  | { kind: 'not'; operand: Node }
  | { kind: 'and' | 'or'; left: Node; right: Node }

/** Three-valued result: 'maybe' when a term needs grains the master has not cached. */
type Tri = boolean | 'maybe'

/** A compiled target: parse once, match many minions. */
export interface CompiledTarget {
  readonly tgt: Tgt
  readonly tgtType: TargetType
  /** True when this minion is targeted (a minion with no grains is matched against empty grains). */
  match(minion: MinionInfo): boolean
  /** True, false, or 'maybe' when the answer depends on grains this minion info lacks. */
  evaluate(minion: MinionInfo): Tri
}

/** Compound prefixes (salt.matchers.compound_match's `ref`). N@ is expanded before evaluation. */
const PREFIXES: Record<string, Engine | 'nodegroup' | undefined> = {
  G: 'grain',
  P: 'grain_pcre',
  L: 'list',
  E: 'pcre',
  S: 'ipcidr',
  N: 'nodegroup',
}
const UNSUPPORTED_PREFIXES: Record<string, string> = {
  I: 'pillar targeting (I@) is not supported',
  J: 'pillar targeting (J@) is not supported',
  R: 'range targeting (R@) is not supported',
  T: 'resource targeting (T@) is not supported',
  M: 'managing-minion targeting (M@) is not supported',
}
const OPERATORS = new Set(['and', 'or', 'not', '(', ')'])

/** Parses and checks a target; throws TargetError naming the target and what is wrong. */
export function compileTarget(target: Target, nodegroups: Nodegroups = {}): CompiledTarget {
  const tgtType = target.tgt_type ?? 'glob'
  const tgt = target.tgt
  const shown = Array.isArray(tgt) ? tgt.join(' ') : String(tgt)
  let root: Node
  switch (tgtType) {
    case 'compound':
      root = parseCompound(tokenize(tgt, shown, tgtType), shown, tgtType, nodegroups)
      break
    case 'nodegroup':
      if (typeof tgt !== 'string') throw new TargetError(shown, tgtType, 'a nodegroup target is the name of one nodegroup')
      root = parseCompound(expandNodegroup(tgt, nodegroups, shown, tgtType, new Set()), shown, tgtType, nodegroups)
      break
    case 'list':
      root = term('list', Array.isArray(tgt) ? tgt.join(',') : String(tgt), DEFAULT_TARGET_DELIMITER, shown, tgtType)
      break
    case 'glob':
    case 'pcre':
    case 'grain':
    case 'grain_pcre':
    case 'ipcidr':
      if (typeof tgt !== 'string') throw new TargetError(shown, tgtType, `a ${tgtType} target must be a string`)
      root = term(tgtType, tgt, DEFAULT_TARGET_DELIMITER, shown, tgtType)
      break
    default:
      throw new TargetError(shown, String(tgtType), `unknown tgt_type '${String(tgtType)}'`)
  }
  return {
    tgt,
    tgtType,
    match: (minion) => evaluate(root, { ...minion, grains: minion.grains ?? {} }) === true,
    evaluate: (minion) => evaluate(root, minion),
  }
}

/** Whether `minion` is targeted, as the minion itself decides after decrypting a publish. */
export function matchMinion(target: Target, minion: MinionInfo, nodegroups?: Nodegroups): boolean {
  return compileTarget(target, nodegroups).match(minion)
}

export interface ExpectedMinionsOptions {
  /**
   * Include minions whose answer depends on grains the master has not cached (default true, as
   * Salt's `greedy` check_minions does): they get the publish and decide for themselves, so
   * leaving them out would report them as "did not return" while they may well answer.
   */
  greedy?: boolean
}

/**
 * Which of the minions the master knows are expected to answer: the targeted ones, plus
 * (greedy) those that might be targeted but whose grains are not cached. A list target expects
 * exactly the listed ids that are known. Returned in the order of `known`.
 */
export function expectedMinions(
  target: Target,
  known: readonly MinionInfo[],
  nodegroups?: Nodegroups,
  options: ExpectedMinionsOptions = {},
): string[] {
  const compiled = compileTarget(target, nodegroups)
  const greedy = options.greedy ?? true
  return known
    .filter((minion) => {
      const result = compiled.evaluate(minion)
      return result === true || (result === 'maybe' && greedy)
    })
    .map((minion) => minion.id)
}

// ---------------------------------------------------------------------------------------------
// Evaluation

function evaluate(node: Node, minion: MinionInfo): Tri {
  switch (node.kind) {
    case 'term':
      if (node.engine === 'grain' || node.engine === 'grain_pcre' || node.engine === 'ipcidr') {
        if (minion.grains === undefined) return 'maybe'
      }
      return node.test(minion)
    case 'not': {
      const value = evaluate(node.operand, minion)
      return value === 'maybe' ? 'maybe' : !value
    }
    case 'and': {
      // Both sides are always evaluated, as Salt evaluates every term, so a bad regex fails every time.
      const left = evaluate(node.left, minion)
      const right = evaluate(node.right, minion)
      if (left === false || right === false) return false
      return left === true && right === true ? true : 'maybe'
    }
    case 'or': {
      const left = evaluate(node.left, minion)
      const right = evaluate(node.right, minion)
      if (left === true || right === true) return true
      return left === false && right === false ? false : 'maybe'
    }
  }
}

function term(engine: Engine, pattern: string, delimiter: string, shown: string, tgtType: string): Node {
  const fail = (problem: string): never => {
    throw new TargetError(shown, tgtType, problem)
  }
  const word = pattern
  let test: (minion: MinionInfo) => boolean
  switch (engine) {
    case 'glob': {
      const regex = compileGlob(pattern, fail)
      test = (minion) => regex.test(minion.id)
      break
    }
    case 'pcre': {
      const regex = compileRegex(pattern, '', fail)
      test = (minion) => matchAtStart(regex, minion.id)
      break
    }
    case 'list': {
      const ids = new Set(pattern.split(',').map((id) => id.trim()).filter((id) => id !== ''))
      if (ids.size === 0) fail('the list names no minions')
      test = (minion) => ids.has(minion.id)
      break
    }
    case 'grain':
    case 'grain_pcre': {
      if (!pattern.includes(delimiter)) fail(`'${pattern}' needs a key and a value separated by '${delimiter}'`)
      const regex = engine === 'grain_pcre'
      const cache = new Map<string, RegExp>()
      const valueMatch = (value: unknown, expression: string): boolean => {
        const text = pythonStr(value).toLowerCase()
        const lowered = expression.toLowerCase()
        if (!regex) {
          let compiled = cache.get(lowered)
          if (compiled === undefined) cache.set(lowered, (compiled = compileGlob(lowered, fail)))
          return compiled.test(text)
        }
        let compiled = cache.get(lowered)
        if (compiled === undefined) cache.set(lowered, (compiled = compileRegex(lowered, '', fail)))
        return matchAtStart(compiled, text)
      }
      // The value part may itself contain the delimiter (`P@os:(?:deb|ubu)`): a bad regex is one no split compiles.
      if (regex) {
        const splits = pattern.split(delimiter)
        const candidates = splits.slice(1).map((_, index) => splits.slice(index + 1).join(delimiter).toLowerCase())
        const compiles = (candidate: string): boolean => {
          try {
            new RegExp(translatePythonRegex(candidate))
            return true
          } catch {
            return false
          }
        }
        if (!candidates.some(compiles)) compileRegex(candidates[0] ?? '', '', fail)
      }
      test = (minion) => subdictMatch(minion.grains ?? {}, pattern, delimiter, valueMatch)
      break
    }
    case 'ipcidr':
      test = compileIpcidr(pattern, fail)
      break
  }
  return { kind: 'term', engine, pattern, delimiter, word, test }
}

// ---------------------------------------------------------------------------------------------
// Compound parsing

/**
 * Splits a compound target into words on whitespace, then peels parentheses off words they
 * touch: every leading `(`, but only unbalanced trailing `)`, so `E@web(1|2)` keeps its own group.
 */
function tokenize(tgt: Tgt, shown: string, tgtType: string): string[] {
  const words = Array.isArray(tgt) ? tgt.flatMap((word) => word.split(/\s+/)) : String(tgt).split(/\s+/)
  const tokens: string[] = []
  for (let word of words.filter((item) => item !== '')) {
    const count = (text: string, char: string): number => text.split(char).length - 1
    // No minion id or glob starts with '(', so a leading one always opens a group.
    while (word.length > 1 && word.startsWith('(')) {
      tokens.push('(')
      word = word.slice(1)
    }
    let closing = 0
    while (word.length > 1 && word.endsWith(')') && count(word, ')') > count(word, '(')) {
      closing++
      word = word.slice(0, -1)
    }
    tokens.push(word)
    for (let i = 0; i < closing; i++) tokens.push(')')
  }
  if (tokens.length === 0) throw new TargetError(shown, tgtType, 'the target is empty')
  return tokens
}

/** A nodegroup as compound tokens in parentheses; nested N@ groups are expanded, cycles refused. */
function expandNodegroup(name: string, nodegroups: Nodegroups, shown: string, tgtType: string, stack: Set<string>): string[] {
  if (stack.has(name)) throw new TargetError(shown, tgtType, `nodegroup '${name}' includes itself`)
  if (!Object.hasOwn(nodegroups, name)) {
    const known = Object.keys(nodegroups)
    throw new TargetError(shown, tgtType, `unknown nodegroup '${name}' (known: ${known.length === 0 ? 'none' : known.join(', ')})`)
  }
  const definition = nodegroups[name]
  let words: string[]
  if (typeof definition === 'string') {
    words = tokenize(definition, shown, tgtType)
  } else if (Array.isArray(definition) && definition.length > 0) {
    // A list nodegroup is a list of target expressions (plain ids in the common case): any of them.
    words = definition.flatMap((item, index) => (index === 0 ? ['(', String(item), ')'] : ['or', '(', String(item), ')']))
    words = tokenize(words.join(' '), shown, tgtType)
  } else {
    throw new TargetError(shown, tgtType, `nodegroup '${name}' must be a compound string or a list of targets`)
  }
  stack.add(name)
  const out: string[] = ['(']
  for (const word of words) {
    if (word.startsWith('N@') && word.length > 2) out.push(...expandNodegroup(word.slice(2), nodegroups, shown, tgtType, stack))
    else out.push(word)
  }
  out.push(')')
  stack.delete(name)
  return out
}

/**
 * Recursive descent with Python's precedence, which Salt gets by eval()ing the expression:
 * `not` binds tighter than `and`, which binds tighter than `or`. As in Salt, `a not b` means `a and not b`.
 */
function parseCompound(tokens: string[], shown: string, tgtType: string, nodegroups: Nodegroups): Node {
  const fail = (problem: string): never => {
    throw new TargetError(shown, tgtType, problem)
  }
  // Expand N@ in place first (Salt's nodegroup_comp), so parentheses from groups parse like any others.
  const words: string[] = []
  for (const token of tokens) {
    if (token.startsWith('N@') && token.length > 2) words.push(...expandNodegroup(token.slice(2), nodegroups, shown, tgtType, new Set()))
    else words.push(token)
  }
  let position = 0
  const peek = (): string | undefined => words[position]

  const parseOr = (): Node => {
    let left = parseAnd()
    while (peek() === 'or') {
      position++
      left = { kind: 'or', left, right: parseAnd() }
    }
    return left
  }
  const parseAnd = (): Node => {
    let left = parseNot()
    for (;;) {
      const next = peek()
      if (next === 'and') position++
      else if (next !== 'not') break
      left = { kind: 'and', left, right: parseNot() }
    }
    return left
  }
  const parseNot = (): Node => {
    if (peek() === 'not') {
      position++
      return { kind: 'not', operand: parseNot() }
    }
    return parsePrimary()
  }
  const parsePrimary = (): Node => {
    const word = peek()
    if (word === undefined) return fail(position === 0 ? 'the target is empty' : `it ends with '${words[position - 1]}'`)
    if (word === '(') {
      position++
      if (peek() === ')') fail("empty parentheses '( )'")
      const inner = parseOr()
      if (peek() !== ')') fail("unbalanced parentheses: missing ')'")
      position++
      return inner
    }
    if (word === ')') return fail("unbalanced parentheses: unexpected ')'")
    if (OPERATORS.has(word)) return fail(position === 0 ? `it starts with '${word}'` : `'${word}' follows '${words[position - 1]}'`)
    position++
    return parseWord(word, shown, tgtType)
  }

  const root = parseOr()
  const rest = peek()
  if (rest === ')') fail("unbalanced parentheses: unexpected ')'")
  if (rest !== undefined) fail(`missing 'and' or 'or' between '${words[position - 1]}' and '${rest}'`)
  return root
}

/** One compound word: `G@os:Debian`, `G|@os|Debian` (custom delimiter), or a bare glob. */
function parseWord(word: string, shown: string, tgtType: string): Node {
  const match = /^([A-Z])(.)?@(.*)$/s.exec(word)
  if (match === null) return term('glob', word, DEFAULT_TARGET_DELIMITER, shown, tgtType)
  const [, letter = '', customDelimiter, pattern = ''] = match
  const unsupported = UNSUPPORTED_PREFIXES[letter]
  if (unsupported !== undefined) throw new TargetError(shown, tgtType, unsupported)
  const engine = PREFIXES[letter]
  if (engine === undefined) {
    throw new TargetError(shown, tgtType, `unknown prefix '${letter}@' in '${word}' (known: G@, P@, L@, E@, S@, N@)`)
  }
  if (customDelimiter !== undefined && engine !== 'grain' && engine !== 'grain_pcre') {
    throw new TargetError(shown, tgtType, `unknown prefix '${letter}${customDelimiter}@' in '${word}'`)
  }
  if (pattern === '') throw new TargetError(shown, tgtType, `'${word}' has nothing after the '@'`)
  if (engine === 'nodegroup') throw new TargetError(shown, tgtType, `nodegroup '${word}' could not be expanded`)
  return term(engine, pattern, customDelimiter ?? DEFAULT_TARGET_DELIMITER, shown, tgtType)
}

// ---------------------------------------------------------------------------------------------
// Matchers

/**
 * Python's fnmatch.translate: `*`, `?`, `[seq]`, `[!seq]`, whole-string match; a `[` with no
 * closing `]` is literal. Case-sensitive, as fnmatch is on POSIX.
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

/** Every publish is matched by every minion, and the master matches each job against every id: compile once. */
const compiledGlobs = new LruMap<string, RegExp>(256)

function translateGlob(pattern: string): RegExp {
  let out = ''
  let i = 0
  while (i < pattern.length) {
    const char = pattern[i++] as string
    if (char === '*') {
      out += '.*'
      while (pattern[i] === '*') i++
    } else if (char === '?') {
      out += '.'
    } else if (char === '[') {
      let j = i
      if (pattern[j] === '!') j++
      if (pattern[j] === ']') j++
      while (j < pattern.length && pattern[j] !== ']') j++
      if (j >= pattern.length) {
        out += '\\['
      } else {
        let set = pattern.slice(i, j)
        i = j + 1
        const negate = set.startsWith('!')
        if (negate) set = set.slice(1)
        set = set.replace(/[\\\]^[]/g, (special) => `\\${special}`)
        out += negate ? `[^${set}]` : `[${set}]`
      }
    } else {
      out += char.replace(/[.*+?^${}()|[\]\\/]/g, (special) => `\\${special}`)
    }
  }
  return new RegExp(`^(?:${out})$`, 's')
}

function compileGlob(pattern: string, fail: (problem: string) => never): RegExp {
  try {
    return globToRegExp(pattern)
  } catch (error) {
    return fail(`bad glob '${pattern}': ${(error as Error).message}`)
  }
}

/** Python regex spellings JavaScript lacks: named groups, \A and \Z. */
function translatePythonRegex(pattern: string): string {
  return pattern
    .replace(/\(\?P</g, '(?<')
    .replace(/\(\?P=(\w+)\)/g, '\\k<$1>')
    .replace(/(?<!\\)\\A/g, '^')
    .replace(/(?<!\\)\\Z/g, '$')
}

function compileRegex(pattern: string, flags: string, fail: (problem: string) => never): RegExp {
  try {
    return new RegExp(translatePythonRegex(pattern), `${flags}y`)
  } catch (error) {
    return fail(`bad regular expression '${pattern}': ${(error as Error).message}`)
  }
}

/** Python's re.match: anchored at the start only (a sticky RegExp tried at index 0). */
function matchAtStart(regex: RegExp, text: string): boolean {
  regex.lastIndex = 0
  return regex.test(text)
}

/** How Python's str() shows a grain value, since Salt compares grains as str(value).lower(). */
function pythonStr(value: unknown): string {
  if (value === true) return 'True'
  if (value === false) return 'False'
  if (value === null || value === undefined) return 'None'
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

const MISSING = Symbol('missing')

/** salt.utils.data.traverse_dict_and_list: `a:b:0` walks mappings, list indexes and dicts inside lists. */
function traverse(data: unknown, key: string, delimiter: string): unknown {
  let node: unknown = data
  for (const segment of key.split(delimiter)) {
    if (Array.isArray(node)) {
      const embedded = node.find((item) => isRecord(item) && Object.hasOwn(item, segment))
      if (embedded !== undefined) node = (embedded as Record<string, unknown>)[segment]
      else if (/^\d+$/.test(segment) && Number(segment) < node.length) node = node[Number(segment)]
      else return MISSING
    } else if (isRecord(node) && Object.hasOwn(node, segment)) {
      node = node[segment]
    } else {
      return MISSING
    }
  }
  return node
}

/**
 * salt.utils.data.subdict_match: `os:Debian` and nested `locale_info:defaultlanguage:en_*`,
 * trying the deepest key first, so `a:b:c` matches grains.a.b == 'c' before grains.a == 'b:c'.
 * A list value matches when any element does; a mapping when the pattern names one of its keys.
 */
function subdictMatch(
  data: unknown,
  expression: string,
  delimiter: string,
  valueMatch: (value: unknown, pattern: string) => boolean,
): boolean {
  const splits = expression.split(delimiter)
  if (splits.length === 1) return false
  for (let index = splits.length - 1; index > 0; index--) {
    const key = splits.slice(0, index).join(delimiter)
    let pattern = splits.slice(index).join(delimiter)
    let node: unknown
    if (key === '*') {
      pattern = expression
      node = data
    } else {
      node = traverse(data, key, delimiter)
    }
    if (node === MISSING) continue
    if (isRecord(node)) {
      if (dictMatch(node, pattern, delimiter, valueMatch)) return true
      continue
    }
    if (Array.isArray(node)) {
      for (const member of node) {
        if (isRecord(member) && dictMatch(member, pattern, delimiter, valueMatch)) return true
        if (valueMatch(member, pattern)) return true
      }
      continue
    }
    if (valueMatch(node, pattern)) return true
  }
  return false
}

function dictMatch(
  data: Record<string, unknown>,
  pattern: string,
  delimiter: string,
  valueMatch: (value: unknown, pattern: string) => boolean,
): boolean {
  const wildcard = pattern.startsWith(`*${delimiter}`)
  const rest = wildcard ? pattern.slice(2) : pattern
  if (rest === '*' || Object.hasOwn(data, rest)) return true
  if (subdictMatch(data, rest, delimiter, valueMatch)) return true
  if (!wildcard) return false
  return Object.values(data).some((value) => {
    if (isRecord(value)) return dictMatch(value, rest, delimiter, valueMatch)
    if (Array.isArray(value)) return value.some((item) => valueMatch(item, rest))
    return valueMatch(value, rest)
  })
}

/**
 * Salt's ipcidr matcher: a network (`10.0.0.0/8`) matches when any of the minion's `ipv4` (or
 * `ipv6`) grains is inside it; a single address matches when the minion has exactly that address.
 */
function compileIpcidr(pattern: string, fail: (problem: string) => never): (minion: MinionInfo) => boolean {
  const [address = '', prefixText, extra] = pattern.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return fail(`'${pattern}' is not an IP address or CIDR network`)
  const type = family === 4 ? 'ipv4' : 'ipv6'
  const blockList = new BlockList()
  if (prefixText === undefined) {
    blockList.addAddress(address, type)
  } else {
    const prefix = /^\d+$/.test(prefixText) ? Number(prefixText) : Number.NaN
    if (!(prefix >= 0 && prefix <= (family === 4 ? 32 : 128))) return fail(`'${pattern}' has an invalid prefix length '/${prefixText}'`)
    blockList.addSubnet(address, prefix, type)
  }
  return (minion) => {
    const addresses = minion.grains?.[type]
    if (!Array.isArray(addresses)) return false
    return addresses.some((item) => typeof item === 'string' && isIP(item) === family && blockList.check(item, type))
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
