import { describe, expect, it } from 'vitest'
import { RequestBacklog, type WaitingRequest } from '../src/runtime/request-backlog.js'

const waiting = (peer: string, id: number): WaitingRequest<string> => ({ id, request: { id }, peer, peerName: peer, address: undefined })

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

  it('knows which ids of each peer wait, until they are served or cleared', () => {
    const backlog = new RequestBacklog<object>(8)
    const connection = {}
    const other = {}
    backlog.push({ ...waiting('x', 7), peer: connection }, false)
    backlog.push({ ...waiting('x', 9), peer: connection }, true)
    expect(backlog.holds(connection, 7)).toBe(true)
    expect(backlog.holds(connection, 9)).toBe(true)
    // The same id from another peer (another connection or inbox) is another request.
    expect(backlog.holds(other, 7)).toBe(false)
    expect(backlog.shift()?.id).toBe(9)
    expect(backlog.holds(connection, 9)).toBe(false)
    expect(backlog.holds(connection, 7)).toBe(true)
    backlog.clear()
    expect(backlog.holds(connection, 7)).toBe(false)
    expect(backlog.size).toBe(0)
    expect(backlog.shift()).toBeUndefined()
  })
})
