import { describe, expect, it } from 'vitest'
import { DEFAULT_BACKOFF } from '@brine/core'
import { retryInterrupted, zmqReconnectOptions } from '../src/socket-util.js'

const interrupted = (): Error => Object.assign(new Error('Interrupted system call'), { code: 'EINTR', errno: 4 })

describe('retryInterrupted', () => {
  it('repeats a libzmq call that a signal interrupted, and returns its result', () => {
    let calls = 0
    const result = retryInterrupted(() => {
      calls++
      if (calls < 3) throw interrupted()
      return 'connected'
    })
    expect(result).toBe('connected')
    expect(calls).toBe(3)
  })

  it('throws any other error at once', () => {
    let calls = 0
    const emfile = Object.assign(new Error('Too many open file descriptors'), { code: 'EMFILE' })
    expect(() =>
      retryInterrupted(() => {
        calls++
        throw emfile
      }),
    ).toThrow(emfile)
    expect(calls).toBe(1)
  })

  it('gives up on a call interrupted every time, with the EINTR', () => {
    let calls = 0
    expect(() =>
      retryInterrupted(() => {
        calls++
        throw interrupted()
      }),
    ).toThrow(/Interrupted system call/)
    expect(calls).toBe(100)
  })
})

describe('zmqReconnectOptions', () => {
  const backoff = { ...DEFAULT_BACKOFF, initial: 1000, max: 10_000, jitter: 0.5 }

  it("draws each client's steady interval in the TCP transport's window and keeps it fixed (libzmq's random part is the same in every process)", () => {
    // A maximum equal to the interval: libzmq neither doubles nor adds its own random part.
    expect(zmqReconnectOptions(backoff, 'steady', () => 0)).toEqual({ reconnectInterval: 1000, reconnectMaxInterval: 1000 })
    expect(zmqReconnectOptions(backoff, 'steady', () => 0.999)).toEqual({ reconnectInterval: 500, reconnectMaxInterval: 500 })
    expect(zmqReconnectOptions({ ...backoff, jitter: 0 }, 'steady', () => 0.7)).toEqual({ reconnectInterval: 1000, reconnectMaxInterval: 1000 })
    expect(zmqReconnectOptions({ ...backoff, initial: 1, max: 1, jitter: 1 }, 'steady', () => 0.999)).toEqual({ reconnectInterval: 1, reconnectMaxInterval: 1 })
    // A fleet spreads: clients drawing with the process's own random source land across the window.
    const intervals = new Set(Array.from({ length: 50 }, () => zmqReconnectOptions(backoff, 'steady').reconnectInterval))
    expect(intervals.size).toBeGreaterThan(10)
    for (const interval of intervals) expect(interval).toBeGreaterThanOrEqual(500)
  })

  it('starts the growing phase from a point drawn in the window of the attempt after the steady ones, up to the cap', () => {
    expect(zmqReconnectOptions(backoff, 'growing', () => 0)).toEqual({ reconnectInterval: 2000, reconnectMaxInterval: 10_000 })
    expect(zmqReconnectOptions(backoff, 'growing', () => 0.999)).toEqual({ reconnectInterval: 1001, reconnectMaxInterval: 10_000 })
    expect(zmqReconnectOptions({ ...backoff, jitter: 0 }, 'growing', () => 0.5)).toEqual({ reconnectInterval: 2000, reconnectMaxInterval: 10_000 })
    // A cap below twice the initial delay bounds the first delay too.
    expect(zmqReconnectOptions({ ...backoff, max: 1500 }, 'growing', () => 0)).toEqual({ reconnectInterval: 1500, reconnectMaxInterval: 1500 })
  })
})
