import type { BrokerOptions } from '@brine/transport'
import type { BackoffOptions } from '@brine/core'
import { ConfigError } from './errors.js'

/**
 * The one place config units become API units. Salt's config keys are in seconds (keep_jobs in
 * hours, recon_* already in milliseconds); every Brine TypeScript API takes milliseconds.
 * Converting anywhere else is a bug waiting for a factor of 1000.
 */

/** Milliseconds in a second: the factor between Salt's seconds and the API's milliseconds, written once. */
const MS_PER_SECOND = 1000

/** Seconds (a number already checked: a wire field, a module argument, an epoch time) → milliseconds. */
export function msFromSeconds(seconds: number): number {
  return seconds * MS_PER_SECOND
}

/** Milliseconds → seconds (Salt's epoch times, a reply's `timeout`, a duration shown to a user). */
export function secondsFromMs(ms: number): number {
  return ms / MS_PER_SECOND
}

/** Seconds from config → milliseconds for the API, rounded to a whole millisecond. */
export function secondsToMs(value: unknown, key: string): number {
  return Math.round(msFromSeconds(nonNegative(value, key, 'seconds')))
}

/** Hours from config (keep_jobs) → milliseconds. */
export function hoursToMs(value: unknown, key: string): number {
  return Math.round(nonNegative(value, key, 'hours') * 3_600_000)
}

function nonNegative(value: unknown, key: string, unit: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    const shown = typeof value === 'string' ? `'${value}'` : String(value)
    throw new ConfigError(`${key} must be a non-negative number of ${unit}, got ${shown}`, { key })
  }
  return value
}

/** The time-valued keys a daemon may read, in Salt's units. */
export interface TimeoutConfig {
  timeout?: number
  gather_job_timeout?: number
  return_retry_timer?: number
  return_retry_timer_max?: number
  auth_timeout?: number
  acceptance_wait_time?: number
  acceptance_wait_time_max?: number
  random_reauth_delay?: number
  syndic_wait?: number
  syndic_event_forward_timeout?: number
  master_alive_interval?: number
  master_failback_interval?: number
  publish_session?: number
  keep_jobs?: number
  token_expire?: number
  publish_ttl?: number
  request_window?: number
  clock_skew?: number
}

/** Every time-valued key, in milliseconds; a key missing from `opts` takes Salt's default. */
export interface Timeouts {
  timeoutMs: number
  gatherJobTimeoutMs: number
  returnRetryTimerMs: number
  returnRetryTimerMaxMs: number
  authTimeoutMs: number
  acceptanceWaitTimeMs: number
  /** 0 means "do not grow the acceptance wait", as in Salt. */
  acceptanceWaitTimeMaxMs: number
  /** random_reauth_delay: the spread of a re-authentication for a changed master key, and the cap of the backoff after `_auth` timeouts. */
  randomReauthDelayMs: number
  syndicWaitMs: number
  syndicEventForwardTimeoutMs: number
  /** master_alive_interval: how often a failover minion checks the master in use; 0 never (Salt's default). */
  masterAliveIntervalMs: number
  /** master_failback_interval, or master_alive_interval when it is 0 (as Salt does). */
  masterFailbackIntervalMs: number
  publishSessionMs: number
  keepJobsMs: number
  /** How long an eauth token lives. */
  tokenExpireMs: number
  /** How long a published job stays valid for minions (`publish_ttl`). */
  publishTtlMs: number
  /** ± window of a sealed minion request's timestamp around the master's clock (`request_window`). */
  requestWindowMs: number
  /** How far ahead a clock (a jid, a publish) may be before it counts as skewed (`clock_skew`). */
  clockSkewMs: number
}

