import { RequestServing, type RequestHandler, type RequestServer, type RequestServerOptions } from '@brine/transport'
import { Router } from 'zeromq'
import { ZeroMQServer } from './server-endpoint.js'
import { messageSize, receiveEach } from './socket-util.js'

/**
 * Master side of the request link: a Router bound to `ret_port`. Each message is
 * `[routing id, envelope]`; the envelope goes to the shared RequestServing loop (envelope checks,
 * bounded handler concurrency and backlog, error replies) and each reply is routed back by the id
 * it came from. This class only moves frames; whatever a peer sends, the loop carries on.
 */
export class ZeroMQRequestServer extends ZeroMQServer<Router> implements RequestServer {
  readonly #serving: RequestServing<Buffer>

  constructor(options: RequestServerOptions) {
    super('request server', options)
    this.#serving = new RequestServing<Buffer>(
      this.core,
      { maxFrameBytes: this.maxFrameBytes, concurrency: options.concurrency, backlog: options.backlog },
      (routingId, reply, peer) => this.#reply(routingId, reply, peer),
    )
  }

  handle(handler: RequestHandler): void {
    this.#serving.handle(handler, this.started)
  }

  protected override beforeStart(): void {
    this.#serving.checkReady()
  }

  protected createSocket(): Router {
    // mandatory false: a reply to a peer that has gone is discarded instead of blocking the socket.
    return new Router({ linger: 0, mandatory: false, sendHighWaterMark: this.hwm })
  }

  protected serverStats(): { inFlight: number; waiting: number } {
    return { inFlight: this.#serving.running, waiting: this.#serving.waiting }
  }

  protected receiveLoop(socket: Router): Promise<void> {
    return receiveEach(socket, this.core, `${this.core.what} ${this.address}`, (frames) => this.#accept(frames))
  }

  /** One incoming message: exactly `[routing id, envelope]`, else a frame drop. */
  #accept(frames: Buffer[]): void {
    const [routingId, body] = frames
    const peer = routingId === undefined ? 'unknown' : routingId.toString('hex')
    if (routingId === undefined || body === undefined || frames.length !== 2) {
      this.core.frameDropped(peer, `expected one frame per request, got ${Math.max(0, frames.length - 1)}`, messageSize(frames.slice(1)))
      return
    }
    this.#serving.receive(body, routingId, peer)
  }

  #reply(routingId: Buffer, reply: Buffer, peer: string): void {
    this.queue!.send([routingId, reply]).catch((error: unknown) => {
      if (!this.core.isClosed) this.core.logger.warning(`${this.core.what} ${this.address}: reply to ${peer} not sent`, error)
    })
  }

  protected override async release(): Promise<void> {
    this.#serving.close()
    await super.release()
  }
}
