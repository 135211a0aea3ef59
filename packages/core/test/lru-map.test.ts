import { describe, expect, it } from 'vitest'
import { LruMap } from '@brine/core'

describe('LruMap', () => {
  it('drops the least recently used entry beyond its limit; get and set count as use', () => {
    const map = new LruMap<string, number>(3)
    map.set('a', 1).set('b', 2).set('c', 3)
    expect(map.get('a')).toBe(1) // a is now the most recent: b is the oldest
    map.set('d', 4)
    expect([map.has('a'), map.has('b'), map.has('c'), map.has('d')]).toEqual([true, false, true, true])
    map.set('c', 30) // replacing refreshes c: a is the oldest
    map.set('e', 5)
    expect([map.has('a'), map.get('c'), map.size]).toEqual([false, 30, 3])
    expect(map.delete('c')).toBe(true)
    expect(map.get('c')).toBeUndefined()
  })

  it('refuses a limit below one', () => {
    expect(() => new LruMap(0)).toThrow(RangeError)
  })
})
