import { createHash } from 'node:crypto'
import type { EndpointCore } from '@brine/transport'
import type { BackoffOptions } from '@brine/core'
import type { Socket } from 'zeromq'

/** The topic every subscriber takes and every broadcast carries. */
export const BROADCAST_TOPIC = 'broadcast'

/**
 * The topic of a targeted publish: the hex SHA-1 of the minion id (Salt's zmq_filtering).
 * Fixed length, so one id's topic is never a prefix of another's, and never of `broadcast`.
 */
export function topicForId(id: string): string {
  return createHash('sha1').update(id).digest('hex')
}

/** `tcp://host:port`, with IPv6 hosts in brackets; `port` may be `*` for an ephemeral bind. */
export function formatEndpoint(host: string, port: number | '*'): string {
  return `tcp://${isIPv6(host) ? `[${host}]` : host}:${port}`
}

/** An endpoint's libzmq address: `ipc://path` for a unix socket, else `tcp://host:port`. */
export function endpointOf(options: { host: string; port: number; path?: string }): string {
  return options.path === undefined ? formatEndpoint(options.host, options.port) : `ipc://${options.path}`
}

export function isIPv6(host: string): boolean {
  return host.includes(':')
}

/**
 * libzmq's reconnect options for one phase of a backoff. libzmq 4.3.5 offers two schedules, fixed
 * when an endpoint is connected: with `reconnectMaxInterval` 0 every attempt waits
 * `reconnectInterval` plus a random part of up to one interval; with a larger maximum it doubles
 * from `reconnectInterval` with no random part at all, so a fleet started together retries in step.
 * Brine's backoff (steady attempts at the initial delay, then growth; TCP's `backoffDelay`) uses the
 * second only, with delays drawn here: `steady` is a fixed interval (a maximum equal to the interval
 * stops the doubling) drawn once per client in TCP's window for an attempt, [initial × (1 − jitter),
 * initial], and `growing` doubles from a first delay drawn once in TCP's window for the attempt after
 * the steady ones ([2 × initial × (1 − jitter), 2 × initial]), so each client keeps its own point, and
 * above the client's `steadyInterval` (when given), so a retry's delay tells which schedule made it.
 * libzmq's own random part is not used: it is the same in every process. Its growth factor is always 2.
 */
export interface ReconnectOptions {
  reconnectInterval: number
  reconnectMaxInterval: number
}

export type ReconnectPhase = 'steady' | 'growing'

export function zmqReconnectOptions(
  backoff: Required<BackoffOptions>,
  phase: ReconnectPhase,
  random: () => number = Math.random,
  steadyInterval = 0,
): ReconnectOptions {
  const jitter = Math.min(1, Math.max(0, backoff.jitter))
  const initial = Math.max(1, Math.round(backoff.initial))
  if (phase === 'steady') {
    // Drawn here, not by libzmq: its random part comes from an unseeded rand(), the same in every process (the
    // first wait of a 500 ms interval is 883 ms everywhere), so a fleet retried in step. A maximum equal to the
    // interval keeps libzmq's schedule fixed at it.
    const interval = Math.max(1, Math.round(initial * (1 - jitter * random())))
    return { reconnectInterval: interval, reconnectMaxInterval: interval }
  }
  const base = Math.min(Math.max(initial, backoff.max), initial * 2)
  // Above the client's steady interval, so that every delay of one schedule differs from every delay of the other.
  const first = Math.max(1, Math.round(base * (1 - jitter * random())), steadyInterval + 1)
  return { reconnectInterval: first, reconnectMaxInterval: Math.max(first, backoff.max) }
}

/**
 * Whether `schedule` makes a retry `delay` ms after a failed attempt: its first delay doubled up to its maximum
 * (libzmq's growth), or the maximum itself.
 */
export function makesDelay(schedule: ReconnectOptions, delay: number): boolean {
  for (let made = Math.max(1, schedule.reconnectInterval); made < schedule.reconnectMaxInterval; made *= 2) if (made === delay) return true
  return delay === schedule.reconnectMaxInterval
}

/**
 * libzmq's ZMQ_MAXMSGSIZE for a client socket: a message larger than this is refused as its header
 * arrives (libzmq then drops the connection and reconnects), so a server — or anything at its
 * address — declaring a huge message costs nothing. Between `maxFrameBytes` and this the message is
 * received and dropped with a `frame-drop`, as on TCP; libzmq cannot say why it dropped a
 * connection, so the margin keeps every ordinary over-limit message visible.
 */
export function clientMaxMessageSize(maxFrameBytes: number): number {
  return Math.min(Number.MAX_SAFE_INTEGER, maxFrameBytes * 2 + 1024 * 1024)
}

/** Attempts of a call that keeps being interrupted before its EINTR is thrown. */
const EINTR_ATTEMPTS = 100

/**
 * Runs a synchronous libzmq call (connect, subscribe), repeating it while it fails with EINTR:
 * a signal landing mid-call (SIGCHLD of a command a job ran, a profiler's SIGPROF) interrupts it
 * before it does anything, so repeating is safe. zeromq.js retries bind itself, not these.
 */
export function retryInterrupted<T>(call: () => T): T {
  for (let attempt = 1; ; attempt++) {
    try {
      return call()
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code !== 'EINTR' || attempt >= EINTR_ATTEMPTS) throw error
    }
  }
}

/** A socket's monitor: made on first use by zmq_socket_monitor, which a signal can interrupt like connect. */
export function monitorOf(socket: Socket): Socket['events'] {
  return retryInterrupted(() => socket.events)
}