export function timeoutsFromConfig(opts: TimeoutConfig): Timeouts {
  const alive = secondsToMs(opts.master_alive_interval ?? 0, 'master_alive_interval')
  const failback = secondsToMs(opts.master_failback_interval ?? 0, 'master_failback_interval')
  return {
    timeoutMs: secondsToMs(opts.timeout ?? 5, 'timeout'),
    gatherJobTimeoutMs: secondsToMs(opts.gather_job_timeout ?? 10, 'gather_job_timeout'),
    returnRetryTimerMs: secondsToMs(opts.return_retry_timer ?? 5, 'return_retry_timer'),
    returnRetryTimerMaxMs: secondsToMs(opts.return_retry_timer_max ?? 10, 'return_retry_timer_max'),
    authTimeoutMs: secondsToMs(opts.auth_timeout ?? 5, 'auth_timeout'),
    acceptanceWaitTimeMs: secondsToMs(opts.acceptance_wait_time ?? 10, 'acceptance_wait_time'),
    acceptanceWaitTimeMaxMs: secondsToMs(opts.acceptance_wait_time_max ?? 0, 'acceptance_wait_time_max'),
    randomReauthDelayMs: secondsToMs(opts.random_reauth_delay ?? 10, 'random_reauth_delay'),
    syndicWaitMs: secondsToMs(opts.syndic_wait ?? 5, 'syndic_wait'),
    syndicEventForwardTimeoutMs: secondsToMs(opts.syndic_event_forward_timeout ?? 0.5, 'syndic_event_forward_timeout'),
    masterAliveIntervalMs: alive,
    masterFailbackIntervalMs: failback === 0 ? alive : failback,
    publishSessionMs: secondsToMs(opts.publish_session ?? 86400, 'publish_session'),
    keepJobsMs: hoursToMs(opts.keep_jobs ?? 24, 'keep_jobs'),
    tokenExpireMs: secondsToMs(opts.token_expire ?? 43200, 'token_expire'),
    publishTtlMs: positiveSecondsToMs(opts.publish_ttl ?? 60, 'publish_ttl'),
    requestWindowMs: positiveSecondsToMs(opts.request_window ?? 300, 'request_window'),
    clockSkewMs: secondsToMs(opts.clock_skew ?? 300, 'clock_skew'),
  }
}

/** A window that must not be zero (a zero-length window refuses everything): at least one millisecond. */
function positiveSecondsToMs(value: unknown, key: string): number {
  const ms = secondsToMs(value, key)
  if (ms < 1) throw new ConfigError(`${key} must be more than 0 seconds, got ${String(value)}`, { key })
  return ms
}

/** The grain of a return retry delay: Salt draws whole seconds. */
const RETRY_DELAY_STEP_MS = 1000

/**
 * Salt's return retry: each retry waits a random whole number of seconds from return_retry_timer to
 * return_retry_timer_max, both included (Salt's `randint`; the max is ignored when smaller). Bounds less than a
 * second apart give one or the other. The few distinct delays also keep a process's pending returns on a few of
 * Node's timer lists (one per distinct duration) where a delay drawn to the millisecond opens one list per return:
 * a swarm of a thousand minions each waiting on its return's acknowledgement. `random` is injectable for tests.
 */
export function returnRetryDelayMs(opts: TimeoutConfig, random: () => number = Math.random): number {
  const low = secondsToMs(opts.return_retry_timer ?? 5, 'return_retry_timer')
  const high = Math.max(low, secondsToMs(opts.return_retry_timer_max ?? 10, 'return_retry_timer_max'))
  const step = Math.min(RETRY_DELAY_STEP_MS, high - low)
  if (step <= 0) return low
  const steps = Math.floor((high - low) / step)
  return low + step * Math.min(steps, Math.floor(random() * (steps + 1)))
}

/** Bytes in a MiB: a return's size is counted in MiB, to the nearest, toward its try's timeout. */
const BYTES_PER_MIB = 1_048_576

/**
 * What a return's try is given per MiB of its sealed frame, on top of its drawn delay: the master's intake of a
 * large return (reading the frame, deciphering, decoding, storing it) grows with its size, and on a loaded machine
 * takes longer than return_retry_timer's 5–10 s (docs/performance.md, "A large return sent once"). Whole seconds, so
 * the timeouts stay on a few of Node's timer lists, as the drawn delays do.
 */
export const RETURN_TRY_MS_PER_MIB = 1000

/** The most a return's try grows for its size: a try never waits more than this past its drawn delay. */
export const RETURN_TRY_GROWTH_MAX_MS = 120_000

