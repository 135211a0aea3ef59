import { describe, expect, it } from 'vitest'
import { DEFAULT_BACKOFF } from '@brine/transport'
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
  it("puts libzmq's first attempt in the TCP transport's window and keeps the cap", () => {
    // libzmq waits interval + random [0, interval): [500, 1000) for recon_default 1000 with jitter 0.5.
    expect(zmqReconnectOptions({ ...DEFAULT_BACKOFF, initial: 1000, max: 10_000, jitter: 0.5 })).toEqual({ reconnectInterval: 500, reconnectMaxInterval: 10_000 })
    expect(zmqReconnectOptions({ ...DEFAULT_BACKOFF, initial: 1000, max: 10_000, jitter: 0 })).toEqual({ reconnectInterval: 1000, reconnectMaxInterval: 10_000 })
    expect(zmqReconnectOptions({ ...DEFAULT_BACKOFF, initial: 1, max: 1, jitter: 1 })).toEqual({ reconnectInterval: 1, reconnectMaxInterval: 1 })
  })
})
