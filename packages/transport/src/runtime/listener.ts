import { chmod, rm } from 'node:fs/promises'
import { createServer, type Server, type Socket } from 'node:net'
import { AddressInUseError, TransportError, type StreamReader, LogLimiter } from '@brine/core'
import {
  DEFAULT_FRAME_TIMEOUT_MS,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_LISTEN_BACKLOG,
  DEFAULT_MAX_PENDING_BYTES,
  DEFAULT_PEER_IDLE_TIMEOUT_MS,
  type ServerOptions,
} from '../contract/types.js'
import { Admission, admission as networkAdmission, defaultMaxConnections, defaultMaxConnectionsPerAddress, normalizeAddress } from './admission.js'
import type { EndpointCore } from './endpoint-core.js'
import { FramedConnection, PROGRESS_BYTES, type PendingBudget } from './framed-connection.js'

export interface ListenerOptions extends Pick<
  ServerOptions,
  'maxConnections' | 'maxConnectionsPerAddress' | 'maxPendingBytes' | 'idleTimeout' | 'handshakeTimeout' | 'frameTimeout' | 'listenBacklog'
> {
  host: string
  port: number
  /** Bind this unix socket instead of host:port (owner-only, its own admission apart from the network's). */
  path?: string
  /**
   * A request server's: its peers can authenticate ({@link Listener.authenticated}), and one that has
   * greeted but not yet may be evicted at a cap once idle. Others' peers, once greeted, never are.
   */
  authenticates?: boolean
  /** Largest incoming frame; larger ones are skipped as they stream past. */
  maxFrameBytes: number
  /** Outgoing frames queued per connection. */
  hwm: number
  /** Outgoing bytes queued per connection (default: no bound but `hwm`). */
  maxQueuedBytes?: number
  /**
   * Write each connection's frames written together as one, just after (see
   * FramedConnectionOptions.coalesce): for peers that pay per segment received, such as libzmq's.
   */
  coalesce?: boolean
  /** The transport's framing, when not the 4-byte length prefix (ZeroMQ's ZMTP). */
  reader?: (connection: FramedConnection) => StreamReader
  /** The endpoint's address once bound (default `tcp://host:port`). */
  formatAddress?: (host: string, port: number) => string
}

export interface ListenerHandlers {
  /** A whole frame (length-prefixed framing only; a custom reader reports its own). */
  onFrame?(body: Buffer, connection: FramedConnection): void
  /** A connection was admitted: write any greeting here. */
  onConnect?(connection: FramedConnection): void
  onDisconnect?(connection: FramedConnection): void
}

/** The limits a listener resolved from its options and the process's open-file limit. */
export interface ResolvedServerLimits {
  maxConnections: number
  maxConnectionsPerAddress: number
  maxPendingBytes: number
  idleTimeout: number
  handshakeTimeout: number
  frameTimeout: number
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`)
  return value
}

/** A server's limits with their defaults filled in; RangeError naming a bad value. */
export function resolveServerLimits(options: ListenerOptions): ResolvedServerLimits {
  const maxConnections = positiveInteger(options.maxConnections ?? defaultMaxConnections(), 'maxConnections')
  const maxConnectionsPerAddress = positiveInteger(
    options.maxConnectionsPerAddress ?? defaultMaxConnectionsPerAddress(maxConnections),
    'maxConnectionsPerAddress',
  )
  const maxPendingBytes = positiveInteger(options.maxPendingBytes ?? Math.max(DEFAULT_MAX_PENDING_BYTES, options.maxFrameBytes), 'maxPendingBytes')
  if (maxPendingBytes < options.maxFrameBytes) {
    throw new RangeError(
      `maxPendingBytes (${maxPendingBytes}) must be at least maxFrameBytes (${options.maxFrameBytes}), or no frame of the largest size could ever complete`,
    )
  }
  const idleTimeout = timeoutOf(options.idleTimeout ?? DEFAULT_PEER_IDLE_TIMEOUT_MS, 'idleTimeout')
  const handshakeTimeout = timeoutOf(options.handshakeTimeout ?? DEFAULT_HANDSHAKE_TIMEOUT_MS, 'handshakeTimeout')
  const frameTimeout = timeoutOf(options.frameTimeout ?? DEFAULT_FRAME_TIMEOUT_MS, 'frameTimeout')
  return { maxConnections, maxConnectionsPerAddress, maxPendingBytes, idleTimeout, handshakeTimeout, frameTimeout }
}

function timeoutOf(value: number, name: string): number {
  if (!(value >= 0 && value <= 2 ** 31 - 1)) throw new RangeError(`${name} must be 0 (none) or a positive number of ms up to ${2 ** 31 - 1}, got ${value}`)
  return value
}

/** How often the idle check runs, at most: a connection is dropped between 1 and 1.5 timeouts after its last progress. */
const MAX_SWEEP_MS = 5000

/**
 * A server's bound socket and its accepted connections, shared by every server role of both
 * transports: binds host:port (port 0 takes a free one, and the endpoint's address then names it)
 * or a unix socket `path` (owner-only, `ipc://path`, with an admission of its own), emits `listening`, `peer-connect` and `peer-disconnect`, and on close destroys every connection
 * and releases the port so it can be bound again at once.
 *
 * Before any work for a peer it has not authenticated, it applies the process's admission: a
 * connection over `maxConnections` (all servers of the process) or `maxConnectionsPerAddress` is
 * closed as it arrives (`peer-refuse`, a rate-limited warning) unless the oldest connection that has
 * not completed its greeting can be evicted to make room (`peer-drop`); the bytes of every incomplete frame
 * count against `maxPendingBytes` over all servers, the slowest-arriving frame given up beyond it;
 * and a connection that owes a frame — none completed yet, or one in progress — and makes no
 * progress for `idleTimeout` ms is dropped (`peer-drop`), as is one that has not completed its
 * greeting within `handshakeTimeout` ms, or a frame within `frameTimeout` ms of its first byte,
 * whatever it trickles. A connection between frames may idle.
 */
export class Listener {
  readonly connections = new Set<FramedConnection>()
  readonly limits: ResolvedServerLimits
  private server: Server | undefined
  private binding: Promise<void> | undefined
  private sweeper: NodeJS.Timeout | undefined
  private readonly budget: PendingBudget
  /** The process's network admission, or this unix socket's own (no remote peer counts against it). */
  private readonly admission: Admission
  /** When reading was held ({@link holdReading}), or undefined while connections are read. */
  private heldSince: number | undefined

