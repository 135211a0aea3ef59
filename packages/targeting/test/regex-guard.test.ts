import { afterEach, describe, expect, it } from 'vitest'
import { deadline } from '@brine/transport-compliance'
import { RegexMatchError, RegexTimeoutError } from '../src/errors.js'
import { RegexGuard, type GuardedRegex } from '../src/regex-guard.js'

const WAIT_MS = 20_000

/** Exponential backtracking: 2^40 ways to split the a's before the engine can give up on the '!'. */
const HOSTILE: GuardedRegex = { source: '(a+)+$', flags: 'vy', pattern: '(a+)+$' }
const HOSTILE_TEXT = `${'a'.repeat(40)}!`
const WEB: GuardedRegex = { source: 'web\\d', flags: 'vy' }

const guards: RegexGuard[] = []
function guard(options?: ConstructorParameters<typeof RegexGuard>[0]): RegexGuard {
  const created = new RegexGuard(options)
  guards.push(created)
  return created
}
afterEach(async () => {
  for (const created of guards.splice(0)) await deadline(created.close(), WAIT_MS, 'the regex guard to close')
})

const rejection = async (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => expect.unreachable('expected a rejection'),
    (error: unknown) => error,
  )

describe('RegexGuard', () => {
  it('matches in a worker from the first character, and answers repeats from memory', async () => {
    const regexes = guard()
    expect(await regexes.matchMany(WEB, ['web1', 'db1', 'xweb1', 'web'])).toEqual([true, false, false, false])
    expect(regexes.stats()).toMatchObject({ batches: 1, matched: 4, cached: 0, workersStarted: 1 })
    expect(await regexes.matchMany(WEB, ['db1', 'web1', 'web2'])).toEqual([false, true, true])
    expect(regexes.stats()).toMatchObject({ batches: 2, matched: 5, cached: 2 })
    // Remembered answers can be read without a round trip; unknown ones are undefined.
    expect([regexes.peek(WEB, 'web2'), regexes.peek(WEB, 'db1'), regexes.peek(WEB, 'web9')]).toEqual([true, false, undefined])
  })

  it('sends requests made in one turn of the event loop as one batch per expression', async () => {
    const regexes = guard()
    const ids = Array.from({ length: 500 }, (_, index) => `web${index}`)
    const answers = await Promise.all(ids.map((id) => regexes.matchMany(WEB, [id])))
    expect(answers.flat().every((answer) => answer)).toBe(true)
    expect(regexes.stats()).toMatchObject({ batches: 1, matched: 500 })
  })

  it('stops a catastrophic backtrack at the deadline by terminating the worker, and carries on with a fresh one', async () => {
    const regexes = guard({ timeoutMs: 200 })
    const hostile = rejection(regexes.matchMany(HOSTILE, ['aaa', HOSTILE_TEXT]))
    // Queued behind the hostile batch: a different expression, which must still be answered.
    const queued = regexes.matchMany(WEB, ['web7'])
    const error = await deadline(hostile, WAIT_MS, 'the hostile batch to be stopped')
    expect(error).toBeInstanceOf(RegexTimeoutError)
    expect(error).toMatchObject({ pattern: '(a+)+$', limit: 200, values: 2, repeated: false })
    expect((error as Error).message).toBe("regular expression '(a+)+$' did not finish matching 2 values within 200 ms (catastrophic backtracking?); stopped")
    expect(await deadline(queued, WAIT_MS, 'the batch queued behind it')).toEqual([true])
    // The terminated worker really exits: terminate() interrupted the running RegExp.
    await deadline(regexes.settled(), WAIT_MS, 'the terminated worker to exit')
    expect(regexes.stats()).toMatchObject({ timeouts: 1, workersStarted: 2, workersExited: 1 })
  })

  it('refuses an expression that just hit the deadline without running it again', async () => {
    const regexes = guard({ timeoutMs: 200, holdMs: 60_000 })
    await deadline(rejection(regexes.matchMany(HOSTILE, [HOSTILE_TEXT])), WAIT_MS, 'the hostile batch to be stopped')
    const batches = regexes.stats().batches
    const again = await rejection(regexes.matchMany(HOSTILE, ['aaaa']))
    expect(again).toMatchObject({ name: 'RegexTimeoutError', repeated: true })
    expect((again as Error).message).toBe("regular expression '(a+)+$' exceeded the 200 ms matching limit moments ago; refused without matching for 60 s")
    expect(regexes.stats()).toMatchObject({ batches, refused: 1 })
  })

  it('keeps the event loop free while a regex runs', async () => {
    // A long deadline: the hostile batch is still running while the loop turns; close() ends it.
    const regexes = guard({ timeoutMs: 600_000 })
    const order: string[] = []
    const hostile = regexes.matchMany(HOSTILE, [HOSTILE_TEXT]).then(
      () => order.push('hostile answered'),
      () => order.push('hostile stopped'),
    )
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve))
    order.push('event loop turned 20 times')
    await deadline(regexes.close(), WAIT_MS, 'close to stop the worker')
    await hostile
    expect(order).toEqual(['event loop turned 20 times', 'hostile stopped'])
  })

  it('reports an engine failure as RegexMatchError and stays usable', async () => {
    const regexes = guard()
    const error = await rejection(regexes.matchMany({ source: '(', flags: 'v', pattern: 'broken' }, ['x']))
    expect(error).toBeInstanceOf(RegexMatchError)
    expect((error as Error).message).toMatch(/^regular expression 'broken' could not be matched: Invalid regular expression/)
    expect(await regexes.matchMany(WEB, ['web1'])).toEqual([true])
  })

  it('honours an AbortSignal, before and while waiting', async () => {
    const regexes = guard({ timeoutMs: 600_000 })
    const aborted = AbortSignal.abort(new Error('gave up'))
    await expect(regexes.matchMany(WEB, ['web1'], { signal: aborted })).rejects.toThrow('gave up')
    const controller = new AbortController()
    const waiting = rejection(regexes.matchMany(HOSTILE, [HOSTILE_TEXT], { signal: controller.signal }))
    controller.abort(new Error('no longer needed'))
    expect(await deadline(waiting, WAIT_MS, 'the aborted request')).toMatchObject({ message: 'no longer needed' })
  })

  it('fails pending and later requests once closed', async () => {
    const regexes = guard({ timeoutMs: 600_000 })
    const pending = rejection(regexes.matchMany(HOSTILE, [HOSTILE_TEXT]))
    await regexes.close()
    expect(await pending).toMatchObject({ name: 'RegexMatchError', problem: 'the regex guard was closed' })
    await expect(regexes.matchMany(WEB, ['web1'])).rejects.toThrow(RegexMatchError)
  })
})
