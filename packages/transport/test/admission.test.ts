import { describe, expect, it } from 'vitest'
import {
  Admission,
  defaultMaxConnections,
  defaultMaxConnectionsPerAddress,
  normalizeAddress,
  openFileLimit,
  resolveServerLimits,
  type AdmittedPeer,
  type PendingHolder,
} from '@brine/transport'

class Holder implements PendingHolder {
  pendingBytes = 0
  dropped: string | undefined
  constructor(readonly pendingSince: number) {}
  drop(reason: string): void {
    this.dropped = reason
  }
}

class Peer implements AdmittedPeer {
  dropped: string | undefined
  inFrame = false
  lastProgress: number
  constructor(readonly openedAt: number) {
    this.lastProgress = openedAt
  }
  drop(reason: string): void {
    this.dropped = reason
  }
}

describe('Admission', () => {
  it('admits connections up to the per-address and total caps, naming the one reached, and counts them back out', () => {
    const admission = new Admission()
    // Peers that have greeted: never evicted, so the caps refuse.
    const enter = (address: string): string | Peer => {
      const refused = admission.admit(address, 3, 2)
      if (refused !== undefined) return refused
      const peer = new Peer(0)
      admission.track(peer, address)
      admission.greeted(peer)
      return peer
    }
    const first = enter('10.0.0.1') as Peer
    enter('10.0.0.1')
    expect(enter('10.0.0.1')).toBe('2 connections open from 10.0.0.1 (max_connections_per_address 2)')
    enter('10.0.0.2')
    expect(enter('10.0.0.3')).toBe('3 connections open (max_connections 3)')
    expect(admission.connections).toBe(3)
    admission.leave(first)
    admission.leave(first)
    expect(admission.connectionsFrom('10.0.0.1')).toBe(1)
    expect(enter('10.0.0.3')).toBeInstanceOf(Peer)
  })

  it('at a cap, evicts the oldest peer that has not greeted (over all for the total, from the address for its cap), never one that has', () => {
    const admission = new Admission()
    const enter = (address: string, openedAt: number): Peer | string => {
      const refused = admission.admit(address, 4, 3)
      if (refused !== undefined) return refused
      const peer = new Peer(openedAt)
      admission.track(peer, address)
      return peer
    }
    const spoke = enter('10.0.0.1', 0) as Peer
    admission.greeted(spoke)
    const silentA = enter('10.0.0.1', 1) as Peer
    const silentB = enter('10.0.0.1', 2) as Peer
    // 10.0.0.1 is at its cap of 3: its oldest silent peer makes room, not the one that spoke.
    const third = enter('10.0.0.1', 3) as Peer
    expect(silentA.dropped).toMatch(
      /^evicted after \d+ ms without completing its greeting, to admit a new connection at max_connections_per_address \(3\) for 10\.0\.0\.1$/,
    )
    expect(spoke.dropped).toBeUndefined()
    expect(admission.connectionsFrom('10.0.0.1')).toBe(3)
    // The total cap of 4: a newcomer from elsewhere evicts the oldest silent peer of any address.
    const other = enter('10.0.0.2', 4) as Peer
    expect(admission.connections).toBe(4)
    const newcomer = enter('10.0.0.3', 5)
    expect(newcomer).toBeInstanceOf(Peer)
    expect(silentB.dropped).toMatch(/at max_connections \(4\)$/)
    // Its close calls leave() again: a no-op, the counts stay right.
    admission.leave(silentA)
    admission.leave(silentB)
    expect(admission.connections).toBe(4)
    // Once all have greeted, a cap refuses again.
    for (const peer of [third, other, newcomer as Peer]) admission.greeted(peer)
    expect(enter('10.0.0.4', 6)).toBe('4 connections open (max_connections 4)')
    expect(spoke.dropped).toBeUndefined()
  })

  it('with none ungreeted, evicts the longest idle request-server peer that never authenticated; never a sender, an authenticated peer or a subscriber', () => {
    const admission = new Admission()
    const enter = (address: string, at: number, authenticates: boolean): Peer => {
      expect(admission.admit(address, 4, 4)).toBeUndefined()
      const peer = new Peer(at)
      admission.track(peer, address, authenticates)
      admission.greeted(peer)
      return peer
    }
    const subscriber = enter('10.0.0.1', 0, false)
    const trusted = enter('10.0.0.1', 1, true)
    admission.authenticated(trusted)
    const stale = enter('10.0.0.2', 2, true)
    const sending = enter('10.0.0.2', 3, true)
    // The oldest by progress is mid-frame: it is sending, and the next idle one goes instead.
    sending.lastProgress = 1
    sending.inFrame = true
    stale.lastProgress = 5
    expect(admission.admit('10.0.0.3', 4, 4)).toBeUndefined()
    expect(stale.dropped).toMatch(/^evicted, unauthenticated and idle for -?\d+ ms, to admit a new connection at max_connections \(4\)$/)
    admission.track(new Peer(6), '10.0.0.3', true)
    expect(admission.connections).toBe(4)
    // The newcomer has not greeted: it is the next to go; then only the sender remains evictable, and it is sending.
    expect(admission.admit('10.0.0.4', 4, 4)).toBeUndefined()
    admission.track(new Peer(7), '10.0.0.4', true)
    expect(admission.admit('10.0.0.5', 4, 4)).toBeUndefined()
    const last = new Peer(8)
    admission.track(last, '10.0.0.5', true)
    admission.greeted(last)
    admission.authenticated(last)
    expect(admission.admit('10.0.0.5', 4, 4)).toBe('4 connections open (max_connections 4)')
    for (const peer of [subscriber, trusted, sending]) expect(peer.dropped).toBeUndefined()
  })

  it('keeps incomplete frames within the budget by dropping the slowest-arriving holder first', () => {
    const admission = new Admission()
    const parked = new Holder(0) // 900 bytes over 1000 ms
    const fast = new Holder(990) // 900 bytes over 10 ms
    admission.hold(parked, 900, 2000, 1000)
    admission.hold(fast, 900, 2000, 1000)
    expect(admission.pendingBytes).toBe(1800)
    const newcomer = new Holder(1000)
    admission.hold(newcomer, 500, 2000, 1000)
    expect(parked.dropped).toMatch(/its incomplete frame \(900 bytes so far, the slowest arriving\) was given up .* max_pending_bytes \(2000\)/)
    expect(fast.dropped).toBeUndefined()
    expect(newcomer.dropped).toBeUndefined()
    expect(admission.pendingBytes).toBe(1400)
    admission.release(fast)
    admission.hold(newcomer, 0, 2000, 1000)
    expect(admission.pendingBytes).toBe(0)
  })
})