  constructor(
    private readonly core: EndpointCore,
    private readonly options: ListenerOptions,
    private readonly handlers: ListenerHandlers,
  ) {
    this.limits = resolveServerLimits(options)
    const limit = this.limits.maxPendingBytes
    const admission = options.path === undefined ? networkAdmission : new Admission()
    this.admission = admission
    this.budget = {
      hold: (holder, bytes) => admission.hold(holder, bytes, limit),
      release: (holder) => admission.release(holder),
      greeted: (connection) => admission.greeted(connection),
    }
  }

  /** Frames waiting for their sockets to drain, over every connection. */
  get queued(): number {
    let queued = 0
    for (const connection of this.connections) queued += connection.queued
    return queued
  }

  /**
   * Stops reading every connection, and each new one as it is accepted, until {@link resumeReading}: the
   * request server holds all it will take. The deadlines (idle, handshake, frame) are not checked meanwhile,
   * and each connection's move on by the time it was held.
   */
  holdReading(): void {
    if (this.heldSince !== undefined) return
    this.heldSince = Date.now()
    for (const connection of this.connections) connection.holdReading(true)
  }

  resumeReading(): void {
    const since = this.heldSince
    if (since === undefined) return
    this.heldSince = undefined
    const now = Date.now()
    // One accepted while reading was held was held from its opening.
    for (const connection of this.connections) connection.holdReading(false, now - Math.max(since, connection.openedAt))
  }

