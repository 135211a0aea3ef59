import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  RequestTable,
  type LiveStats,
  type PendingRequest,
  type RequestClient,
  type RequestClientOptions,
  type SendOptions,
} from '@brine/transport'
import { decodeLimitsOf, type WireValue } from '@brine/core'
import { Dealer } from 'zeromq'
import { ZeroMQClient } from './client-endpoint.js'
import { mapNativeError } from './map-native-error.js'
import { SendQueue } from './send-queue.js'
import { clientMaxMessageSize, messageSize } from './socket-util.js'

/**
 * Minion, client and syndic side of the request link: one Dealer connected to `ret_port`, many
 * requests in flight on it through the shared RequestTable (ids, tries, timeouts, late replies,
 * abort, close). This class only moves frames: each try is one `[0, id, body]` message handed to
 * libzmq through the send queue, and each reply message goes to the table.
 */
export class ZeroMQRequestClient extends ZeroMQClient<Dealer> implements RequestClient {
  readonly #table: RequestTable
  #queue: SendQueue | undefined

  constructor(options: RequestClientOptions) {
    super('request client', options)
    this.#table = new RequestTable(
      this.core,
      {
        timeout: options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS,
        tries: options.tries ?? 1,
        limit: this.hwm,
        maxFrameBytes: this.maxFrameBytes,
        limits: decodeLimitsOf(options, 'client'),
      },
      { transmit: (request) => this.#transmit(request) },
    )
  }

  protected createSocket(): Dealer {
    return new Dealer({
      linger: 0,
      // Queue requests while disconnected; they go out once the server is back.
      immediate: false,
      sendHighWaterMark: this.hwm,
      maxMessageSize: clientMaxMessageSize(this.maxFrameBytes),
      // Never block the send queue: when libzmq cannot take a try at once (server down and the
      // queue at its mark), that try is lost and the request's own timeout and tries take over.
      sendTimeout: 0,
    })
  }

  protected prepare(socket: Dealer): void {
    this.#queue = new SendQueue(
      socket,
      (error) => mapNativeError(error, { what: this.core.what, address: this.address, closing: this.core.isClosed }),
      () => this.core.closedError(),
    )
    this.#table.open()
  }

  send(request: WireValue, options?: SendOptions): Promise<WireValue> {
    return this.#table.send(request, options)
  }

  #transmit(request: PendingRequest): void {
    this.#queue!.send(request.data).catch((error: unknown) => {
      // libzmq could not take it at once (its queue is at the mark while the server is away).
      if (!this.core.isClosed) this.core.messageDropped(this.address, `request ${request.id} try ${request.attempt} not sent: ${(error as Error).message}`)
    })
  }

  protected accept(frames: Buffer[]): void {
    const [body] = frames
    if (body === undefined || frames.length !== 1) {
      this.core.frameDropped(this.address, `expected one frame per reply, got ${frames.length}`, messageSize(frames))
      return
    }
    this.#table.receive(body, this.address)
  }

  protected abandon(): void {
    this.#queue?.close()
    this.#table.close()
  }

  protected liveStats(): LiveStats {
    return { queued: this.#queue?.size ?? 0, inFlight: this.#table.inFlight, peers: this.link.connected ? 1 : 0 }
  }
}