describe('server limits', () => {
  it('default below the open-file limit, a quarter of that per address', () => {
    expect(openFileLimit()).toBeGreaterThan(0)
    expect(defaultMaxConnections(1024)).toBe(896)
    expect(defaultMaxConnections(100)).toBe(36)
    expect(defaultMaxConnections(20_000)).toBe(17_500)
    expect(defaultMaxConnectionsPerAddress(896)).toBe(224)
    expect(normalizeAddress('::ffff:10.0.0.7')).toBe('10.0.0.7')
    expect(normalizeAddress('::1')).toBe('::1')
  })

  it('checks a server’s limits: the budget must hold one frame of the largest size', () => {
    expect(resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1024, hwm: 1, maxConnections: 10 })).toEqual({
      maxConnections: 10,
      maxConnectionsPerAddress: 2,
      maxPendingBytes: 268_435_456,
      idleTimeout: 30_000,
      handshakeTimeout: 30_000,
      frameTimeout: 300_000,
    })
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 2048, hwm: 1, maxPendingBytes: 1024 })).toThrow(
      new RangeError('maxPendingBytes (1024) must be at least maxFrameBytes (2048), or no frame of the largest size could ever complete'),
    )
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1, hwm: 1, maxConnections: 0 })).toThrow(RangeError)
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1, hwm: 1, idleTimeout: -1 })).toThrow(RangeError)
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1, hwm: 1, handshakeTimeout: -1 })).toThrow(/handshakeTimeout must be 0 \(none\)/)
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1, hwm: 1, frameTimeout: 2 ** 31 })).toThrow(/frameTimeout must be 0 \(none\)/)
  })
})