  async start(): Promise<void> {
    const server = createServer((socket) => this.accept(socket))
    this.server = server
    const path = this.options.path
    const where = path ?? `${this.options.host}:${this.options.port}`
    // A socket file left by a process that was killed would make listen() fail with EADDRINUSE.
    if (path !== undefined) await rm(path, { force: true })
    const binding = new Promise<void>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException): void => {
        reject(
          error.code === 'EADDRINUSE'
            ? new AddressInUseError(where, { cause: error })
            : new TransportError(`${this.core.what} could not bind ${where}: ${error.message}`, { address: where }, { cause: error }),
        )
      }
      server.once('error', onError)
      const backlog = this.options.listenBacklog ?? DEFAULT_LISTEN_BACKLOG
      server.listen(path === undefined ? { host: this.options.host, port: this.options.port, backlog } : { path, backlog }, () => {
        server.off('error', onError)
        resolve()
      })
    })
    this.binding = binding
    try {
      await binding
    } catch (error) {
      this.server = undefined
      throw error
    }
    // A bound server's later errors (EMFILE on accept, …) must not kill the daemon: log them, at a bounded rate
    // (a flood of connections at the descriptor limit fails every accept).
    const errors = new LogLimiter()
    server.on('error', (error) =>
      errors.log(this.core.logger, 'error', `${this.core.what} ${this.core.address}: ${error.message}`, `accept errors on ${this.core.address}`),
    )
    // close() ran while we were binding; it waits for the bind, then releases the port.
    if (this.core.isClosed) throw this.core.closedError()
    const bound = server.address()
    if (path !== undefined) {
      // Only the daemon's user (and root) may connect: the same users who can read the root key.
      await chmod(path, 0o600)
      this.core.address = `ipc://${path}`
    } else if (bound !== null && typeof bound === 'object') {
      this.core.address = (this.options.formatAddress ?? ((host, port) => `tcp://${host}:${port}`))(this.options.host, bound.port)
    }
    const { idleTimeout, handshakeTimeout, frameTimeout } = this.limits
    const shortest = Math.min(...[idleTimeout, handshakeTimeout, frameTimeout].filter((ms) => ms > 0))
    if (Number.isFinite(shortest)) {
      const every = Math.max(10, Math.min(MAX_SWEEP_MS, Math.floor(shortest / 2)))
      // Checked after this turn's I/O (setImmediate), so a peer whose bytes are waiting to be read is not judged idle.
      this.sweeper = setInterval(() => setImmediate(() => this.sweep()), every)
      this.sweeper.unref()
    }
    this.core.emit({ type: 'listening', address: this.core.address })
  }

  private accept(socket: Socket): void {
    if (this.core.isClosed) {
      socket.destroy()
      return
    }
    // A unix socket's peers have no address: each is the one local "address" (and so named in logs).
    const address = this.options.path === undefined ? normalizeAddress(socket.remoteAddress) : 'local'
    const refused = this.admission.admit(address, this.limits.maxConnections, this.limits.maxConnectionsPerAddress)
    if (refused !== undefined) {
      // Closed before anything is read or allocated for it; the peer sees a reset.
      socket.on('error', () => {})
      socket.destroy()
      this.core.peerRefused(`${address.includes(':') ? `[${address}]` : address}:${socket.remotePort ?? 0}`, refused)
      return
    }
    const connection = new FramedConnection(
      socket,
      {
        maxFrameBytes: this.options.maxFrameBytes,
        hwm: this.options.hwm,
        ...(this.options.maxQueuedBytes === undefined ? {} : { maxQueuedBytes: this.options.maxQueuedBytes }),
        ...(this.options.reader === undefined ? {} : { reader: this.options.reader }),
        coalesce: this.options.coalesce === true,
        budget: this.budget,
        ...(this.options.path === undefined ? {} : { peer: 'local' }),
      },
      {
        onFrame: (body, conn) => this.handlers.onFrame?.(body, conn),
        onOversize: (error, conn) => this.core.frameDropped(conn.peer, error.message, error.size),
        onDrop: (conn, reason) => this.core.peerDropped(conn.peer, reason),
        onClose: (conn, reason) => {
          this.connections.delete(conn)
          this.admission.leave(conn)
          this.core.emit({ type: 'peer-disconnect', peer: conn.peer, ...(reason === undefined ? {} : { reason }) })
          this.handlers.onDisconnect?.(conn)
        },
      },
    )
    this.connections.add(connection)
    if (this.heldSince !== undefined) connection.holdReading(true)
    this.admission.track(connection, address, this.options.authenticates === true)
    this.core.emit({ type: 'peer-connect', peer: connection.peer })
    this.handlers.onConnect?.(connection)
  }

  /**
   * Drops every connection past a deadline: no greeting within the handshake timeout, a frame
   * begun longer ago than the frame timeout (whatever it trickles), or owing a frame with no
   * progress for the idle timeout.
   */
  private sweep(): void {
    if (this.heldSince !== undefined) return
    const now = Date.now()
    for (const connection of this.connections) {
      if (!connection.isOpen) continue
      const overdue = this.overdue(connection, now)
      if (overdue !== undefined) connection.drop(overdue)
    }
  }

  /** Why `connection` is past a deadline, if it is. */
  private overdue(connection: FramedConnection, now: number): string | undefined {
    const { idleTimeout: idle, handshakeTimeout: handshake, frameTimeout: frame } = this.limits
    if (handshake > 0 && connection.framesReceived === 0 && now - connection.openedAt > handshake) {
      return `did not complete its greeting within ${handshake} ms (handshake_timeout; ${connection.bytesReceived} bytes received)`
    }
    const started = connection.frameStartedAt
    if (frame > 0 && started !== undefined && connection.inFrame && now - started > frame) {
      return `did not complete its frame within ${frame} ms of its first byte (frame_timeout; ${connection.pendingBytes} bytes of it held)`
    }
    if (idle === 0 || now - connection.lastProgress <= idle) return undefined
    if (connection.bytesReceived === 0) return `sent nothing for ${idle} ms (peer_idle_timeout)`
    if (connection.framesReceived === 0) {
      return `did not complete its first frame within ${idle} ms (peer_idle_timeout; ${connection.pendingBytes} bytes of it held)`
    }
    if (connection.inFrame) {
      return `its frame in progress grew by less than ${PROGRESS_BYTES} bytes in ${idle} ms (peer_idle_timeout; ${connection.pendingBytes} bytes of it held)`
    }
    return undefined
  }

  /** The connection's peer proved who it is (a request's handler said so): it is never evicted. */
  authenticated(connection: FramedConnection): void {
    this.admission.authenticated(connection)
  }

  /** Stops accepting, destroys every connection, and resolves once the port is released. */
  async close(): Promise<void> {
    if (this.sweeper !== undefined) clearInterval(this.sweeper)
    this.sweeper = undefined
    await this.binding?.catch(() => {})
    const server = this.server
    if (server === undefined) return
    const released = new Promise<void>((resolve) => server.close(() => resolve()))
    await Promise.all([...this.connections].map((connection) => connection.close()))
    await released
  }
}
