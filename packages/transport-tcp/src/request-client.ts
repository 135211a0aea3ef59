import {
  DEFAULT_HWM,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EndpointBase,
  LinkRequests,
  ReconnectingLink,
  RequestTable,
  tcpAddress,
  type LiveStats,
  type RequestClient,
  type RequestClientOptions,
  type SendOptions,
} from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES, decodeLimitsOf, encodeEnvelopeFrame, type WireValue } from '@brine/core'

/**
 * Minion / client side of the request link: one connection, kept up in the background, carrying
 * many requests at once through the shared RequestTable (ids, tries, timeouts, late replies, abort,
 * close). This class only moves frames: each try writes the request's framed envelope, and a
 * request made while disconnected waits (within its timeout) and goes out on connect (LinkRequests).
 */
export class TcpRequestClient extends EndpointBase implements RequestClient {
  readonly #link: ReconnectingLink
  readonly #table: RequestTable
  readonly #requests: LinkRequests

  constructor(options: RequestClientOptions) {
    super('tcp', 'request client', tcpAddress(options), options.logger)
    const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    const hwm = options.hwm ?? DEFAULT_HWM
    this.#requests = new LinkRequests(this.core, () => this.#link.current)
    this.#table = new RequestTable(
      this.core,
      {
        timeout: options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS,
        tries: options.tries ?? 1,
        limit: hwm,
        maxFrameBytes,
        limits: decodeLimitsOf(options, 'client'),
        encodeRequest: encodeEnvelopeFrame,
      },
      this.#requests,
    )
    this.#link = new ReconnectingLink(
      this.core,
      {
        host: options.host,
        port: options.port,
        ...(options.path === undefined ? {} : { path: options.path }),
        maxFrameBytes,
        hwm,
        reconnect: options.reconnect,
      },
      {
        onConnect: (connection) => this.#requests.flush(connection),
        onFrame: (body, connection) => this.#table.receive(body, connection.peer),
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

  protected liveStats(): LiveStats {
    return { queued: this.#requests.waiting + (this.#link.current?.queued ?? 0), inFlight: this.#table.inFlight, peers: this.#link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    this.#table.close()
    await this.#link.close()
  }
}
