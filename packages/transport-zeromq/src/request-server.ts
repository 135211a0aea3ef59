import {
  EnvelopeKind,
  FrameTooLargeError,
  InvalidOperationError,
  decodeEnvelope,
  encodeEnvelope,
  serializeError,
  type EndpointStats,
  type RequestHandler,
  type RequestServer,
  type RequestServerOptions,
  type WireValue,
} from '@brine/transport'
import { Router } from 'zeromq'
import { ZeroMQServer } from './server-endpoint.js'
import { messageSize, receiveEach } from './socket-util.js'

/**
 * Master side of the request link: a Router bound to `ret_port`. Each message is
 * `[routing id, envelope]`; handler calls run concurrently and each reply is routed back by the
 * id it came from. Whatever a peer sends, the receive loop drops what it cannot use and carries on.
 */
export class ZeroMQRequestServer extends ZeroMQServer<Router> implements RequestServer {
  private handler: RequestHandler | undefined
  private inFlight = 0

  constructor(options: RequestServerOptions) {
    super('request server', 'request-server', options)
  }

  handle(handler: RequestHandler): void {
    if (this.handler !== undefined) throw new InvalidOperationError(`${this.what} ${this.address}: handle() was already called`)
    if (this.started) throw new InvalidOperationError(`${this.what} ${this.address}: handle() must be called before start()`)
    this.handler = handler
  }

  protected override beforeStart(): void {
    if (this.handler === undefined) throw new InvalidOperationError(`${this.what} ${this.address}: call handle() before start()`)
  }

  protected createSocket(): Router {
    // mandatory false: a reply to a peer that has gone is discarded instead of blocking the socket.
    return new Router({ linger: 0, mandatory: false, sendHighWaterMark: this.hwm })
  }

  protected extraStats(): Pick<EndpointStats, 'inFlight'> {
    return { inFlight: this.inFlight }
  }

  protected receiveLoop(socket: Router): Promise<void> {
    return receiveEach(socket, this.core, `${this.what} ${this.address}`, (frames) => this.accept(frames))
  }

  /** Checks one incoming message and starts its handler; anything unusable is a frame drop. */
  private accept(frames: Buffer[]): void {
    const [routingId, body] = frames
    const peer = routingId === undefined ? 'unknown' : routingId.toString('hex')
    if (routingId === undefined || body === undefined || frames.length !== 2) {
      this.core.frameDropped(peer, `expected one frame per request, got ${Math.max(0, frames.length - 1)}`, messageSize(frames.slice(1)))
      return
    }
    if (body.length > this.maxFrameBytes) {
      this.core.frameDropped(peer, new FrameTooLargeError(body.length, this.maxFrameBytes, peer).message, body.length)
      return
    }
    let envelope
    try {
      envelope = decodeEnvelope(body, peer)
    } catch (error) {
      this.core.frameDropped(peer, (error as Error).message, body.length)
      return
    }
    if (envelope.kind !== EnvelopeKind.Request) {
      this.core.frameDropped(peer, `malformed frame from ${peer}: not a request envelope (kind ${envelope.kind})`, body.length)
      return
    }
    void this.dispatch(routingId, peer, envelope.id, envelope.body)
  }

  private async dispatch(routingId: Buffer, peer: string, id: number, request: WireValue): Promise<void> {
    const handler = this.handler!
    this.inFlight++
    let reply: Buffer
    try {
      const result = await handler(request, { peer, transport: 'zeromq' })
      reply = encodeEnvelope({ kind: EnvelopeKind.Reply, id, body: result }, this.maxFrameBytes, peer)
    } catch (error) {
      // The handler threw, or its reply cannot travel (too large, not encodable): the caller gets an error reply.
      this.core.emit({ type: 'handler-error', peer, error: error instanceof Error ? error.message : String(error) })
      this.core.logger.debug(`${this.what} ${this.address}: handler error for ${peer}`, error)
      reply = this.errorReply(id, error, peer)
    } finally {
      this.inFlight--
    }
    if (this.core.isClosed) return
    try {
      await this.queue!.send([routingId, reply])
    } catch (error) {
      if (!this.core.isClosed) this.core.logger.warning(`${this.what} ${this.address}: reply to ${peer} not sent`, error)
    }
  }

  private errorReply(id: number, error: unknown, peer: string): Buffer {
    try {
      return encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id, body: serializeError(error) }, this.maxFrameBytes, peer)
    } catch {
      // The error itself would not encode (odd context values, a huge message): send its bare name.
      const name = error instanceof Error ? error.name : 'Error'
      return encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id, body: { name, message: 'handler failed; its error could not be encoded' } })
    }
  }
}
