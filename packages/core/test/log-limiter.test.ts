import { describe, expect, it } from 'vitest'
import { createLogger, LogLimiter } from '@brine/core'
import { deadline } from '@brine/testkit'

function capture() {
  const lines: string[] = []
  return { lines, logger: createLogger({ level: 'warning', write: (line) => lines.push(line.trim()) }) }
}

describe('LogLimiter', () => {
  it('lets `burst` lines through per window and counts the rest into the next line let through', () => {
    let now = 0
    const limiter = new LogLimiter({ burst: 3, windowMs: 1000, now: () => now })
    const { lines, logger } = capture()
    for (let i = 0; i < 100; i++) limiter.warning(logger, `refused ${i}`, 'refusals')
    expect(lines).toHaveLength(3)
    expect(limiter.suppressed).toBe(97)
    now = 1000
    expect(limiter.warning(logger, 'refused 100', 'refusals')).toBe(true)
    expect(lines.at(-1)).toMatch(/refused 100 \(97 refusals suppressed before this one\)$/)
    expect(limiter.suppressed).toBe(0)
    limiter.flush()
  })

  it('says how many it held back once the window ends, even when the flood has stopped', async () => {
    const limiter = new LogLimiter({ burst: 1, windowMs: 30 })
    const { lines, logger } = capture()
    for (let i = 0; i < 5; i++) limiter.warning(logger, `dropped ${i}`, 'dropped-frame warnings')
    expect(lines).toHaveLength(1)
    await deadline(
      (async () => {
        while (lines.length < 2) await new Promise((resolve) => setTimeout(resolve, 5))
      })(),
      5000,
      'the summary line',
    )
    expect(lines[1]).toMatch(/4 dropped-frame warnings suppressed in the last 0 s \(at most 1 logged per window\)$/)
  })

  it('refuses a burst or window that cannot work', () => {
    expect(() => new LogLimiter({ burst: 0 })).toThrow(RangeError)
    expect(() => new LogLimiter({ windowMs: 0 })).toThrow(RangeError)
  })
})
