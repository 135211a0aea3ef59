import { describe, expect, it } from 'vitest'
import { EarlyNews, type HeldJob } from '../src/early-news.js'

const A = '20260101000000000001'
const B = '20260101000000000002'
const C = '20260101000000000003'

/** Early news with its released jobs recorded: jid, and the minions held (announced, then returned). */
function news(options: { limit?: number; maxAgeMs?: number; maxReturns?: number } = {}) {
  const released: Array<[string, string[], string[]]> = []
  const release = (jid: string, held: HeldJob): void => {
    released.push([jid, [...held.announcements.values()].flatMap((share) => [...share.minions]), [...held.returns.keys()]])
  }
  return { early: new EarlyNews({ limit: 8, maxAgeMs: 60_000, maxReturns: 100, ...options, release }), released }
}

const announcement = (jid: string, minions: string[], pending: string[] = []) => ({ syndic: 'low', jid, minions, pending })

describe("a syndic's early news (what is heard of a job before it is announced upward)", () => {
  it("holds announcements and returns only for the jobs begun, merges a lower syndic's announcements and keeps its latest pending", () => {
    const { early, released } = news()
    expect(early.announce(announcement(A, ['l1']))).toBe(false)
    expect(early.addReturn(A, 'l1', {})).toBe(false)
    early.begin(A, 0)
    expect(early.announce(announcement(A, ['l1'], ['lower']))).toBe(true)
    expect(early.announce(announcement(A, ['l2']))).toBe(true)
    expect(early.addReturn(A, 'l1', { return: true })).toBe(true)
    const announced = early.takeAnnouncements(A)
    expect(announced).toEqual([['low', { minions: new Set(['l1', 'l2']), pending: [] }]])
    // Taking the announcements keeps the job held: its returns wait for take().
    expect(early.size).toBe(1)
    expect(early.take(A)?.returns).toEqual(new Map([['l1', { return: true }]]))
    expect(early.size).toBe(0)
    expect(released).toEqual([])
  })

  it('lets go of the oldest job past its limit and of jobs held too long, forwarding what they held', () => {
    const { early, released } = news({ limit: 2, maxAgeMs: 1000 })
    early.begin(A, 0)
    early.announce(announcement(A, ['a1']))
    early.begin(B, 500)
    early.addReturn(B, 'b1', {})
    early.begin(C, 900)
    expect(released).toEqual([[A, ['a1'], []]])
    expect(early.size).toBe(2)
    expect(early.expire(1400)).toBe(0)
    expect(early.expire(1501)).toBe(1)
    expect(released).toEqual([
      [A, ['a1'], []],
      [B, [], ['b1']],
    ])
    expect(early.expire(1901)).toBe(1)
    expect(early.size).toBe(0)
  })

  it('lets a job go once it would hold more than maxReturns returns: the rest go up as they come', () => {
    const { early, released } = news({ maxReturns: 2 })
    early.begin(A, 0)
    expect(early.addReturn(A, 'm1', {})).toBe(true)
    expect(early.addReturn(A, 'm2', {})).toBe(true)
    expect(early.addReturn(A, 'm3', {})).toBe(false)
    expect(released).toEqual([[A, [], ['m1', 'm2']]])
    expect(early.addReturn(A, 'm4', {})).toBe(false)
  })
})
