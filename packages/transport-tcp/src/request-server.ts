import {
  ClosedError,
  DEFAULT_HWM,
  DEFAULT_MAX_FRAME_BYTES,
  EndpointCore,
  EnvelopeKind,
  InvalidOperationError,
  MalformedFrameError,
  decodeEnvelope,
  encodeEnvelope,
  frame,
  serializeError,
  type Envelope,
  type EndpointStats,
  type RequestHandler,
  type RequestServer,
  type RequestServerOptions,
  type TransportEvent,
  type WireValue,
} from '@brine/transport'
import type { FramedConnection as Connection } from '@brine/transport'
import { Listener } from './listener.js'

/**
 * Master side of the request link: binds the ret port and calls the handler for every request
 * envelope `[0, id, body]`, concurrently, answering `[1, id, reply]` or, when the handler throws,
 * `[2, id, {name, message, context}]`. Replies go out in completion order; the id pairs them up.
 * Nothing a peer sends can stop the server: bad frames are dropped and counted.
 */
export class TcpRequestServer implements RequestServer {
  private readonly core: EndpointCore
  private readonly listener: Listener
  private readonly maxFrameBytes: number
  private handler: RequestHandler | undefined
  private inFlight = 0
  private started = false
  private closing: Promise<void> | undefined

  constructor(options: RequestServerOptions) {
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.core = new EndpointCore('tcp', 'request server', `tcp://${options.host}:${options.port}`, options.logger)
    this.listener = new Listener(
      this.core,
      'request server',
      { host: options.host, port: options.port, maxFrameBytes: this.maxFrameBytes, hwm: options.hwm ?? DEFAULT_HWM },
      {
        onFrame: (body, connection) => this.receive(body, connection),
        onOversize: (error, connection) => this.core.frameDropped(connection.peer, error.message, error.size),
      },
    )
  }

  get address(): string {
    return this.listener.address
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  handle(handler: RequestHandler): void {
    if (this.handler !== undefined) throw new InvalidOperationError(`tcp request server ${this.address} already has a handler`)
    if (this.started) throw new InvalidOperationError(`tcp request server ${this.address}: handle() must be called before start()`)
    this.handler = handler
  }

  async start(): Promise<void> {
    if (this.core.isClosed) throw new ClosedError('tcp request server', this.address)
    if (this.handler === undefined) {
      throw new InvalidOperationError(`tcp request server ${this.address}: call handle() before start()`)
    }
    this.started = true
    await this.listener.start()
  }

  private receive(body: Buffer, connection: Connection): void {
    let envelope: Envelope
    try {
      envelope = decodeEnvelope(body, connection.peer)
    } catch (error) {
      this.core.frameDropped(connection.peer, error instanceof MalformedFrameError ? error.message : String(error), body.length)
      return
    }
    if (envelope.kind !== EnvelopeKind.Request) {
      this.core.frameDropped(connection.peer, `malformed frame from ${connection.peer}: expected a request envelope, got kind ${envelope.kind}`, body.length)
      return
    }
    void this.serve(envelope.id, envelope.body, connection)
  }

  private async serve(id: number, request: WireValue, connection: Connection): Promise<void> {
    const handler = this.handler!
    this.inFlight++
    let reply: Buffer
    try {
      const result = await handler(request, { peer: connection.peer, transport: 'tcp' })
      reply = this.encodeReply({ kind: EnvelopeKind.Reply, id, body: result }, connection)
    } catch (error) {
      this.core.emit({ type: 'handler-error', peer: connection.peer, error: error instanceof Error ? error.message : String(error) })
      reply = this.encodeReply({ kind: EnvelopeKind.ErrorReply, id, body: serializeError(error) }, connection)
    } finally {
      this.inFlight--
    }
    // A peer that has gone gets nothing; its replies are discarded.
    if (!connection.isOpen || this.core.isClosed) return
    if (!connection.write(frame(reply))) {
      this.core.messageDropped(connection.peer, `reply queue for ${connection.peer} is full; reply ${id} dropped`)
    }
  }

  /** Encodes a reply; one that is too large or not encodable becomes an error reply saying why. */
  private encodeReply(envelope: Envelope, connection: Connection): Buffer {
    try {
      return encodeEnvelope(envelope, this.maxFrameBytes, connection.peer)
    } catch (error) {
      this.core.logger.warning(`tcp request server ${this.address}: reply ${envelope.id} to ${connection.peer} not sent: ${String(error)}`)
      try {
        return encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id: envelope.id, body: serializeError(error) }, this.maxFrameBytes)
      } catch {
        // Last resort: the caller must still hear that its request failed.
        return encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id: envelope.id, body: { name: 'TransportError', message: 'reply could not be encoded' } })
      }
    }
  }

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    let queued = 0
    for (const connection of this.listener.connections) queued += connection.queued
    return { ...this.core.counters, queued, inFlight: this.inFlight, peers: this.listener.connections.size }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  private async shutdown(): Promise<void> {
    this.core.markClosed()
    await this.listener.close()
    this.core.finishClose()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
