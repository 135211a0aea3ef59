import { describe, expect, it } from 'vitest'
import { SubsetSizeError } from '../src/errors.js'
import { parseSubsetSize, pickSubset } from '../src/subset.js'

describe('subset size', () => {
  it('takes a whole number of minions of at least 1, as a number or text', () => {
    expect(parseSubsetSize(2, '--subset')).toBe(2)
    expect(parseSubsetSize(' 10 ', 'subset')).toBe(10)
  })

  it('refuses anything else with a typed error naming the value and where it came from', () => {
    const cases: Array<[unknown, RegExp]> = [
      [0, /invalid subset size "0" for --subset: at least one minion/],
      ['-1', /"-1" for --subset: not a whole number/],
      ['2.5', /not a whole number/],
      ['10%', /not a whole number/],
      [null, /"null" for --subset: not a whole number/],
      [true, /not a whole number/],
    ]
    for (const [value, message] of cases) {
      let error: unknown
      try {
        parseSubsetSize(value, '--subset')
      } catch (caught) {
        error = caught
      }
      expect(error, String(value)).toBeInstanceOf(SubsetSizeError)
      expect((error as SubsetSizeError).message, String(value)).toMatch(message)
      expect((error as SubsetSizeError).key).toBe('--subset')
    }
  })
})

describe('the subset pick', () => {
  const functions = { a: ['test.ping'], b: ['cmd.run'], c: ['test.ping', 'cmd.run'], d: 'an error', e: ['test.ping'] }

  it('picks only minions whose function list names the function, at most the size asked', () => {
    expect(pickSubset(functions, 'test.ping', 10).sort()).toEqual(['a', 'c', 'e'])
    expect(pickSubset(functions, 'test.ping', 2)).toHaveLength(2)
    expect(pickSubset(functions, 'no.such', 3)).toEqual([])
  })

  it('draws with the random source: the first place from all candidates, the next from the rest', () => {
    // Candidates a, c, e. 0.99 draws the last one left each time: e (a moves to its place), then a; 0 keeps the order.
    expect(pickSubset(functions, 'test.ping', 2, () => 0.99)).toEqual(['e', 'a'])
    expect(pickSubset(functions, 'test.ping', 2, () => 0)).toEqual(['a', 'c'])
  })
})
