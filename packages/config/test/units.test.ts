import { describe, expect, it } from 'vitest'
import { backoffDelay } from '@brine/core'
import { ConfigError } from '../src/errors.js'
import {
  backoffFromConfig,
  endpointLimitsFromConfig,
  fileServerLimitsFromConfig,
  hoursToMs,
  msFromSeconds,
  returnRetryDelayMs,
  returnTryTimeoutMs,
  secondsFromMs,
  secondsToMs,
  serverLimitsFromConfig,
  timeoutsFromConfig,
} from '../src/units.js'

describe('msFromSeconds and secondsFromMs', () => {
  it('convert by the one factor, keeping fractions, and undo each other', () => {
    expect(msFromSeconds(1.5)).toBe(1500)
    expect(secondsFromMs(250)).toBe(0.25)
    expect(secondsFromMs(msFromSeconds(86_400))).toBe(86_400)
  })
})

describe('secondsToMs', () => {
  it.each([
    [5, 5000],
    [0.5, 500],
    [0, 0],
    [0.0004, 0],
    [1.0006, 1001],
  ])('%s s → %s ms', (seconds, ms) => {
    expect(secondsToMs(seconds, 'timeout')).toBe(ms)
  })

  it.each([[-1], [Number.NaN], [Number.POSITIVE_INFINITY], ['5'], [null]])('refuses %j, naming the key', (value) => {
    expect(() => secondsToMs(value, 'gather_job_timeout')).toThrow(ConfigError)
    expect(() => secondsToMs(value, 'gather_job_timeout')).toThrow(/^gather_job_timeout must be a non-negative number of seconds, got /)
  })

  it('converts keep_jobs hours', () => {
    expect(hoursToMs(24, 'keep_jobs')).toBe(86_400_000)
  })
})

describe('timeoutsFromConfig', () => {
  it('converts every time key, with Salt defaults for the missing ones', () => {
    expect(timeoutsFromConfig({ timeout: 30, syndic_event_forward_timeout: 0.25, keep_jobs: 1 })).toEqual({
      timeoutMs: 30_000,
      gatherJobTimeoutMs: 10_000,
      returnRetryTimerMs: 5000,
      returnRetryTimerMaxMs: 10_000,
      authTimeoutMs: 5000,
      acceptanceWaitTimeMs: 10_000,
      acceptanceWaitTimeMaxMs: 0,
      randomReauthDelayMs: 10_000,
      syndicWaitMs: 5000,
      syndicEventForwardTimeoutMs: 250,
      masterAliveIntervalMs: 0,
      masterFailbackIntervalMs: 0,
      publishSessionMs: 86_400_000,
      keepJobsMs: 3_600_000,
      tokenExpireMs: 43_200_000,
      publishTtlMs: 60_000,
      requestWindowMs: 300_000,
      clockSkewMs: 300_000,
    })
    expect(timeoutsFromConfig({ publish_ttl: 5, request_window: 0.5, clock_skew: 0 })).toMatchObject({
      publishTtlMs: 5000,
      requestWindowMs: 500,
      clockSkewMs: 0,
    })
    // A zero-length window would refuse every publish or request.
    expect(() => timeoutsFromConfig({ request_window: 0 })).toThrow('request_window must be more than 0 seconds, got 0')
    expect(() => timeoutsFromConfig({ publish_ttl: 0 })).toThrow('publish_ttl must be more than 0 seconds, got 0')
  })

  it('checks a failover master every master_alive_interval, and fails back every master_failback_interval or, at 0, as often', () => {
    expect(timeoutsFromConfig({ master_alive_interval: 30 })).toMatchObject({ masterAliveIntervalMs: 30_000, masterFailbackIntervalMs: 30_000 })
    expect(timeoutsFromConfig({ master_alive_interval: 30, master_failback_interval: 0.5 })).toMatchObject({
      masterAliveIntervalMs: 30_000,
      masterFailbackIntervalMs: 500,
    })
    expect(() => timeoutsFromConfig({ master_alive_interval: -1 })).toThrow('master_alive_interval must be a non-negative number of seconds, got -1')
  })

  it('picks the return retry delay between return_retry_timer and its max', () => {
    expect(returnRetryDelayMs({ return_retry_timer: 2, return_retry_timer_max: 4 }, () => 0)).toBe(2000)
    expect(returnRetryDelayMs({ return_retry_timer: 2, return_retry_timer_max: 4 }, () => 0.5)).toBe(3000)
    expect(returnRetryDelayMs({ return_retry_timer: 5, return_retry_timer_max: 1 }, () => 0.9)).toBe(5000)
  })

  it("draws whole seconds from return_retry_timer to its max, both included, as Salt's randint does", () => {
    const drawn = new Set<number>()
    for (let draw = 0; draw < 1000; draw++) drawn.add(returnRetryDelayMs({ return_retry_timer: 5, return_retry_timer_max: 10 }, () => draw / 1000))
    expect([...drawn].sort((a, b) => a - b)).toEqual([5000, 6000, 7000, 8000, 9000, 10_000])
    expect(returnRetryDelayMs({ return_retry_timer: 5, return_retry_timer_max: 10 }, () => 0.999_999)).toBe(10_000)
    expect(returnRetryDelayMs({ return_retry_timer: 2.5, return_retry_timer_max: 4 }, () => 0.9)).toBe(3500)
    expect(returnRetryDelayMs({}, () => 0.999_999)).toBe(10_000)
  })

  it('gives one bound or the other when they are less than a second apart', () => {
    expect(returnRetryDelayMs({ return_retry_timer: 0.2, return_retry_timer_max: 0.5 }, () => 0.3)).toBe(200)
    expect(returnRetryDelayMs({ return_retry_timer: 0.2, return_retry_timer_max: 0.5 }, () => 0.7)).toBe(500)
    expect(returnRetryDelayMs({ return_retry_timer: 0.2, return_retry_timer_max: 0.2 }, () => 0.7)).toBe(200)
  })
})

