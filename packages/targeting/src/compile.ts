import { LruMap } from '@brine/core'
import { truncateForMessage, type Target, type TargetType, type Tgt } from '@brine/protocol'
import { RegexMatchError, RegexSyntaxError, RegexTimeoutError, TargetError } from './errors.js'
import { sharedRegexGuard, type GuardedRegex, type RegexGuard } from './regex-guard.js'
import { globMatcher, type GlobMatcher } from './glob.js'
import { compileIpcidr, pythonStr, subdictMatch, type MinionInfo } from './grains.js'
import { checkTargetLength, showTarget, TARGET_LIMITS } from './limits.js'
import { expandNodegroupWords, isNodegroupWord, nodegroupTargetWords, type Nodegroups } from './nodegroups.js'
import { translatePythonRegex, type TranslatedRegex } from './python-regex.js'
import { OPERATORS, tokenize } from './words.js'

/** A word or pattern quoted in an error message, cut short. */
const quote = (text: string): string => truncateForMessage(text, 100)

/** Salt's DEFAULT_TARGET_DELIM. */
export const DEFAULT_TARGET_DELIMITER = ':'

type Engine = 'glob' | 'pcre' | 'list' | 'grain' | 'grain_pcre' | 'ipcidr'

/** Answers "does this regex match this text" during one evaluation (regexes never run on the caller's thread). */
interface RegexOracle {
  test(regex: TranslatedRegex, text: string): boolean
}

type Node =
  | { kind: 'term'; needsGrains: boolean; test: (minion: MinionInfo, regex: RegexOracle) => boolean }
  | { kind: 'not'; operand: Node }
  | { kind: 'and' | 'or'; operands: Node[] }

/** Three-valued result: 'maybe' when a term needs grains the master has not cached. */
export type TargetMatch = boolean | 'maybe'

export interface MatchOptions {
  /** Where regular expressions run, bounded in time (default: the process's shared guard, {@link TARGET_LIMITS}.regexTimeoutMs). */
  guard?: RegexGuard
  signal?: AbortSignal
  /**
   * What a term needing grains the minion's info lacks answers: 'maybe' (default, carried through `not`, `and`
   * and `or`), or 'match', Salt's greedy set arithmetic, where such a term matches and `not` then excludes.
   */
  missingGrains?: 'maybe' | 'match'
}

