import { describe, expect, it } from 'vitest'
import { DeadlineError, deadline } from '../src/index.js'

describe('deadline', () => {
  it('names what it waited for and the limit, and passes a settled value through', async () => {
    const error = await deadline(new Promise(() => {}), 20, 'the minion to say hello').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DeadlineError)
    expect((error as Error).message).toBe('gave up after 20 ms waiting for the minion to say hello')
    expect((error as DeadlineError).context).toEqual({ what: 'the minion to say hello', limit: 20 })
    expect(await deadline(Promise.resolve(7), 1000, 'seven')).toBe(7)
  })
})
