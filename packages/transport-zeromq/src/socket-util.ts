import { createHash } from 'node:crypto'
import type { BackoffOptions, EndpointCore } from '@brine/transport'
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

export function isIPv6(host: string): boolean {
  return host.includes(':')
}

/**
 * libzmq's reconnect options for a backoff. libzmq waits `reconnectInterval` plus a random part of
 * up to one interval, then doubles up to the maximum; an interval of initial × (1 − jitter) puts its
 * first attempt in [initial × (1 − jitter), initial × (2 − 2 × jitter)), with the default jitter of
 * 0.5 the same window as the TCP transport's first attempt, [initial / 2, initial).
 */
export interface ReconnectOptions {
  reconnectInterval: number
  reconnectMaxInterval: number
}

export function zmqReconnectOptions(backoff: Required<BackoffOptions>): ReconnectOptions {
  const interval = Math.max(1, Math.round(backoff.initial * (1 - Math.min(1, Math.max(0, backoff.jitter)))))
  return { reconnectInterval: interval, reconnectMaxInterval: Math.max(interval, backoff.max) }
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
 * Maps a client socket's monitor events onto Brine's: `connect` → peer-connect (every connect
 * after the first counts as a reconnect), `disconnect` → peer-disconnect, `connect:retry` →
 * reconnect-attempt. Shared by the publish and request clients.
 */
export class ClientLink {
  connected = false
  private everConnected = false
  private attempt = 0

  constructor(
    private readonly core: EndpointCore,
    private readonly address: string,
  ) {}

  attach(socket: Socket): void {
    const events = monitorOf(socket)
    events.on('connect', () => {
      if (this.core.isClosed) return
      if (this.everConnected) this.core.counters.reconnects++
      this.everConnected = true
      this.connected = true
      this.attempt = 0
      this.core.emit({ type: 'peer-connect', peer: this.address })
    })
    events.on('disconnect', () => {
      if (this.core.isClosed) return
      this.connected = false
      this.core.emit({ type: 'peer-disconnect', peer: this.address, reason: 'connection lost' })
    })
    events.on('connect:retry', (event) => {
      if (this.core.isClosed) return
      this.attempt++
      this.core.emit({ type: 'reconnect-attempt', address: this.address, attempt: this.attempt, delay: event.interval })
    })
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