/**
 * The timeout of one try of a sealed return of `sealedBytes`: `delayMs` (a {@link returnRetryDelayMs} draw, Salt's
 * return_retry_timer..return_retry_timer_max) plus {@link RETURN_TRY_MS_PER_MIB} for each MiB of the frame (to the
 * nearest MiB), at most {@link RETURN_TRY_GROWTH_MAX_MS} more. A return under 512 KiB gets exactly Salt's timeout. Salt has no such
 * key: a size-blind timeout made a master that is merely slow to take a 64 MB return in receive it three times,
 * then once more from the spool.
 */
export function returnTryTimeoutMs(delayMs: number, sealedBytes: number): number {
  const mib = Number.isFinite(sealedBytes) && sealedBytes > 0 ? Math.round(sealedBytes / BYTES_PER_MIB) : 0
  return delayMs + Math.min(RETURN_TRY_GROWTH_MAX_MS, mib * RETURN_TRY_MS_PER_MIB)
}

export interface ReconnectConfig {
  recon_default?: number
  recon_max?: number
  recon_randomize?: boolean
}

/** Attempts at recon_default before the waits grow, at the least (recon_max over recon_default when that is more). */
const MIN_STEADY_ATTEMPTS = 3

/**
 * recon_default / recon_max / recon_randomize (already milliseconds in Salt) as the transport's
 * BackoffOptions. Salt randomizes the first wait; Brine's backoff randomizes half of every delay
 * (jitter 0.5) when recon_randomize is on, and none when it is off.
 *
 * The waits stay at recon_default for recon_max / recon_default attempts (10 with Salt's defaults, at
 * least 3) before they double up to recon_max: a lost connection is most often a master restarting,
 * which is back within seconds, and a client still on its steady attempts finds it within one
 * recon_default of its return, where one already doubling to recon_max came back up to recon_max late.
 * A master away for longer is asked no faster than Salt's doubling asks it from then on.
 */
export function backoffFromConfig(opts: ReconnectConfig): BackoffOptions {
  const initial = milliseconds(opts.recon_default ?? 1000, 'recon_default')
  const max = Math.max(initial, milliseconds(opts.recon_max ?? 10000, 'recon_max'))
  const steady = Math.max(MIN_STEADY_ATTEMPTS, Math.floor(max / initial))
  return { initial, max, factor: 2, jitter: (opts.recon_randomize ?? true) ? 0.5 : 0, steady }
}

function milliseconds(value: unknown, key: string): number {
  return Math.round(nonNegative(value, key, 'milliseconds'))
}

/** The `nats_*` keys, as the config spells them. */
export interface BrokerConfig {
  nats_servers?: readonly string[]
  nats_subject_prefix?: string
  nats_user?: string | null
  nats_password?: string | null
  nats_token?: string | null
  nats_nkey_seed_file?: string | null
  nats_creds_file?: string | null
  nats_tls_ca?: string | null
  nats_tls_cert?: string | null
  nats_tls_key?: string | null
}

/** The `nats_*` keys as the BrokerOptions a broker transport connects with (the socket transports ignore them). */
export function brokerFromConfig(opts: BrokerConfig): BrokerOptions {
  const set = <K extends keyof BrokerOptions>(key: K, value: BrokerOptions[K] | null | undefined): Partial<BrokerOptions> =>
    value === null || value === undefined ? {} : ({ [key]: value } as Partial<BrokerOptions>)
  return {
    ...set('servers', opts.nats_servers),
    ...set('subjectPrefix', opts.nats_subject_prefix),
    ...set('user', opts.nats_user),
    ...set('password', opts.nats_password),
    ...set('token', opts.nats_token),
    ...set('nkeySeedFile', opts.nats_nkey_seed_file),
    ...set('credsFile', opts.nats_creds_file),
    ...set('tlsCa', opts.nats_tls_ca),
    ...set('tlsCert', opts.nats_tls_cert),
    ...set('tlsKey', opts.nats_tls_key),
  }
}

/** The endpoint options every transport endpoint takes from config (pub_hwm, max_frame_bytes, and the broker's nats_* keys). */
export function endpointLimitsFromConfig(opts: { pub_hwm?: number; max_frame_bytes?: number } & BrokerConfig): {
  hwm: number
  maxFrameBytes: number
  broker: BrokerOptions
} {
  return { hwm: opts.pub_hwm ?? 1000, maxFrameBytes: opts.max_frame_bytes ?? 67108864, broker: brokerFromConfig(opts) }
}

