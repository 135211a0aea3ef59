import {
  ClosedError,
  DEFAULT_BACKOFF,
  DEFAULT_HWM,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EndpointCore,
  EnvelopeKind,
  FrameTooLargeError,
  InvalidOperationError,
  TimeoutError,
  TransportError,
  decodeEnvelope,
  encodeEnvelope,
  errorFromJSON,
  type EndpointStats,
  type RequestClient,
  type RequestClientOptions,
  type SendOptions,
  type TransportEvent,
  type WireValue,
} from '@brine/transport'
import { Dealer } from 'zeromq'
import { mapNativeError } from './map-native-error.js'
import { SendQueue } from './send-queue.js'
import { ClientLink, closeSocket, formatEndpoint, isIPv6, messageSize, receiveEach, retryInterrupted, zmqReconnectOptions } from './socket-util.js'

interface Pending {
  resolve(value: WireValue): void
  reject(error: Error): void
}

/** Request ids wrap here; far more than can ever be in flight at once. */
const MAX_REQUEST_ID = 2 ** 32

/**
 * Minion, client and syndic side of the request link: one Dealer connected to `ret_port`, many
 * requests in flight on it. Each request is one `[0, id, body]` frame; one receive loop matches
 * replies to callers by id, so a late reply to an earlier try still completes the request.
 */
export class ZeroMQRequestClient implements RequestClient {
  readonly address: string
  private readonly core: EndpointCore
  private readonly maxFrameBytes: number
  private readonly hwm: number
  private readonly timeout: number
  private readonly tries: number
  private readonly options: RequestClientOptions
  private readonly pending = new Map<number, Pending>()
  private readonly link: ClientLink
  private socket: Dealer | undefined
  private queue: SendQueue | undefined
  private loop: Promise<void> | undefined
  private closing: Promise<void> | undefined
  private nextId = 0

