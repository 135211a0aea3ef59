/** The copy each job gets of its frozen, shared load. */
import { describe, expect, it } from 'vitest'
import { decode, encode } from '@brine/transport'
import { mutableCopy } from '../src/job-runner.js'

const deepFreeze = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value)) {
    Object.freeze(value)
    for (const item of Object.values(value)) deepFreeze(item)
  }
  return value
}

describe('mutableCopy', () => {
  it('copies lists, maps and byte arrays of a frozen load; the original stays as it was', () => {
    const load = deepFreeze(decode(encode({ arg: [[1, 2], { a: { b: [3] } }, new Uint8Array([7, 8])], kwarg: { n: null, s: 'x' } })) as {
      arg: [number[], { a: { b: number[] } }, Uint8Array]
      kwarg: Record<string, unknown>
    })
    const copy = mutableCopy(load)
    expect(copy).toEqual(load)
    copy.arg[0].push(9)
    copy.arg[1].a.b.push(4)
    copy.arg[2][0] = 0
    copy.kwarg.added = true
    expect(load.arg[0]).toEqual([1, 2])
    expect(load.arg[1].a.b).toEqual([3])
    expect([...load.arg[2]]).toEqual([7, 8])
    expect(load.kwarg).toEqual({ n: null, s: 'x' })
  })

  it('keeps a decoded `__proto__` key as data, never as the prototype', () => {
    const load = deepFreeze(JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as Record<string, unknown>)
    const copy = mutableCopy(load)
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype)
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined()
    expect(Object.keys(copy)).toEqual(['__proto__', 'x'])
  })

  it('copies the rarer values a decoder may produce', () => {
    const date = new Date(1_700_000_000_000)
    const copy = mutableCopy({ when: date, floats: new Float64Array([1.5]) })
    expect(copy.when).not.toBe(date)
    expect(copy.when.getTime()).toBe(date.getTime())
    expect([...copy.floats]).toEqual([1.5])
  })
})