/** The keys behind a master's bounds before work, in config units. */
export interface ServerLimitsConfig {
  max_frame_entries?: number
  max_frame_depth?: number
  max_pending_bytes?: number
  max_frame_bytes?: number
  peer_idle_timeout?: number
  handshake_timeout?: number
  frame_timeout?: number
  max_connections?: number
  max_connections_per_address?: number
  zmq_backlog?: number
}

/** The server options those keys give (the transport's ServerOptions and decode bounds), in the API's units. */
export interface ServerLimits {
  maxFrameEntries: number
  maxFrameDepth: number
  maxPendingBytes: number
  /** ms; 0 for none. */
  idleTimeout: number
  /** ms from connect to a completed greeting; 0 for none. */
  handshakeTimeout: number
  /** ms from a frame's first byte to its last; 0 for none. */
  frameTimeout: number
  /** Absent: the transport derives it from the open-file limit. */
  maxConnections?: number
  maxConnectionsPerAddress?: number
  /** The listen backlog of every socket server (`zmq_backlog`). */
  listenBacklog: number
}

function positiveCount(value: unknown, key: string, allowZero: boolean): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1)) {
    throw new ConfigError(`${key} must be ${allowZero ? '0 (derived from the open-file limit) or ' : ''}a positive integer, got ${String(value)}`, { key })
  }
  return value
}

/** A server deadline in seconds → ms (0 for none), within setTimeout's range. */
function deadlineMs(seconds: number, key: string): number {
  const ms = secondsToMs(seconds, key)
  if (ms > 2 ** 31 - 1) throw new ConfigError(`${key} must be at most ${Math.floor(secondsFromMs(2 ** 31 - 1))} seconds, got ${seconds}`, { key })
  return ms
}

/**
 * A master server's bounds before work from config: `max_frame_entries`, `max_frame_depth`,
 * `max_pending_bytes` (raised to `max_frame_bytes` when below it), `peer_idle_timeout`, `handshake_timeout` and
 * `frame_timeout` (seconds → ms; 0 for none),
 * `max_connections` and `max_connections_per_address` (0: derived from the open-file limit), and `zmq_backlog`, the
 * listen backlog of every socket server (ZeroMQ's and TCP's alike: it is the kernel's queue, not libzmq's).
 * A ConfigError names a key whose value cannot work.
 */
export function serverLimitsFromConfig(opts: ServerLimitsConfig): ServerLimits {
  // Never below one frame of the largest size, which could otherwise never complete: raised to max_frame_bytes.
  const maxPendingBytes = Math.max(positiveCount(opts.max_pending_bytes ?? 268435456, 'max_pending_bytes', false), opts.max_frame_bytes ?? 67108864)
  const maxConnections = positiveCount(opts.max_connections ?? 0, 'max_connections', true)
  const maxConnectionsPerAddress = positiveCount(opts.max_connections_per_address ?? 0, 'max_connections_per_address', true)
  const idleTimeout = deadlineMs(opts.peer_idle_timeout ?? 30, 'peer_idle_timeout')
  const handshakeTimeout = deadlineMs(opts.handshake_timeout ?? 30, 'handshake_timeout')
  const frameTimeout = deadlineMs(opts.frame_timeout ?? 300, 'frame_timeout')
  return {
    maxFrameEntries: positiveCount(opts.max_frame_entries ?? 262144, 'max_frame_entries', false),
    maxFrameDepth: positiveCount(opts.max_frame_depth ?? 64, 'max_frame_depth', false),
    maxPendingBytes,
    idleTimeout,
    handshakeTimeout,
    frameTimeout,
    listenBacklog: positiveCount(opts.zmq_backlog ?? 1000, 'zmq_backlog', false),
    ...(maxConnections === 0 ? {} : { maxConnections }),
    ...(maxConnectionsPerAddress === 0 ? {} : { maxConnectionsPerAddress }),
  }
}

/** The interval keys of a schedule entry, in Salt's units, and how many seconds one of each is. */
const SCHEDULE_UNITS = { seconds: 1, minutes: 60, hours: 3600, days: 86400 } as const

/**
 * A schedule entry's interval (Salt adds `seconds`, `minutes`, `hours` and `days` together) in ms; undefined when
 * none is set. Each value is a non-negative number (ConfigError naming the key otherwise).
 */
