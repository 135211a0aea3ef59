import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import { DEFAULT_BACKOFF } from '@brine/core'
import { EndpointCore, type TransportEvent } from '@brine/transport'
import type { Socket } from 'zeromq'
import { ClientLink, makesDelay, retryInterrupted, zmqReconnectOptions } from '../src/socket-util.js'

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

  it("starts the growing phase above the client's steady interval, so no delay of one schedule is one of the other", () => {
    const jittery = { ...backoff, jitter: 0.9 }
    // Drawn at the window's low end, 200 ms, under a steady interval of 700 ms: 701, whose doublings miss 700 too.
    expect(zmqReconnectOptions(jittery, 'growing', () => 1, 700)).toEqual({ reconnectInterval: 701, reconnectMaxInterval: 10_000 })
    expect(zmqReconnectOptions(backoff, 'growing', () => 0.999, 1000)).toEqual({ reconnectInterval: 1001, reconnectMaxInterval: 10_000 })
    expect(zmqReconnectOptions(backoff, 'growing', () => 0, 1000)).toEqual({ reconnectInterval: 2000, reconnectMaxInterval: 10_000 })
  })

  it("tells a schedule's delays: its first doubled up to its maximum, and the maximum", () => {
    const growing = { reconnectInterval: 60, reconnectMaxInterval: 320 }
    expect([60, 120, 240, 320].every((delay) => makesDelay(growing, delay))).toBe(true)
    expect([30, 80, 480].some((delay) => makesDelay(growing, delay))).toBe(false)
    const steady = { reconnectInterval: 30, reconnectMaxInterval: 30 }
    expect(makesDelay(steady, 30)).toBe(true)
    expect(makesDelay(steady, 60)).toBe(false)
  })
})

/** A libzmq socket as ClientLink drives it: its monitor, whose events a test emits, and what it was connected with. */
function fakeSocket(): { socket: Socket; monitor: EventEmitter; connects: Array<{ reconnectInterval: number; reconnectMaxInterval: number }> } {
  const monitor = new EventEmitter()
  const connects: Array<{ reconnectInterval: number; reconnectMaxInterval: number }> = []
  const socket = {
    events: monitor,
    closed: false,
    reconnectInterval: 0,
    reconnectMaxInterval: 0,
    connect() {
      connects.push({ reconnectInterval: socket.reconnectInterval, reconnectMaxInterval: socket.reconnectMaxInterval })
    },
    disconnect() {},
  }
  return { socket: socket as unknown as Socket, monitor, connects }
}

describe('ClientLink', () => {
  it("counts a retry its previous schedule reports late as none of the current schedule's: its phases go by what each schedule makes", () => {
    const core = new EndpointCore('zeromq', 'request client', 'tcp://127.0.0.1:1')
    const attempts: TransportEvent[] = []
    core.emit = (event) => void (event.type === 'reconnect-attempt' && attempts.push(event))
    const { socket, monitor, connects } = fakeSocket()
    const link = new ClientLink(core, 'tcp://127.0.0.1:1', { ...DEFAULT_BACKOFF, initial: 40, max: 320, jitter: 0.5, steady: 3 })
    link.connect(socket)
    const steady = connects[0]!.reconnectInterval
    const retry = (interval: number): boolean => monitor.emit('connect:retry', { address: 'tcp://127.0.0.1:1', interval })
    // Three steady retries; the fourth is one too many: the endpoint is connected again, growing.
    for (let index = 0; index < 4; index++) retry(steady)
    expect(connects).toHaveLength(2)
    const first = connects[1]!.reconnectInterval
    expect(first).toBeGreaterThan(steady)
    // The steady endpoint's next retry, reported after the change (its monitor behind, as under load), then the
    // growing endpoint's own.
    retry(steady)
    retry(first)
    retry(Math.min(first * 2, 320))
    expect(attempts.map((event) => event.type === 'reconnect-attempt' && [event.attempt, event.delay])).toEqual([
      [1, steady],
      [2, steady],
      [3, steady],
      [4, 0],
      [5, first],
      [6, Math.min(first * 2, 320)],
    ])
    expect(connects).toHaveLength(2)

    // A connection made while growing and lost: libzmq's first retry is a growing one, and the endpoint goes back to
    // the client's steady interval; a growing retry reported after that is not counted as a steady one.
    monitor.emit('connect', {})
    monitor.emit('disconnect', {})
    retry(first)
    expect(connects).toHaveLength(3)
    expect(connects[2]).toEqual({ reconnectInterval: steady, reconnectMaxInterval: steady })
    retry(first * 2)
    for (let index = 0; index < 3; index++) retry(steady)
    // Three steady retries after the change, as many as the schedule allows before growing again.
    expect(connects).toHaveLength(3)
    retry(steady)
    expect(connects).toHaveLength(4)
  })
})