/** Closes a client socket at once (linger 0): messages still queued in libzmq are dropped, as close() promises. */
export function closeSocket(socket: Socket): void {
  if (socket.closed) return
  socket.linger = 0
  socket.close()
}

/**
 * Connects a client socket and maps its monitor events onto Brine's: `connect` → peer-connect
 * (every connect after the first counts as a reconnect), `disconnect` → peer-disconnect,
 * `connect:retry` → reconnect-attempt. Shared by the publish and request clients.
 *
 * It also runs the backoff's two phases (see zmqReconnectOptions): libzmq fixes an endpoint's
 * schedule when it is connected, so moving to the other phase means connecting the endpoint again,
 * which makes one attempt at once (reported with delay 0). That happens only while no connection
 * is up — when the steady attempts have all failed, and when a connection made in the growing phase
 * is lost (at libzmq's first retry, whose delay is the growing one) — and drops the requests libzmq
 * still queued for the endpoint; their tries and timeouts cover them, as for any request lost with
 * a connection. A server back within the steady attempts finds the queue intact.
 */
export class ClientLink {
  connected = false
  private everConnected = false
  /** Retries since the last connect. */
  private attempt = 0
  private phase: ReconnectPhase = 'steady'
  /** Retries since the steady phase began. */
  private steadyRetries = 0
  /** The steady schedule, drawn once for this client; the growing one starts above it. */
  private readonly steady: ReconnectOptions
  /** The schedule the endpoint was last connected with. */
  private schedule: ReconnectOptions
  private socket: Socket | undefined

  constructor(
    private readonly core: EndpointCore,
    private readonly address: string,
    private readonly backoff: Required<BackoffOptions>,
  ) {
    this.steady = zmqReconnectOptions(backoff, 'steady')
    this.schedule = this.steady
  }

  /** Watches the socket and connects it in the steady phase; connecting goes on in the background. */
  connect(socket: Socket): void {
    this.socket = socket
    this.watch(socket)
    this.connectIn('steady', socket)
  }

  private watch(socket: Socket): void {
    const events = monitorOf(socket)
    events.on('connect', () => {
      if (this.core.isClosed) return
      if (this.everConnected) this.core.counters.reconnects++
      this.everConnected = true
      this.connected = true
      this.attempt = 0
      this.steadyRetries = 0
      this.core.emit({ type: 'peer-connect', peer: this.address })
    })
    events.on('disconnect', () => {
      if (this.core.isClosed) return
      this.connected = false
      this.core.emit({ type: 'peer-disconnect', peer: this.address, reason: 'connection lost' })
    })
    events.on('connect:retry', (event) => {
      if (this.core.isClosed) return
      // A retry of the schedule before the last change, reported late (libzmq's monitor is read in turn with
      // everything else, behind by more than a steady interval under load): the endpoint it retried is gone, and
      // its delay will not be waited. Not an attempt of this schedule, nor counted towards its change.
      if (!makesDelay(this.schedule, event.interval)) return
      this.attempt++
      const next = this.phase === 'steady' ? this.afterSteadyRetry() : this.attempt === 1 ? 'steady' : undefined
      this.core.emit({ type: 'reconnect-attempt', address: this.address, attempt: this.attempt, delay: next === undefined ? event.interval : 0 })
      if (next !== undefined) this.reconnectIn(next)
    })
  }

  /** The phase to move to once this steady retry is counted: growing when it is one too many. */
  private afterSteadyRetry(): ReconnectPhase | undefined {
    this.steadyRetries++
    return this.steadyRetries > Math.max(1, this.backoff.steady) ? 'growing' : undefined
  }

  private reconnectIn(phase: ReconnectPhase): void {
    const socket = this.socket
    if (socket === undefined || socket.closed || this.core.isClosed) return
    try {
      retryInterrupted(() => socket.disconnect(this.address))
      this.connectIn(phase, socket)
    } catch (error) {
      this.core.logger.warning(`${this.core.what} ${this.address}: could not reconnect for the ${phase} phase of its backoff: ${(error as Error).message}`)
    }
  }

  private connectIn(phase: ReconnectPhase, socket: Socket): void {
    this.phase = phase
    this.steadyRetries = 0
    this.schedule = phase === 'steady' ? this.steady : zmqReconnectOptions(this.backoff, phase, Math.random, this.steady.reconnectInterval)
    socket.reconnectInterval = this.schedule.reconnectInterval
    socket.reconnectMaxInterval = this.schedule.reconnectMaxInterval
    retryInterrupted(() => socket.connect(this.address))
  }
}

/** Total bytes of a multipart message, for frame-drop events. */
export function messageSize(frames: readonly Uint8Array[]): number {
  let size = 0
  for (const frame of frames) size += frame.length
  return size
}

/**
 * Receives until the endpoint or the socket closes (a pending receive rejects then), handing each message to
 * `accept`. Any other failed receive is logged and the loop goes on: a peer's input never ends it.
 */
export async function receiveEach(
  socket: { receive(): Promise<Buffer[]>; readonly closed: boolean },
  core: EndpointCore,
  label: string,
  accept: (frames: Buffer[]) => void,
): Promise<void> {
  for (;;) {
    let frames: Buffer[]
    try {
      frames = await socket.receive()
    } catch (error) {
      if (core.isClosed || socket.closed) return
      core.logger.warning(`${label}: receive failed`, error)
      continue
    }
    accept(frames)
  }
}