export function scheduleIntervalMs(entry: Record<string, unknown>, job: string): number | undefined {
  let total: number | undefined
  for (const [key, seconds] of Object.entries(SCHEDULE_UNITS)) {
    const value = entry[key]
    if (value === undefined || value === null) continue
    total = (total ?? 0) + secondsToMs(value, `schedule ${job}: ${key}`) * seconds
  }
  return total
}

/** The file server's sizes from config, in bytes. */
export interface FileServerLimits {
  /** `file_buffer_size`: bytes per chunk on the wire. */
  bufferSize: number
  /** `file_recv_max_size` (Salt's MiB): the largest file cp.push may send. */
  recvMaxBytes: number
}

/** Room a chunk leaves in its frame for the sealed envelope and the rest of the load. */
const CHUNK_FRAME_RESERVE = 16_384

/**
 * `file_buffer_size` (bytes) and `file_recv_max_size` (MiB → bytes), with Salt's defaults. A chunk never
 * outgrows this daemon's `max_frame_bytes`: the buffer is cut to fit one frame with its envelope.
 */
export function fileServerLimitsFromConfig(opts: { file_buffer_size?: number; file_recv_max_size?: number; max_frame_bytes?: number }): FileServerLimits {
  const configured = opts.file_buffer_size ?? 262144
  if (!Number.isSafeInteger(configured) || configured < 1)
    throw new ConfigError(`file_buffer_size must be a positive integer of bytes, got ${String(configured)}`, { key: 'file_buffer_size' })
  const frame = opts.max_frame_bytes ?? 67108864
  const bufferSize = Math.max(1, Math.min(configured, frame - CHUNK_FRAME_RESERVE))
  const recvMaxBytes = Math.floor(nonNegative(opts.file_recv_max_size ?? 100, 'file_recv_max_size', 'MiB') * 1024 * 1024)
  return { bufferSize, recvMaxBytes }
}

/** The keys behind the login limits and the password-hashing threads, in config units. */
export interface EauthLimitsConfig {
  eauth_rate_limit_user?: number
  eauth_rate_limit_address?: number
  eauth_rate_limit_window?: number
  eauth_hash_threads?: number
  eauth_hash_backlog?: number
}

/** The limits of a login throttle (`LoginThrottle` in `@brine/common`), in the API's units (eauthLimitsFromConfig makes them from config). */
export interface LoginLimits {
  /** Failed logins one user name may have per window; 0 for no limit. */
  perUser: number
  /** Failed logins one client address may have per window; 0 for no limit. */
  perAddress: number
  windowMs: number
}

/** The login limits (LoginThrottle) and the hashing pool's size and backlog, in the API's units. */
export interface EauthLimits extends LoginLimits {
  /** Threads checking password hashes; 0 checks them on the main thread. */
  hashThreads: number
  /** Logins waiting for a hashing thread, at most; beyond it a login is refused as busy. */
  hashBacklog: number
}

/**
 * `eauth_rate_limit_user` and `eauth_rate_limit_address` (failed logins per window; 0 for none),
 * `eauth_rate_limit_window` (seconds → ms), `eauth_hash_threads`, `eauth_hash_backlog`. A ConfigError
 * names a key whose value cannot work.
 */
export function eauthLimitsFromConfig(opts: EauthLimitsConfig): EauthLimits {
  const windowMs = secondsToMs(opts.eauth_rate_limit_window ?? 60, 'eauth_rate_limit_window')
  if (windowMs <= 0)
    throw new ConfigError(`eauth_rate_limit_window must be more than 0 seconds, got ${opts.eauth_rate_limit_window}`, { key: 'eauth_rate_limit_window' })
  return {
    perUser: positiveCount(opts.eauth_rate_limit_user ?? 10, 'eauth_rate_limit_user', true),
    perAddress: positiveCount(opts.eauth_rate_limit_address ?? 30, 'eauth_rate_limit_address', true),
    windowMs,
    hashThreads: positiveCount(opts.eauth_hash_threads ?? 1, 'eauth_hash_threads', true),
    hashBacklog: positiveCount(opts.eauth_hash_backlog ?? 64, 'eauth_hash_backlog', true),
  }
}