/** A compiled target: parse once, match many minions. */
export interface CompiledTarget {
  readonly tgt: Tgt
  readonly tgtType: TargetType
  /** True when matching runs regular expressions (pcre, grain_pcre): they run in a worker thread, bounded in time. */
  readonly usesRegex: boolean
  /** Whether this minion is targeted (a minion with no grains is matched against empty grains). */
  match(minion: MinionInfo, options?: MatchOptions): Promise<boolean>
  /** For each minion: true, false, or 'maybe' when the answer depends on grains its info lacks. */
  evaluate(minions: readonly MinionInfo[], options?: MatchOptions): Promise<TargetMatch[]>
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

/** What compiling found out about a target. */
interface CompileState {
  shown: string
  tgtType: string
  usesRegex: boolean
  usedNodegroups: boolean
}

/** Every minion of a swarm matches every publish: compile each target once per process. */
const compiledTargets = new LruMap<string, CompiledTarget>(512)
const CACHED_TARGET_CHARS = 8192

function cacheKey(tgtType: string, tgt: Tgt, length: number): string | undefined {
  if (length > CACHED_TARGET_CHARS) return undefined
  return `${tgtType}\u0000${Array.isArray(tgt) ? `[${tgt.join('\u0001')}` : String(tgt)}`
}

/**
 * Parses and checks a target; throws TargetError naming the target and what is wrong, before
 * any work that grows faster than the target: length, words and nesting are bounded
 * ({@link TARGET_LIMITS}), tokenizing is linear, and globs match in linear time.
 */
export function compileTarget(target: Target, nodegroups: Nodegroups = {}): CompiledTarget {
  const tgtType = target.tgt_type ?? 'glob'
  const tgt = target.tgt
  const length = checkTargetLength(tgt, String(tgtType))
  const key = cacheKey(String(tgtType), tgt, length)
  const cached = key === undefined ? undefined : compiledTargets.get(key)
  if (cached !== undefined) return cached
  const state: CompileState = { shown: showTarget(tgt), tgtType: String(tgtType), usesRegex: false, usedNodegroups: false }
  const { shown } = state
  let root: Node
  switch (tgtType) {
    case 'compound':
      root = parseCompound(tokenize(tgt, shown, tgtType), nodegroups, state)
      break
    case 'nodegroup':
      if (typeof tgt !== 'string') throw new TargetError(shown, tgtType, 'a nodegroup target is the name of one nodegroup')
      state.usedNodegroups = true
      root = parseCompound(nodegroupTargetWords(tgt, nodegroups, shown, tgtType), nodegroups, state)
      break
    case 'list':
      root = Array.isArray(tgt) ? listTerm(tgt, state) : term('list', String(tgt), DEFAULT_TARGET_DELIMITER, state)
      break
    case 'glob':
    case 'pcre':
    case 'grain':
    case 'grain_pcre':
    case 'ipcidr':
      if (typeof tgt !== 'string') throw new TargetError(shown, tgtType, `a ${tgtType} target must be a string`)
      root = term(tgtType, tgt, DEFAULT_TARGET_DELIMITER, state)
      break
    default:
      throw new TargetError(shown, String(tgtType), `unknown tgt_type '${String(tgtType)}'`)
  }
  const compiled: CompiledTarget = {
    tgt,
    tgtType,
    usesRegex: state.usesRegex,
    match: (minion, options) => {
      const view = { ...minion, grains: minion.grains ?? {} }
      // Glob, list, grain and ipcidr targets answer at once: no promise chain for the common case.
      if (!state.usesRegex) return Promise.resolve(evaluate(root, view, NO_REGEX, 'maybe') === true)
      return evaluateAll(root, state, [view], options).then(([result]) => result === true)
    },
    evaluate: (minions, options) => evaluateAll(root, state, minions, options),
  }
  // A target that used nodegroups depends on them too: those are not remembered.
  if (key !== undefined && !state.usedNodegroups) compiledTargets.set(key, compiled)
  return compiled
}

/** Whether `minion` is targeted, as the minion itself decides after decrypting a publish. */
export function matchMinion(target: Target, minion: MinionInfo, nodegroups?: Nodegroups, options?: MatchOptions): Promise<boolean> {
  try {
    return compileTarget(target, nodegroups).match(minion, options)
  } catch (error) {
    return Promise.reject(error)
  }
}

export interface ExpectedMinionsOptions extends Omit<MatchOptions, 'missingGrains'> {
  /**
   * Salt's `greedy` check_minions (default true): a term needing grains the master has not cached matches, as in
   * Salt's set arithmetic, so `G@os:Debian` expects such a minion and `not G@os:Debian` does not (the minion still
   * decides for itself, and its return is accepted). Not greedy: only minions the cached grains match.
   */
  greedy?: boolean
}

/**
 * Which of the minions the master knows are expected to answer: the targeted ones, plus
 * (greedy) those that might be targeted but whose grains are not cached. A list target expects
 * exactly the listed ids that are known. Returned in the order of `known`. Regular expressions
 * are matched off the main thread: a hostile one is a TargetError after the time limit.
 */
export async function expectedMinions(
  target: Target,
  known: readonly MinionInfo[],
  nodegroups?: Nodegroups,
  options: ExpectedMinionsOptions = {},
): Promise<string[]> {
  const missingGrains = (options.greedy ?? true) ? 'match' : 'maybe'
  const results = await compileTarget(target, nodegroups).evaluate(known, { ...options, missingGrains })
  return known.filter((_, index) => results[index] === true).map((minion) => minion.id)
}

// ---------------------------------------------------------------------------------------------
// Evaluation

const NO_REGEX: RegexOracle = {
  test: () => {
    throw new Error('a target without regular expressions asked for one')
  },
}

/**
 * Evaluates the tree for each minion. With regular expressions, in two passes: the first
 * records every (regex, text) pair the terms would test, the guard matches them in its worker
 * (bounded in time), and the second pass evaluates with those answers.
 */
async function evaluateAll(root: Node, state: CompileState, minions: readonly MinionInfo[], options: MatchOptions = {}): Promise<TargetMatch[]> {
  const unknown: TargetMatch = options.missingGrains === 'match' ? true : 'maybe'
  if (!state.usesRegex) return minions.map((minion) => evaluate(root, minion, NO_REGEX, unknown))
  const guard = options.guard ?? sharedRegexGuard()
  const wanted = new Map<TranslatedRegex, Set<string>>()
  const recorder: RegexOracle = {
    test: (regex, text) => {
      const known = guard.peek(guarded(regex), text)
      if (known !== undefined) return known
      let texts = wanted.get(regex)
      if (texts === undefined) wanted.set(regex, (texts = new Set()))
      texts.add(text)
      // Answering no explores every path the terms can take, so the second pass asks nothing new.
      return false
    },
  }
  const first = minions.map((minion) => evaluate(root, minion, recorder, unknown))
  // Every answer was remembered (a swarm's minions matching a repeated target): no round trip.
  if (wanted.size === 0) return first
  const answers = new Map<TranslatedRegex, Map<string, boolean>>()
  try {
    await Promise.all(
      [...wanted].map(async ([regex, textSet]) => {
        const texts = [...textSet]
        const results = await guard.matchMany(guarded(regex), texts, { signal: options.signal })
        answers.set(regex, new Map(texts.map((text, index) => [text, results[index] === true])))
      }),
    )
  } catch (error) {
    if (error instanceof RegexTimeoutError || error instanceof RegexMatchError)
      throw new TargetError(state.shown, state.tgtType, error.message, { cause: error })
    throw error
  }
  const oracle: RegexOracle = {
    test: (regex, text) => answers.get(regex)?.get(text) ?? guard.peek(guarded(regex), text) === true,
  }
  return minions.map((minion) => evaluate(root, minion, oracle, unknown))
}

const guardedRegexes = new WeakMap<TranslatedRegex, GuardedRegex>()

/** As the guard runs it: sticky, so matched from the first character only, as Python's re.match (Salt's pcre and grain_pcre matchers). */
function guarded(regex: TranslatedRegex): GuardedRegex {
  let value = guardedRegexes.get(regex)
  if (value === undefined) guardedRegexes.set(regex, (value = { source: regex.source, flags: `${regex.flags}y`, pattern: regex.pattern }))
  return value
}

function evaluate(node: Node, minion: MinionInfo, regex: RegexOracle, unknown: TargetMatch): TargetMatch {
  switch (node.kind) {
    case 'term':
      if (node.needsGrains && minion.grains === undefined) return unknown
      return node.test(minion, regex)
    case 'not': {
      const value = evaluate(node.operand, minion, regex, unknown)
      return value === 'maybe' ? 'maybe' : !value
    }
    case 'and': {
      // Every operand is evaluated, as Salt evaluates every term, so a bad regex fails every time.
      let result: TargetMatch = true
      for (const operand of node.operands) {
        const value = evaluate(operand, minion, regex, unknown)
        if (value === false) result = false
        else if (value === 'maybe' && result === true) result = 'maybe'
      }
      return result
    }
    case 'or': {
      let result: TargetMatch = false
      for (const operand of node.operands) {
        const value = evaluate(operand, minion, regex, unknown)
        if (value === true) result = true
        else if (value === 'maybe' && result === false) result = 'maybe'
      }
      return result
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Terms

function translate(pattern: string, state: CompileState): TranslatedRegex {
  try {
    return translatePythonRegex(pattern)
  } catch (error) {
    if (error instanceof RegexSyntaxError) throw new TargetError(state.shown, state.tgtType, error.message, { cause: error })
    throw error
  }
}

function term(engine: Engine, pattern: string, delimiter: string, state: CompileState): Node {
  const fail = (problem: string): never => {
    throw new TargetError(state.shown, state.tgtType, problem)
  }
  switch (engine) {
    case 'glob': {
      const regex = compileGlob(pattern, fail)
      return { kind: 'term', needsGrains: false, test: (minion) => regex.test(minion.id) }
    }
    case 'pcre': {
      const regex = translate(pattern, state)
      state.usesRegex = true
      return { kind: 'term', needsGrains: false, test: (minion, oracle) => oracle.test(regex, minion.id) }
    }
    case 'list':
      return listTerm(pattern.split(','), state)
    case 'grain':
    case 'grain_pcre':
      return grainTerm(engine, pattern, delimiter, state, fail)
    case 'ipcidr':
      return { kind: 'term', needsGrains: true, test: compileIpcidr(pattern, fail) }
  }
}

/** Salt's list matcher: the ids, each trimmed (an item of a list target may itself hold commas). */
function listTerm(items: readonly string[], state: CompileState): Node {
  const ids = new Set<string>()
  for (const item of items) {
    for (const part of item.includes(',') ? item.split(',') : [item]) {
      const id = part.trim()
      if (id !== '') ids.add(id)
    }
  }
  if (ids.size === 0) throw new TargetError(state.shown, state.tgtType, 'the list names no minions')
  return { kind: 'term', needsGrains: false, test: (minion) => ids.has(minion.id) }
}

/** Salt's grain and grain_pcre matchers: subdict_match on the grains, the value compared as str(value).lower(). */
function grainTerm(engine: 'grain' | 'grain_pcre', pattern: string, delimiter: string, state: CompileState, fail: (problem: string) => never): Node {
  if (!pattern.includes(delimiter)) fail(`'${quote(pattern)}' needs a key and a value separated by '${delimiter}'`)
  const splits = pattern.split(delimiter)
  // Salt tries every split of the expression, so the work grows with the square of the delimiters.
  if (splits.length - 1 > TARGET_LIMITS.grainDelimiters) fail(`'${quote(pattern)}' has more than ${TARGET_LIMITS.grainDelimiters} '${delimiter}' delimiters`)
  if (engine === 'grain') {
    const globs = new Map<string, GlobMatcher>()
    const valueMatch = (value: unknown, expression: string): boolean => {
      const lowered = expression.toLowerCase()
      let compiled = globs.get(lowered)
      if (compiled === undefined) globs.set(lowered, (compiled = compileGlob(lowered, fail)))
      return compiled.test(pythonStr(value).toLowerCase())
    }
    return { kind: 'term', needsGrains: true, test: (minion) => subdictMatch(minion.grains ?? {}, pattern, delimiter, valueMatch) }
  }
  // The value part may itself contain the delimiter (`P@os:(?:deb|ubu)`): a bad regex is one no split compiles.
  const candidates = splits.slice(1).map((_, index) =>
    splits
      .slice(index + 1)
      .join(delimiter)
      .toLowerCase(),
  )
  const compiles = (candidate: string): boolean => {
    try {
      translatePythonRegex(candidate)
      return true
    } catch {
      return false
    }
  }
  if (!candidates.some(compiles)) translate(candidates[0] ?? '', state)
  state.usesRegex = true
  const regexes = new Map<string, TranslatedRegex>()
  const regexFor = (expression: string): TranslatedRegex => {
    let regex = regexes.get(expression)
    if (regex === undefined) regexes.set(expression, (regex = translate(expression, state)))
    return regex
  }
  return {
    kind: 'term',
    needsGrains: true,
    test: (minion, oracle) =>
      subdictMatch(minion.grains ?? {}, pattern, delimiter, (value, expression) =>
        oracle.test(regexFor(expression.toLowerCase()), pythonStr(value).toLowerCase()),
      ),
  }
}

function compileGlob(pattern: string, fail: (problem: string) => never): GlobMatcher {
  try {
    return globMatcher(pattern)
  } catch (error) {
    return fail(`bad glob '${quote(pattern)}': ${(error as Error).message}`)
  }
}

// ---------------------------------------------------------------------------------------------
// Compound parsing

/**
 * Recursive descent with Python's precedence, which Salt gets by eval()ing the expression:
 * `not` binds tighter than `and`, which binds tighter than `or`. As in Salt, `a not b` means
 * `a and not b`. Chains of `and`/`or` become one node each; parentheses and `not` may nest
 * {@link TARGET_LIMITS}.depth deep.
 */
function parseCompound(tokens: string[], nodegroups: Nodegroups, state: CompileState): Node {
  const fail = (problem: string): never => {
    throw new TargetError(state.shown, state.tgtType, problem)
  }
  // Expand N@ in place first (Salt's nodegroup_comp), so parentheses from groups parse like any others.
  let words = tokens
  if (tokens.some(isNodegroupWord)) {
    state.usedNodegroups = true
    words = expandNodegroupWords(tokens, nodegroups, state.shown, state.tgtType)
  }
  let position = 0
  let depth = 0
  const peek = (): string | undefined => words[position]
  const enter = (): void => {
    if (++depth > TARGET_LIMITS.depth) fail(`parentheses and 'not' nest more than ${TARGET_LIMITS.depth} deep`)
  }

  const parseOr = (): Node => {
    const operands = [parseAnd()]
    while (peek() === 'or') {
      position++
      operands.push(parseAnd())
    }
    return operands.length === 1 ? (operands[0] as Node) : { kind: 'or', operands }
  }
  const parseAnd = (): Node => {
    const operands = [parseNot()]
    for (;;) {
      const next = peek()
      if (next === 'and') position++
      else if (next !== 'not') break
      operands.push(parseNot())
    }
    return operands.length === 1 ? (operands[0] as Node) : { kind: 'and', operands }
  }
  const parseNot = (): Node => {
    if (peek() !== 'not') return parsePrimary()
    position++
    // Salt inserts 'and' before a 'not' that follows anything but and/or/(, so `not not x` is its `not and not x`,
    // which matches nothing; here it is said.
    if (peek() === 'not') fail("'not' follows 'not' (Salt reads 'not not' as 'not and not', which matches nothing)")
    enter()
    const operand = parseNot()
    depth--
    return { kind: 'not', operand }
  }
  const parsePrimary = (): Node => {
    const word = peek()
    if (word === undefined) return fail(position === 0 ? 'the target is empty' : `it ends with '${quote(words[position - 1] ?? '')}'`)
    if (word === '(') {
      position++
      enter()
      if (peek() === ')') fail("empty parentheses '( )'")
      const inner = parseOr()
      if (peek() !== ')') fail("unbalanced parentheses: missing ')'")
      position++
      depth--
      return inner
    }
    if (word === ')') return fail("unbalanced parentheses: unexpected ')'")
    if (OPERATORS.has(word)) return fail(position === 0 ? `it starts with '${word}'` : `'${word}' follows '${quote(words[position - 1] ?? '')}'`)
    position++
    return parseWord(word, state)
  }

  const root = parseOr()
  const rest = peek()
  if (rest === ')') fail("unbalanced parentheses: unexpected ')'")
  if (rest !== undefined) fail(`missing 'and' or 'or' between '${quote(words[position - 1] ?? '')}' and '${quote(rest)}'`)
  return root
}

/** One compound word: `G@os:Debian`, `G|@os|Debian` (custom delimiter), or a bare glob. */
function parseWord(word: string, state: CompileState): Node {
  const match = /^([A-Z])(.)?@(.*)$/s.exec(word)
  if (match === null) return term('glob', word, DEFAULT_TARGET_DELIMITER, state)
  const [, letter = '', customDelimiter, pattern = ''] = match
  const fail = (problem: string): never => {
    throw new TargetError(state.shown, state.tgtType, problem)
  }
  const unsupported = UNSUPPORTED_PREFIXES[letter]
  if (unsupported !== undefined) fail(unsupported)
  const engine = PREFIXES[letter]
  if (engine === undefined) return fail(`unknown prefix '${letter}@' in '${quote(word)}' (known: G@, P@, L@, E@, S@, N@)`)
  if (customDelimiter !== undefined && engine !== 'grain' && engine !== 'grain_pcre') fail(`unknown prefix '${letter}${customDelimiter}@' in '${quote(word)}'`)
  if (pattern === '') fail(`'${quote(word)}' has nothing after the '@'`)
  if (engine === 'nodegroup') fail(`nodegroup '${quote(word)}' could not be expanded`)
  return term(engine as Engine, pattern, customDelimiter ?? DEFAULT_TARGET_DELIMITER, state)
}
