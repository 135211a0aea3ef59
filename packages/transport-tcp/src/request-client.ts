import {
  ClosedError,
  DEFAULT_HWM,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EndpointCore,
  EnvelopeKind,
  InvalidOperationError,
  MalformedFrameError,
  TimeoutError,
  TransportError,
  decodeEnvelope,
  encodeEnvelope,
  errorFromJSON,
  frame,
  type Envelope,
  type EndpointStats,
  type RequestClient,
  type RequestClientOptions,
  type SendOptions,
  type TransportEvent,
  type WireValue,
} from '@brine/transport'
import type { FramedConnection as Connection } from '@brine/transport'
import { ReconnectingLink } from './reconnecting-link.js'

interface PendingRequest {
  readonly id: number
  /** The framed envelope `[0, id, body]`; every try sends these same bytes. */
  readonly data: Buffer
  readonly timeout: number
  readonly tries: number
  attempt: number
  timer: NodeJS.Timeout | undefined
  readonly resolve: (reply: WireValue) => void
  readonly reject: (error: unknown) => void
  readonly signal: AbortSignal | undefined
  readonly onAbort: (() => void) | undefined
}

/**
 * Minion / client side of the request link: one connection, kept up in the background, carrying
 * many requests at once, told apart by envelope id. Each try re-sends the same envelope, so a late
 * reply to an earlier try still completes the request. Requests made while disconnected wait
 * (within their timeout) and go out on connect. At most `hwm` requests are in flight.
 */
export class TcpRequestClient implements RequestClient {
  readonly address: string
  private readonly core: EndpointCore
  private readonly link: ReconnectingLink
  private readonly maxFrameBytes: number
  private readonly hwm: number
  private readonly timeout: number
  private readonly tries: number
  private readonly pending = new Map<number, PendingRequest>()
  /** Ids of requests waiting for a connection, in send order; never more than `pending` holds. */
  private readonly waiting = new Set<number>()
  private nextId = 0
  private started = false
  private closing: Promise<void> | undefined

  constructor(options: RequestClientOptions) {
    this.address = `tcp://${options.host}:${options.port}`
    this.core = new EndpointCore('tcp', 'request client', this.address, options.logger)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.timeout = options.timeout ?? DEFAULT_REQUEST_TIMEOUT_MS
    this.tries = options.tries ?? 1
    this.link = new ReconnectingLink(
      this.core,
      { host: options.host, port: options.port, maxFrameBytes: this.maxFrameBytes, hwm: this.hwm, reconnect: options.reconnect },
      {
        onConnect: (connection) => this.flushWaiting(connection),
        onFrame: (body, connection) => this.receive(body, connection.peer),
        onOversize: (error, connection) => this.core.frameDropped(connection.peer, error.message, error.size),
      },
    )
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  start(): Promise<void> {
    if (this.core.isClosed) return Promise.reject(new ClosedError('tcp request client', this.address))
    if (this.started) return Promise.reject(new InvalidOperationError(`tcp request client ${this.address} is already started`))
    this.started = true
    this.link.start()
    return Promise.resolve()
  }

  send(request: WireValue, options: SendOptions = {}): Promise<WireValue> {
    if (this.core.isClosed) return Promise.reject(new ClosedError('tcp request client', this.address))
    const { signal } = options
    if (signal?.aborted === true) return Promise.reject(abortReason(signal))
    const timeout = options.timeout ?? this.timeout
    const tries = Math.max(1, Math.floor(options.tries ?? this.tries))
    if (this.pending.size >= this.hwm) {
      return Promise.reject(
        new TransportError(`${this.pending.size} requests already in flight to ${this.address} (hwm ${this.hwm}); request refused`, {
          address: this.address,
          limit: this.hwm,
        }),
      )
    }
    const id = this.nextId
    this.nextId = this.nextId >= Number.MAX_SAFE_INTEGER ? 0 : this.nextId + 1
    let data: Buffer
    try {
      data = frame(encodeEnvelope({ kind: EnvelopeKind.Request, id, body: request }, this.maxFrameBytes, this.address))
    } catch (error) {
      return Promise.reject(error)
    }
    return new Promise<WireValue>((resolve, reject) => {
      const onAbort = signal === undefined ? undefined : (): void => this.settle(entry, () => reject(abortReason(signal)))
      const entry: PendingRequest = { id, data, timeout, tries, attempt: 0, timer: undefined, resolve, reject, signal, onAbort }
      this.pending.set(id, entry)
      if (onAbort !== undefined) signal?.addEventListener('abort', onAbort, { once: true })
      this.attempt(entry)
    })
  }

  /** One try: send now if connected (else wait for the connection) and arm this try's timer. */
  private attempt(entry: PendingRequest): void {
    entry.attempt++
    const connection = this.link.current
    if (connection === undefined) this.waiting.add(entry.id)
    else this.transmit(entry, connection)
    entry.timer = setTimeout(() => {
      if (entry.attempt < entry.tries) this.attempt(entry)
      else this.settle(entry, () => entry.reject(new TimeoutError(this.address, entry.timeout, entry.tries)))
    }, entry.timeout)
  }

  private transmit(entry: PendingRequest, connection: Connection): void {
    if (!connection.write(entry.data) && connection.isOpen) {
      this.core.messageDropped(connection.peer, `send queue to ${this.address} is full (hwm ${this.hwm}); request ${entry.id} not sent`)
    }
  }

  private flushWaiting(connection: Connection): void {
    const ids = [...this.waiting]
    this.waiting.clear()
    for (const id of ids) {
      const entry = this.pending.get(id)
      if (entry !== undefined) this.transmit(entry, connection)
    }
  }

  /** Removes a request from every table, then resolves or rejects it through `finish`. */
  private settle(entry: PendingRequest, finish: () => void): void {
    if (this.pending.get(entry.id) !== entry) return
    this.pending.delete(entry.id)
    this.waiting.delete(entry.id)
    clearTimeout(entry.timer)
    if (entry.onAbort !== undefined) entry.signal?.removeEventListener('abort', entry.onAbort)
    finish()
  }

  private receive(body: Buffer, peer: string): void {
    let envelope: Envelope
    try {
      envelope = decodeEnvelope(body, peer)
    } catch (error) {
      this.core.frameDropped(peer, error instanceof MalformedFrameError ? error.message : String(error), body.length)
      return
    }
    if (envelope.kind === EnvelopeKind.Request) {
      this.core.frameDropped(peer, `malformed frame from ${peer}: a server does not send requests`, body.length)
      return
    }
    const entry = this.pending.get(envelope.id)
    // A reply to a request that already timed out, was aborted or answered: nobody is waiting.
    if (entry === undefined) {
      this.core.logger.debug(`tcp request client ${this.address}: reply to request ${envelope.id} arrived after it settled`)
      return
    }
    if (envelope.kind === EnvelopeKind.Reply) {
      this.settle(entry, () => entry.resolve(envelope.body))
    } else {
      this.settle(entry, () => entry.reject(errorFromJSON(envelope.body, this.address)))
    }
  }

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    const queued = this.waiting.size + (this.link.current?.queued ?? 0)
    return { ...this.core.counters, queued, inFlight: this.pending.size, peers: this.link.isConnected ? 1 : 0 }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    this.core.markClosed()
    for (const entry of [...this.pending.values()]) {
      this.settle(entry, () => entry.reject(new ClosedError('tcp request client', this.address)))
    }
    await this.link.close()
    this.core.finishClose()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError')
}
