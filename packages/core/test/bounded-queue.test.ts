import { describe, expect, it } from 'vitest'
import { BoundedQueue, InvalidOperationError, backoffDelay } from '@brine/core'

describe('BoundedQueue', () => {
  it('drops the newest at capacity and counts it', () => {
    const queue = new BoundedQueue<number>(2)
    expect([queue.push(1), queue.push(2), queue.push(3)]).toEqual([true, true, false])
    expect(queue.dropped).toBe(1)
    expect(queue.drain()).toEqual([1, 2])
  })

  it('can evict the oldest instead', () => {
    const queue = new BoundedQueue<number>(2, 'drop-oldest')
    queue.push(1)
    queue.push(2)
    queue.push(3)
    expect(queue.drain()).toEqual([2, 3])
    expect(queue.dropped).toBe(1)
  })

  it('is an async iterator that hands items to a waiting reader and ends', async () => {
    const queue = new BoundedQueue<string>(10)
    const seen: string[] = []
    const reading = (async () => {
      for await (const item of queue) seen.push(item)
    })()
    queue.push('a')
    queue.push('b')
    await Promise.resolve()
    queue.push('c')
    queue.end()
    await reading
    expect(seen).toEqual(['a', 'b', 'c'])
    expect(queue.push('late')).toBe(false)
  })

  it('has a single consumer', () => {
    const queue = new BoundedQueue<number>(1)
    queue[Symbol.asyncIterator]()
    expect(() => queue[Symbol.asyncIterator]()).toThrow(InvalidOperationError)
  })

  it('keeps its order across many shifts (compaction)', () => {
    const queue = new BoundedQueue<number>(5000)
    for (let i = 0; i < 5000; i++) queue.push(i)
    const out: number[] = []
    for (let i = 0; i < 3000; i++) out.push(queue.shift()!)
    for (let i = 5000; i < 6000; i++) queue.push(i)
    out.push(...queue.drain())
    expect(out).toEqual(Array.from({ length: 6000 }, (_, i) => i))
  })
})

describe('backoffDelay', () => {
  it('stays at initial for the steady attempts, then grows by factor, caps at max, and spreads by jitter', () => {
    const steadyFirst = { initial: 100, max: 1000, factor: 2, jitter: 0 }
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelay(n, steadyFirst))).toEqual([100, 100, 100, 200, 400, 800, 1000, 1000])
    const options = { initial: 100, max: 1000, factor: 2, jitter: 0.5, steady: 1 }
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, options, () => 1))).toEqual([100, 200, 400, 800, 1000, 1000])
    expect([1, 2, 5].map((n) => backoffDelay(n, options, () => 0))).toEqual([50, 100, 500])
    expect(backoffDelay(3, { ...options, jitter: 0 }, () => 0)).toBe(400)
  })
})
