import { afterEach, describe, expect, it } from 'vitest'
import { deadline } from '@brine/transport-compliance'
import { TargetError } from '../src/errors.js'
import { RegexGuard } from '../src/regex-guard.js'
import { compileTarget, expectedMinions, matchMinion, TARGET_LIMITS } from '../src/index.js'
import type { MinionInfo } from '../src/index.js'
import type { Target } from '@brine/protocol'

// These targets stalled the master's main thread before they were bounded (issue 15, finding 8):
// each is now refused with a TargetError, or matched in time that grows no faster than the target.

const WAIT_MS = 20_000

const refusal = async (promise: Promise<unknown>): Promise<TargetError> => {
  const error = await promise.then(
    () => expect.unreachable('expected a TargetError'),
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(TargetError)
  return error as TargetError
}

const guards: RegexGuard[] = []
afterEach(async () => {
  for (const guard of guards.splice(0)) await deadline(guard.close(), WAIT_MS, 'the regex guard to close')
})

describe('parsing is bounded', () => {
  it('refuses a target over the length limit, showing only its start', () => {
    const attempt = (): unknown => compileTarget({ tgt: 'a'.repeat(1_000_000), tgt_type: 'glob' })
    expect(attempt).toThrow(TargetError)
    try {
      attempt()
    } catch (error) {
      const refused = error as TargetError
      expect(refused.problem).toBe(`the target is 1000000 characters long; the limit is ${TARGET_LIMITS.length}`)
      expect(refused.target.length).toBeLessThanOrEqual(200)
      expect(refused.message.length).toBeLessThan(400)
    }
  })

  it('accepts a list target of 100,000 ids (batches and scripts build big lists)', async () => {
    const ids = Array.from({ length: 100_000 }, (_, index) => `minion-${index}`)
    expect(await matchMinion({ tgt: ids, tgt_type: 'list' }, { id: 'minion-99999' })).toBe(true)
    expect(await matchMinion({ tgt: ids.join(','), tgt_type: 'list' }, { id: 'minion-100000' })).toBe(false)
  })

  it('refuses 60,000 closing parentheses by the word limit, not after a quadratic scan', () => {
    expect(() => compileTarget({ tgt: ')'.repeat(60_000), tgt_type: 'compound' })).toThrow(`it has more than ${TARGET_LIMITS.words} words`)
    expect(() => compileTarget({ tgt: `web1${')'.repeat(5_000)}`, tgt_type: 'compound' })).toThrow("unbalanced parentheses: unexpected ')'")
  })

  it('refuses parentheses and not nested past the depth limit with a TargetError, not a RangeError', () => {
    const nested = (depth: number): string => `${'( '.repeat(depth)}web1${' )'.repeat(depth)}`
    expect(() => compileTarget({ tgt: nested(TARGET_LIMITS.depth), tgt_type: 'compound' })).not.toThrow()
    expect(() => compileTarget({ tgt: nested(TARGET_LIMITS.depth + 1), tgt_type: 'compound' })).toThrow(
      `parentheses and 'not' nest more than ${TARGET_LIMITS.depth} deep`,
    )
    expect(() => compileTarget({ tgt: `${'not '.repeat(TARGET_LIMITS.depth + 1)}web1`, tgt_type: 'compound' })).toThrow(TargetError)
    expect(() => compileTarget({ tgt: '('.repeat(4_000), tgt_type: 'compound' })).toThrow(TargetError)
  })

  it('evaluates a long chain of or and and without deep recursion', async () => {
    const words = Array.from({ length: 3_000 }, (_, index) => `web${index}`)
    expect(await matchMinion({ tgt: words.join(' or '), tgt_type: 'compound' }, { id: 'web2999' })).toBe(true)
    expect(await matchMinion({ tgt: words.map((word) => `not ${word}`).join(' and '), tgt_type: 'compound' }, { id: 'db1' })).toBe(true)
  })

  it('refuses a grain expression with more delimiters than the limit', () => {
    const colons = ':'.repeat(TARGET_LIMITS.grainDelimiters + 1)
    expect(() => compileTarget({ tgt: `os${colons}`, tgt_type: 'grain' })).toThrow(`has more than ${TARGET_LIMITS.grainDelimiters} ':' delimiters`)
    expect(() => compileTarget({ tgt: `G@hwaddr_interfaces:eth0:00:11:22:33:44:55`, tgt_type: 'compound' })).not.toThrow()
  })
})

describe('globs match in linear time, as Python 3.9+ fnmatch', () => {
  it('answers many stars against a long run of the same letter', async () => {
    // `.*a.*a.*a…b` backtracked through every way to place the stars: this hung the main thread.
    const glob = `${'*a'.repeat(40)}b`
    expect(await matchMinion({ tgt: glob, tgt_type: 'glob' }, { id: 'a'.repeat(200) })).toBe(false)
    expect(await matchMinion({ tgt: glob, tgt_type: 'glob' }, { id: `${'a'.repeat(200)}b` })).toBe(true)
    expect(await matchMinion({ tgt: `G@role:${'*x'.repeat(30)}`, tgt_type: 'compound' }, { id: 'm', grains: { role: 'x'.repeat(300) } })).toBe(true)
  })

  it('keeps fnmatch semantics with several stars', async () => {
    const cases: Array<[string, string, boolean]> = [
      ['*b*c', 'abxc', true],
      ['*b*c', 'abxcd', false],
      ['a*b*c*d', 'aXbYcZd', true],
      ['a*b*c*d', 'aXcYbZd', false],
      ['*[0-9]*[0-9]', 'web1-2', true],
      ['?*?*?', 'ab', false],
      ['**a**', 'xa', true],
    ]
    for (const [glob, id, expected] of cases) expect(await matchMinion({ tgt: glob, tgt_type: 'glob' }, { id }), `${glob} on ${id}`).toBe(expected)
  })

  it('refuses a glob with more runs of * than the limit', () => {
    expect(() => compileTarget({ tgt: '*a'.repeat(300), tgt_type: 'glob' })).toThrow("it has 300 runs of '*'; the limit is 256")
  })
})

describe('regular expressions are matched off the main thread, with a time limit', () => {
  const thousand: MinionInfo[] = Array.from({ length: 1_000 }, (_, index) => ({ id: `minion-${String(index).padStart(4, '0')}` }))

  it('answers a hostile -E against 1,000 ids with a TargetError, while other targets are evaluated', async () => {
    const guard = new RegexGuard({ timeoutMs: 300 })
    guards.push(guard)
    // Polynomial backtracking of degree 12 against every id: far too slow to finish, whatever the machine.
    const hostile: Target = { tgt: '(.*){12}!', tgt_type: 'pcre' }
    const order: string[] = []
    const refused = refusal(expectedMinions(hostile, thousand, {}, { guard })).finally(() => order.push('hostile refused'))
    const glob = expectedMinions({ tgt: 'minion-000*', tgt_type: 'glob' }, thousand, {}, { guard }).finally(() => order.push('glob answered'))
    expect(await glob).toHaveLength(10)
    const error = await deadline(refused, WAIT_MS, 'the hostile target to be refused')
    expect(order).toEqual(['glob answered', 'hostile refused'])
    expect(error.message).toBe(
      "invalid pcre target '(.*){12}!': regular expression '(.*){12}!' did not finish matching 1000 values within 300 ms (catastrophic backtracking?); stopped",
    )
    expect(error.cause).toMatchObject({ name: 'RegexTimeoutError', limit: 300, values: 1000 })
    // The next regex target is answered by a fresh worker.
    expect(await expectedMinions({ tgt: '(?i)MINION-099', tgt_type: 'pcre' }, thousand, {}, { guard })).toEqual(thousand.slice(990).map((minion) => minion.id))
    await deadline(guard.settled(), WAIT_MS, 'the stopped worker to exit')
    expect(guard.stats()).toMatchObject({ timeouts: 1, workersStarted: 2, workersExited: 1 })
  })

  it('bounds grain_pcre too, on the master and on a minion', async () => {
    const guard = new RegexGuard({ timeoutMs: 300 })
    guards.push(guard)
    const minion = { id: 'web1', grains: { role: `${'a'.repeat(40)}!` } }
    const error = await refusal(matchMinion({ tgt: 'role:(a+)+$', tgt_type: 'grain_pcre' }, minion, {}, { guard }))
    expect(error.message).toMatch(/^invalid grain_pcre target 'role:\(a\+\)\+\$': regular expression '\(a\+\)\+\$' did not finish/)
    expect(await matchMinion({ tgt: 'P@role:a+!$ and web*', tgt_type: 'compound' }, minion, {}, { guard })).toBe(true)
  })

  it('matches with Python semantics: re.match anchoring, inline flags, named groups', async () => {
    const ids: MinionInfo[] = ['web1', 'WEB2', 'db-web1', 'web1-web1', 'web1-db1'].map((id) => ({ id }))
    const expectFor = (tgt: string): Promise<string[]> => expectedMinions({ tgt, tgt_type: 'pcre' }, ids)
    expect(await expectFor('(?i)WEB')).toEqual(['web1', 'WEB2', 'web1-web1', 'web1-db1'])
    expect(await expectFor('web')).toEqual(['web1', 'web1-web1', 'web1-db1'])
    expect(await expectFor('(?P<host>web\\d)-(?P=host)$')).toEqual(['web1-web1'])
    expect(await expectedMinions({ tgt: 'E@(?i)web and not E@.*-', tgt_type: 'compound' }, ids)).toEqual(['web1', 'WEB2'])
  })

  it('names what cannot be translated', async () => {
    const error = await refusal(matchMinion({ tgt: 'E@(?>web)1 or db*', tgt_type: 'compound' }, { id: 'db1' }))
    expect(error.message).toBe(
      "invalid compound target 'E@(?>web)1 or db*': bad regular expression '(?>web)1': atomic groups (?>…) are not supported at position 0",
    )
  })
})
