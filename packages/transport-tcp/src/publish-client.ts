import { DEFAULT_HWM, EndpointBase, type LiveStats, type PublishClient, type PublishClientOptions, ReconnectingLink, tcpAddress } from '@brine/transport'
import { BoundedQueue, BrineError, DEFAULT_MAX_FRAME_BYTES, decode, decodeLimitsOf, encode, frame, type DecodeLimits, type WireValue } from '@brine/core'

/**
 * Minion side of the TCP publish link: connects to the publish port in the background, says hello
 * (`{hello: 1, id}`) on every (re)connect, and yields each publish frame's payload. Loads wait in
 * a BoundedQueue of `hwm`; a consumer that falls behind loses the newest, counted in stats().dropped.
 */
export class TcpPublishClient extends EndpointBase implements PublishClient {
  private readonly maxFrameBytes: number
  private readonly limits: DecodeLimits
  private readonly loads: BoundedQueue<WireValue>
  private readonly link: ReconnectingLink
  private id: string | null

  constructor(options: PublishClientOptions) {
    super('tcp', 'publish client', tcpAddress(options), options.logger)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.limits = decodeLimitsOf(options, 'client')
    const hwm = options.hwm ?? DEFAULT_HWM
    this.loads = new BoundedQueue<WireValue>(hwm)
    this.id = options.id ?? null
    this.link = new ReconnectingLink(
      this.core,
      {
        host: options.host,
        port: options.port,
        ...(options.path === undefined ? {} : { path: options.path }),
        maxFrameBytes: this.maxFrameBytes,
        hwm,
        reconnect: options.reconnect,
      },
      {
        onConnect: () => this.sendHello(),
        onFrame: (body, connection) => this.receive(body, connection.peer),
      },
    )
  }

  protected open(): Promise<void> {
    this.link.start()
    return Promise.resolve()
  }

  subscribe(id: string): void {
    this.id = id
    // Already connected: announce the new id now; otherwise the next connect's hello carries it.
    if (this.link.isConnected) this.sendHello()
  }

  reconnectNow(): void {
    if (this.core.isClosed) return
    this.link.reconnectNow()
  }

  private sendHello(): void {
    this.link.current?.write(frame(encode({ hello: 1, id: this.id })))
  }

  private receive(body: Buffer, peer: string): void {
    let load: WireValue
    try {
      load = decode(body, peer, this.limits)
    } catch (error) {
      const reason = BrineError.isInstance(error) ? error.message : String(error)
      this.core.frameDropped(peer, reason, body.length)
      return
    }
    if (!this.loads.push(load) && !this.loads.isEnded) {
      this.core.messageDropped(peer, `publish client queue for ${this.address} is full (hwm ${this.loads.capacity}); load dropped`)
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<WireValue> {
    return this.loads[Symbol.asyncIterator]()
  }

  protected liveStats(): LiveStats {
    return { queued: this.loads.size, inFlight: 0, peers: this.link.isConnected ? 1 : 0 }
  }

  protected async release(): Promise<void> {
    // The iterator ends at once: loads not yet read are discarded with the endpoint.
    this.loads.drain()
    this.loads.end()
    await this.link.close()
  }
}