describe('returnTryTimeoutMs', () => {
  const MIB = 1_048_576

  it("gives a return under 512 KiB exactly its drawn delay (Salt's timeout)", () => {
    expect(returnTryTimeoutMs(5000, 0)).toBe(5000)
    expect(returnTryTimeoutMs(5000, 2048)).toBe(5000)
    expect(returnTryTimeoutMs(7000, MIB / 2 - 1)).toBe(7000)
  })

  it('adds a second per MiB of the sealed frame, to the nearest MiB', () => {
    expect(returnTryTimeoutMs(5000, MIB / 2)).toBe(6000)
    expect(returnTryTimeoutMs(5000, MIB)).toBe(6000)
    expect(returnTryTimeoutMs(5000, 1.5 * MIB - 1)).toBe(6000)
    expect(returnTryTimeoutMs(5000, 1.5 * MIB)).toBe(7000)
    expect(returnTryTimeoutMs(300, 8 * MIB + 17)).toBe(8300)
    // A 64 MiB frame (the default max_frame_bytes) gets a minute more than its drawn delay.
    expect(returnTryTimeoutMs(10_000, 64 * MIB)).toBe(74_000)
  })

  it('grows by two minutes at most, however large the frame', () => {
    expect(returnTryTimeoutMs(5000, 120 * MIB)).toBe(125_000)
    expect(returnTryTimeoutMs(5000, 121 * MIB)).toBe(125_000)
    expect(returnTryTimeoutMs(5000, 1024 * MIB)).toBe(125_000)
  })

  it('takes a size that is not a count of bytes as none', () => {
    expect(returnTryTimeoutMs(5000, -1)).toBe(5000)
    expect(returnTryTimeoutMs(5000, Number.NaN)).toBe(5000)
    expect(returnTryTimeoutMs(5000, Number.POSITIVE_INFINITY)).toBe(5000)
  })
})

describe('backoffFromConfig', () => {
  it('maps recon_* (already ms) onto the transport backoff', () => {
    expect(backoffFromConfig({ recon_default: 1000, recon_max: 10000, recon_randomize: true })).toEqual({
      initial: 1000,
      max: 10000,
      factor: 2,
      jitter: 0.5,
      steady: 10,
    })
    // recon_max's worth of attempts at recon_default (a restarting master is back within it), then doubling up to recon_max.
    const fixed = backoffFromConfig({ recon_default: 200, recon_max: 1000, recon_randomize: false })
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((attempt) => backoffDelay(attempt, fixed, () => 0))).toEqual([200, 200, 200, 200, 200, 400, 800, 1000])
    // At least three steady attempts when recon_max is close to recon_default.
    const close = backoffFromConfig({ recon_default: 400, recon_max: 1000, recon_randomize: false })
    expect([1, 2, 3, 4, 5].map((attempt) => backoffDelay(attempt, close, () => 0))).toEqual([400, 400, 400, 800, 1000])
  })

  it('never lets max fall below initial', () => {
    expect(backoffFromConfig({ recon_default: 5000, recon_max: 100 }).max).toBe(5000)
  })

  it('takes endpoint limits from pub_hwm and max_frame_bytes', () => {
    expect(endpointLimitsFromConfig({ pub_hwm: 10, max_frame_bytes: 1024 })).toEqual({ hwm: 10, maxFrameBytes: 1024, broker: {} })
  })
})

