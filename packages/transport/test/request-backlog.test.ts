import { describe, expect, it } from 'vitest'
import { RequestBacklog, RequestsInHand, type WaitingRequest } from '../src/runtime/request-backlog.js'

const waiting = (peer: string, id: number): WaitingRequest<string> => ({
  id,
  cost: 0,
  held: 0,
  frame: Buffer.from([id]),
  peer,
  peerName: peer,
  address: undefined,
})

describe('RequestBacklog', () => {
  it('serves the urgent lane first, each lane in arrival order, and bounds both lanes together', () => {
    const backlog = new RequestBacklog<string>(4)
    expect(backlog.push(waiting('minion-a', 1), false)).toBe(true)
    expect(backlog.push(waiting('minion-b', 1), false)).toBe(true)
    expect(backlog.push(waiting('operator', 1), true)).toBe(true)
    expect(backlog.push(waiting('operator', 2), true)).toBe(true)
    // Full over both lanes: neither lane takes a fifth.
    expect(backlog.push(waiting('minion-c', 1), false)).toBe(false)
    expect(backlog.push(waiting('operator', 3), true)).toBe(false)
    expect(backlog.size).toBe(4)
    const order = Array.from({ length: 5 }, () => backlog.shift()).map((next) => next && `${next.peer} ${next.id}`)
    expect(order).toEqual(['operator 1', 'operator 2', 'minion-a 1', 'minion-b 1', undefined])
  })

  it('forgets everything waiting on clear', () => {
    const backlog = new RequestBacklog<string>(2)
    backlog.push(waiting('minion-a', 1), false)
    backlog.push(waiting('operator', 1), true)
    backlog.clear()
    expect(backlog.size).toBe(0)
    expect(backlog.shift()).toBeUndefined()
    expect(backlog.push(waiting('minion-b', 1), false)).toBe(true)
  })
})

describe('RequestsInHand', () => {
  it('knows which ids of each peer are in hand, until each is let go or all are cleared', () => {
    const inHand = new RequestsInHand<object>()
    const connection = {}
    const other = {}
    inHand.add(connection, 7)
    inHand.add(connection, 9)
    expect(inHand.holds(connection, 7)).toBe(true)
    expect(inHand.holds(connection, 9)).toBe(true)
    // The same id from another peer (another connection or inbox) is another request.
    expect(inHand.holds(other, 7)).toBe(false)
    inHand.delete(connection, 9)
    expect(inHand.holds(connection, 9)).toBe(false)
    expect(inHand.holds(connection, 7)).toBe(true)
    inHand.delete(connection, 7)
    expect(inHand.holds(connection, 7)).toBe(false)
    inHand.add(other, 7)
    inHand.clear()
    expect(inHand.holds(other, 7)).toBe(false)
  })
})
