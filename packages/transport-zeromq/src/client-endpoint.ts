import { DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_HWM, EndpointBase, type ClientOptions } from '@brine/transport'
import { DEFAULT_BACKOFF, DEFAULT_MAX_FRAME_BYTES } from '@brine/core'
import type { Dealer, Subscriber } from 'zeromq'
import { ClientLink, closeSocket, endpointOf, isIPv6, receiveEach } from './socket-util.js'

type ClientSocket = Dealer | Subscriber

/**
 * What both ZeroMQ clients share: a socket connected in the background, its reconnect schedule
 * run from the backoff options and its monitor mapped onto Brine's events (ClientLink), one receive
 * loop, and a close that stops the loop. The lifecycle itself (start once, idempotent close,
 * events, stats) is the runtime's EndpointBase.
 */
export abstract class ZeroMQClient<S extends ClientSocket> extends EndpointBase {
  protected readonly maxFrameBytes: number
  protected readonly hwm: number
  protected readonly link: ClientLink
  protected socket: S | undefined
  readonly #options: ClientOptions
  #loop: Promise<void> | undefined

  protected constructor(role: string, options: ClientOptions) {
    super('zeromq', role, endpointOf(options), options.logger)
    this.#options = options
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.link = new ClientLink(this.core, this.address, { ...DEFAULT_BACKOFF, ...options.reconnect })
  }

  /** The socket, configured (linger 0, hwm) but not connected; ClientLink sets its reconnect options. */
  protected abstract createSocket(): S

  /** Runs after the socket is made and before it connects: subscriptions, the send queue. */
  protected abstract prepare(socket: S): void

  /** One message from the server; must never throw because of what the server sent. */
  protected abstract accept(frames: Buffer[]): void

  /** Rejects or ends pending work before the socket closes. */
  protected abstract abandon(): void

  /**
   * Does nothing: libzmq has no call to bring a waiting retry forward, and connecting the endpoint again to force one
   * drops a connection libzmq may have just made, which its monitor reports late in a loaded process: tried with a
   * swarm, links connected twice and came back later than on their own schedule (docs/performance.md). A ZeroMQ
   * client keeps to its schedule.
   */
  reconnectNow(): void {}

  /** Resolves at once; connecting and reconnecting go on in the background. */
  protected open(): Promise<void> {
    const socket = this.createSocket()
    if (isIPv6(this.#options.host)) socket.ipv6 = true
    // A server that accepts but never completes the ZMTP handshake is dropped and retried (ZMQ_HANDSHAKE_IVL).
    socket.handshakeInterval = this.#options.handshakeTimeout ?? DEFAULT_HANDSHAKE_TIMEOUT_MS
    this.socket = socket
    this.prepare(socket)
    this.link.connect(socket)
    this.#loop = receiveEach(socket, this.core, `${this.core.what} ${this.address}`, (frames) => this.accept(frames))
    return Promise.resolve()
  }

  protected async release(): Promise<void> {
    this.abandon()
    this.link.connected = false
    if (this.socket !== undefined) closeSocket(this.socket)
    await this.#loop
  }
}
