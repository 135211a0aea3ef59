/**
 * @packageDocumentation
 * `@brine/targeting` is Salt's targeting: the minion-side matchers (salt/matchers/*), the master's view of which
 * known minions a target expects, and nodegroups resolved on the master before a publish.
 * Differences from Salt, on purpose:
 * - a target that cannot be evaluated (bad regex, unbalanced parentheses, unknown prefix or
 *   nodegroup, a bound exceeded) throws TargetError instead of logging and matching nothing;
 * - targets are bounded ({@link TARGET_LIMITS}): length, words, nesting, grain delimiters, and
 *   the time regular expressions may take, which run in a worker thread ({@link RegexGuard});
 * - in compound targets, parentheses may touch their words (`(web* or db*)`); Salt needs spaces;
 * - a list nodegroup of target expressions without operators matches any of them;
 * - pillar (`I@`, `J@`), range (`R@`) and the other rarely used engines are not supported.
 */
export { compileTarget, matchMinion, expectedMinions, DEFAULT_TARGET_DELIMITER } from './compile.js'
export type { CompiledTarget, ExpectedMinionsOptions, MatchOptions, TargetMatch } from './compile.js'
export { resolveNodegroups, type Nodegroups } from './nodegroups.js'
export { globToRegExp } from './glob.js'
export { translatePythonRegex, type TranslatedRegex } from './python-regex.js'
export { TARGET_LIMITS } from './limits.js'
export type { Grains, MinionInfo } from './grains.js'
export * from './regex-guard.js'
export * from './errors.js'
