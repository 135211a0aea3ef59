import { describe, expect, it } from 'vitest'
import { BrineError, errorFromWire, serializeError } from '@brine/core'
import { BusSubscriptionError, busTagMatcher, MAX_BUS_PATTERN_LENGTH, parseBusSubscription } from '../src/event-bus.js'

describe('busTagMatcher', () => {
  it('takes a tag that starts with a pattern, a whole `*` segment standing for any one non-empty segment', () => {
    const matches = busTagMatcher(['salt/job/*/ret/', 'syndic/'])
    expect(matches('salt/job/20261122170903000001/ret/web1')).toBe(true)
    expect(matches('syndic/s1/salt/job/20261122170903000001/new')).toBe(true)
    expect(matches('salt/job/20261122170903000001/new')).toBe(false)
    expect(matches('salt/job//ret/web1')).toBe(false)
    expect(matches('salt/job/20261122170903000001')).toBe(false)
    expect(matches('brine/audit/publish')).toBe(false)
    expect(busTagMatcher(['salt/*'])('salt/key')).toBe(true)
    expect(busTagMatcher(['salt/*'])('salt/')).toBe(false)
    expect(busTagMatcher(['*/start'])('minion_start')).toBe(false)
    expect(busTagMatcher(['*/*/web1/'])('salt/minion/web1/start')).toBe(true)
    expect(busTagMatcher([''])('anything')).toBe(true)
  })
})

describe('parseBusSubscription', () => {
  it('returns the patterns of a well-formed subscription', () => {
    expect(parseBusSubscription({ subscribe: ['salt/job/*/ret/', ''] })).toEqual(['salt/job/*/ret/', ''])
  })

  it('refuses anything else with a BusSubscriptionError naming what is wrong', () => {
    const refusals: Array<[unknown, RegExp]> = [
      [null, /expected \{subscribe: \[tag pattern, …\]\}/],
      [{ subscribe: 'salt/' }, /expected \{subscribe/],
      [{ subscribe: [] }, /0 patterns; 1 to 16 are allowed/],
      [{ subscribe: Array.from({ length: 17 }, () => 'a/') }, /17 patterns; 1 to 16 are allowed/],
      [{ subscribe: [3] }, /a pattern is a number, not a string/],
      [{ subscribe: ['x'.repeat(MAX_BUS_PATTERN_LENGTH + 1)] }, /a pattern of 257 characters exceeds 256/],
      [{ subscribe: ['salt/j*b/'] }, /"salt\/j\*b\/": '\*' stands only for a whole segment/],
    ]
    for (const [value, message] of refusals) {
      let caught: unknown
      try {
        parseBusSubscription(value)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(BusSubscriptionError)
      expect((caught as Error).message).toMatch(message)
    }
  })

  it('is rebuilt by name on the other side of a wire', () => {
    const error = new BusSubscriptionError('expected {subscribe: [tag pattern, …]}')
    const rebuilt = errorFromWire(serializeError(error))
    expect(rebuilt).toBeInstanceOf(BusSubscriptionError)
    expect(BrineError.isInstance(rebuilt)).toBe(true)
  })
})
