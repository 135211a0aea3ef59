import { describe, expect, it } from 'vitest'
import { Admission, defaultMaxConnections, defaultMaxConnectionsPerAddress, normalizeAddress, openFileLimit, resolveServerLimits, type PendingHolder } from '@brine/transport'

class Holder implements PendingHolder {
  pendingBytes = 0
  dropped: string | undefined
  constructor(readonly pendingSince: number) {}
  drop(reason: string): void {
    this.dropped = reason
  }
}

describe('Admission', () => {
  it('admits connections up to the per-address and total caps, naming the one reached, and counts them back out', () => {
    const admission = new Admission()
    expect(admission.admit('10.0.0.1', 3, 2)).toBeUndefined()
    expect(admission.admit('10.0.0.1', 3, 2)).toBeUndefined()
    expect(admission.admit('10.0.0.1', 3, 2)).toBe('2 connections open from 10.0.0.1 (max_connections_per_address 2)')
    expect(admission.admit('10.0.0.2', 3, 2)).toBeUndefined()
    expect(admission.admit('10.0.0.3', 3, 2)).toBe('3 connections open (max_connections 3)')
    expect(admission.connections).toBe(3)
    admission.leave('10.0.0.1')
    expect(admission.connectionsFrom('10.0.0.1')).toBe(1)
    expect(admission.admit('10.0.0.3', 3, 2)).toBeUndefined()
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
    })
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 2048, hwm: 1, maxPendingBytes: 1024 })).toThrow(
      new RangeError('maxPendingBytes (1024) must be at least maxFrameBytes (2048), or no frame of the largest size could ever complete'),
    )
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1, hwm: 1, maxConnections: 0 })).toThrow(RangeError)
    expect(() => resolveServerLimits({ host: 'h', port: 1, maxFrameBytes: 1, hwm: 1, idleTimeout: -1 })).toThrow(RangeError)
  })
})