  constructor(options: RequestClientOptions) {
    this.options = options
    this.address = formatEndpoint(options.host, options.port)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.timeout = options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS
    this.tries = options.tries ?? 1
    this.core = new EndpointCore('zeromq', 'request-client', this.address, options.logger?.child('zeromq:request-client'))
    this.link = new ClientLink(this.core, this.address)
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  private closedError(): ClosedError {
    return new ClosedError('request client', this.address)
  }

  /** Resolves at once; connecting and reconnecting go on in the background. */
  async start(): Promise<void> {
    if (this.core.isClosed) throw this.closedError()
    if (this.socket !== undefined) throw new InvalidOperationError(`request client ${this.address} is already started`)
    const backoff = { ...DEFAULT_BACKOFF, ...this.options.reconnect }
    const socket = new Dealer({
      linger: 0,
      // Queue requests while disconnected; they go out once the server is back.
      immediate: false,
      sendHighWaterMark: this.hwm,
      // Never block the send queue: when libzmq cannot take a try at once (server down and the
      // queue at its mark), that try is lost and the request's own timeout and tries take over.
      sendTimeout: 0,
      ...zmqReconnectOptions(backoff),
    })
    if (isIPv6(this.options.host)) socket.ipv6 = true
    this.socket = socket
    this.queue = new SendQueue(
      socket,
      (error) => mapNativeError(error, { what: 'request client', address: this.address, closing: this.core.isClosed, }),
      () => this.closedError(),
    )
    this.link.attach(socket)
    retryInterrupted(() => socket.connect(this.address))
    this.loop = this.receiveLoop(socket)
  }

  /**
   * Sends `request` and resolves with the reply. Each try waits `timeout` ms and re-sends the
   * same envelope; after `tries` silent tries it rejects with TimeoutError. An error reply rejects
   * with RemoteError; close() rejects it with ClosedError; `signal` aborts it.
   */
  async send(request: WireValue, options: SendOptions = {}): Promise<WireValue> {
    if (this.core.isClosed) throw this.closedError()
    const queue = this.queue
    if (queue === undefined) throw new InvalidOperationError(`request client ${this.address}: call start() before send()`)
    const timeout = options.timeout ?? this.timeout
    const tries = options.tries ?? this.tries
    if (!(timeout > 0)) throw new RangeError(`timeout must be a positive number of ms, got ${timeout}`)
    if (!Number.isInteger(tries) || tries < 1) throw new RangeError(`tries must be a positive integer, got ${tries}`)
    const signal = options.signal
    signal?.throwIfAborted()
    if (this.pending.size >= this.hwm) {
      throw new TransportError(`request client ${this.address}: ${this.pending.size} requests already in flight (hwm ${this.hwm}); request refused`, {
        address: this.address,
        hwm: this.hwm,
      })
    }
    const id = this.allocateId()
    const envelope = encodeEnvelope({ kind: EnvelopeKind.Request, id, body: request }, this.maxFrameBytes, this.address)

    return new Promise<WireValue>((resolve, reject) => {
      let attempt = 0
      let timer: NodeJS.Timeout | undefined
      const onAbort = (): void => settle(() => reject(signal!.reason))
      const settle = (finish: () => void): void => {
        if (this.pending.get(id) !== entry) return
        this.pending.delete(id)
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
        finish()
      }
      const entry: Pending = {
        resolve: (value) => settle(() => resolve(value)),
        reject: (error) => settle(() => reject(error)),
      }
      const sendTry = (): void => {
        attempt++
        timer = setTimeout(onTimeout, timeout)
        queue.send(envelope).catch((error: unknown) => {
          // libzmq could not take it at once (its queue is at the mark while the server is away).
          if (!this.core.isClosed) this.core.messageDropped(this.address, `request ${id} try ${attempt} not sent: ${(error as Error).message}`)
        })
      }
      const onTimeout = (): void => {
        if (attempt < tries) sendTry()
        else entry.reject(new TimeoutError(this.address, timeout, tries))
      }
      this.pending.set(id, entry)
      signal?.addEventListener('abort', onAbort, { once: true })
      sendTry()
    })
  }

  private allocateId(): number {
    // Skip ids still in flight after a wrap, so a reply can never reach the wrong caller.
    do {
      this.nextId = (this.nextId + 1) % MAX_REQUEST_ID
    } while (this.pending.has(this.nextId))
    return this.nextId
  }

  private receiveLoop(socket: Dealer): Promise<void> {
    return receiveEach(socket, this.core, `request client ${this.address}`, (frames) => this.accept(frames))
  }

  private accept(frames: Buffer[]): void {
    const [body] = frames
    if (body === undefined || frames.length !== 1) {
      this.core.frameDropped(this.address, `expected one frame per reply, got ${frames.length}`, messageSize(frames))
      return
    }
    if (body.length > this.maxFrameBytes) {
      this.core.frameDropped(this.address, new FrameTooLargeError(body.length, this.maxFrameBytes, this.address).message, body.length)
      return
    }
    let envelope
    try {
      envelope = decodeEnvelope(body, this.address)
    } catch (error) {
      this.core.frameDropped(this.address, (error as Error).message, body.length)
      return
    }
    const entry = this.pending.get(envelope.id)
    switch (envelope.kind) {
      case EnvelopeKind.Request:
        this.core.frameDropped(this.address, `malformed frame from ${this.address}: a request, not a reply`, body.length)
        return
      case EnvelopeKind.Reply:
        if (entry === undefined) this.core.logger.debug(`request client ${this.address}: reply to request ${envelope.id}, no longer waited for`)
        entry?.resolve(envelope.body)
        return
      case EnvelopeKind.ErrorReply:
        entry?.reject(errorFromJSON(envelope.body, this.address))
        return
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    this.core.markClosed()
    this.queue?.close()
    for (const entry of [...this.pending.values()]) entry.reject(this.closedError())
    this.link.connected = false
    if (this.socket !== undefined) await closeSocket(this.socket, false)
    await this.loop
    this.core.finishClose()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    return { queued: this.queue?.size ?? 0, ...this.core.counters, inFlight: this.pending.size, peers: this.link.connected ? 1 : 0 }
  }
}