describe('serverLimitsFromConfig', () => {
  it('gives the master servers their bounds before work, seconds turned into ms, 0 connections left to the open-file limit', () => {
    expect(serverLimitsFromConfig({})).toEqual({
      maxFrameEntries: 262_144,
      maxFrameDepth: 64,
      maxPendingBytes: 268_435_456,
      idleTimeout: 30_000,
      handshakeTimeout: 30_000,
      frameTimeout: 300_000,
      listenBacklog: 1000,
    })
    expect(
      serverLimitsFromConfig({
        max_frame_entries: 10,
        max_frame_depth: 3,
        max_pending_bytes: 2048,
        max_frame_bytes: 1024,
        peer_idle_timeout: 0.5,
        handshake_timeout: 2,
        frame_timeout: 0,
        max_connections: 900,
        max_connections_per_address: 50,
        zmq_backlog: 4096,
      }),
    ).toEqual({
      maxFrameEntries: 10,
      maxFrameDepth: 3,
      maxPendingBytes: 2048,
      idleTimeout: 500,
      handshakeTimeout: 2000,
      frameTimeout: 0,
      listenBacklog: 4096,
      maxConnections: 900,
      maxConnectionsPerAddress: 50,
    })
  })

  it('raises max_pending_bytes to max_frame_bytes, so a frame of the largest size can always complete', () => {
    expect(serverLimitsFromConfig({ max_pending_bytes: 1000, max_frame_bytes: 2000 }).maxPendingBytes).toBe(2000)
    expect(serverLimitsFromConfig({ max_frame_bytes: 512 * 1024 * 1024 }).maxPendingBytes).toBe(512 * 1024 * 1024)
  })

  it('refuses values that cannot work, naming the key', () => {
    expect(() => serverLimitsFromConfig({ max_frame_entries: 0 })).toThrow(
      new ConfigError('max_frame_entries must be a positive integer, got 0', { key: 'max_frame_entries' }),
    )
    expect(() => serverLimitsFromConfig({ max_connections: -1 })).toThrow(
      /max_connections must be 0 \(derived from the open-file limit\) or a positive integer, got -1/,
    )
    expect(() => serverLimitsFromConfig({ zmq_backlog: 0 })).toThrow(new ConfigError('zmq_backlog must be a positive integer, got 0', { key: 'zmq_backlog' }))
    expect(() => serverLimitsFromConfig({ peer_idle_timeout: -1 })).toThrow(/peer_idle_timeout must be a non-negative number of seconds/)
    expect(() => serverLimitsFromConfig({ peer_idle_timeout: 10_000_000 })).toThrow(/peer_idle_timeout must be at most 2147483 seconds/)
    expect(() => serverLimitsFromConfig({ handshake_timeout: -1 })).toThrow(/handshake_timeout must be a non-negative number of seconds/)
    expect(() => serverLimitsFromConfig({ frame_timeout: 10_000_000 })).toThrow(/frame_timeout must be at most 2147483 seconds/)
  })
})

describe('fileServerLimitsFromConfig', () => {
  it("takes Salt's defaults, file_recv_max_size in MiB, and cuts a chunk to fit max_frame_bytes", () => {
    expect(fileServerLimitsFromConfig({})).toEqual({ bufferSize: 262144, recvMaxBytes: 100 * 1024 * 1024 })
    expect(fileServerLimitsFromConfig({ file_buffer_size: 4096, file_recv_max_size: 0.5 })).toEqual({ bufferSize: 4096, recvMaxBytes: 524288 })
    expect(fileServerLimitsFromConfig({ file_buffer_size: 1_048_576, max_frame_bytes: 65_536 }).bufferSize).toBe(65_536 - 16_384)
    expect(() => fileServerLimitsFromConfig({ file_recv_max_size: -1 })).toThrow(ConfigError)
    expect(() => fileServerLimitsFromConfig({ file_buffer_size: 0 })).toThrow(/file_buffer_size/)
  })
})
