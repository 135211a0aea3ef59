import {
  DEFAULT_HWM,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EndpointBase,
  LinkRequests,
  RequestTable,
  type FramedConnection,
  type LiveStats,
  type ReconnectingLink,
  type RequestClient,
  type RequestClientOptions,
  type SendOptions,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES, decodeLimitsOf, type WireValue } from '@brine/core'
import { endpointOf, messageSize } from './socket-util.js'
import { frameHeader } from './zmtp.js'
import { zmtpClientLink } from './zmtp-client.js'

/** A request's one-frame ZMTP message, made once per request (every try sends the same bytes). */
const zmtpFrame = (envelope: Buffer): Buffer => Buffer.concat([frameHeader(envelope.length, false), envelope])

/**
 * Minion, client and syndic side of the request link: a ZMTP 3.0 DEALER of Brine's own, on node:net, connected to
 * `ret_port`, many requests in flight on it through the shared RequestTable (ids, tries, timeouts, late replies,
 * abort, close). This class only moves frames: each try is one one-frame message (the envelope), each reply
 * message goes to the table, and a request made while the link is down waits (within its timeout) and goes out
 * once the handshake completes (LinkRequests, as TCP's client).
 */
export class ZeroMQRequestClient extends EndpointBase implements RequestClient {
  readonly #link: ReconnectingLink
  readonly #table: RequestTable
  readonly #requests: LinkRequests

  constructor(options: RequestClientOptions) {
    super('zeromq', 'request client', endpointOf(options), options.logger)
    this.#requests = new LinkRequests(this.core, () => this.#link.current)
    this.#table = new RequestTable(
      this.core,
      {
        timeout: options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS,
        tries: options.tries ?? 1,
        limit: options.hwm ?? DEFAULT_HWM,
        maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
        limits: decodeLimitsOf(options, 'client'),
        wrap: zmtpFrame,
      },
      this.#requests,
    )
    this.#link = zmtpClientLink(
      this.core,
      options,
      { socketType: 'DEALER', peerTypes: ['ROUTER', 'DEALER'] },
      {
        onConnect: (connection) => this.#requests.flush(connection),
        onMessage: (parts, connection) => this.#accept(parts, connection),
      },
    )
  }

  protected open(): Promise<void> {
    this.#table.open()
    this.#link.start()
    return Promise.resolve()
  }

  send(request: WireValue, options?: SendOptions): Promise<WireValue> {
    return this.#table.send(request, options)
  }

  reconnectNow(): void {
    if (this.core.isClosed) return
    this.#link.reconnectNow()
  }

  /** One reply message: exactly one envelope frame, else a frame drop. */
  #accept(parts: Buffer[], connection: FramedConnection): void {
    const [body] = parts
    if (body === undefined || parts.length !== 1) {
      this.core.frameDropped(connection.peer, `expected one frame per reply, got ${parts.length}`, messageSize(parts))
      return
    }
    this.#table.receive(body, connection.peer)
  }

  protected liveStats(): LiveStats {
    return { queued: this.#requests.waiting + (this.#link.current?.queued ?? 0), inFlight: this.#table.inFlight, peers: this.#link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    this.#table.close()
    await this.#link.close()
  }
}
