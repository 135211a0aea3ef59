import {
  DEFAULT_HWM,
  EndpointBase,
  Listener,
  MAX_SUBSCRIBER_FRAME_BYTES,
  type FramedConnection as Connection,
  type LiveStats,
  type PublishOptions,
  type PublishServer,
  type PublishServerOptions,
  tcpAddress,
} from '@brine/transport'
import { BrineError, DEFAULT_MAX_FRAME_BYTES, decode, decodeLimitsOf, encodeFrame, type DecodeLimits, type WireValue } from '@brine/core'

interface Subscriber {
  /** Set by the hello frame; null for a subscriber without an id (broadcasts only). */
  id: string | null
}

/**
 * Master side of the TCP publish link: binds the publish port, learns each subscriber's id from
 * its hello frame, and writes each publish, encoded once, to every subscriber (broadcast) or only
 * to the connections of the ids named. Each connection queues at most `hwm` frames while its
 * socket is not draining; past that, publishes to it are dropped and counted. A subscriber has one
 * id at a time (a new hello replaces it) and may send frames of at most MAX_SUBSCRIBER_FRAME_BYTES.
 */
export class TcpPublishServer extends EndpointBase implements PublishServer {
  private readonly listener: Listener
  private readonly maxFrameBytes: number
  private readonly hwm: number
  private readonly limits: DecodeLimits
  /** Connections that have said hello; a connection that has not gets no publishes. */
  private readonly subscribers = new Map<Connection, Subscriber>()
  private readonly byId = new Map<string, Set<Connection>>()

  constructor(options: PublishServerOptions) {
    super('tcp', 'publish server', tcpAddress(options), options.logger)
    this.maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
    this.hwm = options.hwm ?? DEFAULT_HWM
    this.limits = decodeLimitsOf(options, 'server')
    this.listener = new Listener(
      this.core,
      // A subscriber only ever sends hellos: anything larger than a hello can be is skipped unread.
      { ...options, maxFrameBytes: Math.min(this.maxFrameBytes, MAX_SUBSCRIBER_FRAME_BYTES), hwm: this.hwm },
      {
        onFrame: (body, connection) => this.receive(body, connection),
        onDisconnect: (connection) => this.forget(connection),
      },
    )
  }

  protected open(): Promise<void> {
    return this.listener.start()
  }

  /** Subscribers only ever send hellos; anything else is dropped and the connection stays. */
  private receive(body: Buffer, connection: Connection): void {
    let value: WireValue
    try {
      value = decode(body, connection.peer, this.limits)
    } catch (error) {
      this.core.frameDropped(connection.peer, BrineError.isInstance(error) ? error.message : String(error), body.length)
      return
    }
    const hello = value as { hello?: unknown; id?: unknown } | null
    const id = hello?.id ?? null
    if (typeof hello !== 'object' || hello === null || hello.hello !== 1 || (id !== null && typeof id !== 'string')) {
      this.core.frameDropped(connection.peer, `malformed frame from ${connection.peer}: not a subscriber hello`, body.length)
      return
    }
    this.forget(connection)
    this.subscribers.set(connection, { id })
    if (id !== null) {
      let connections = this.byId.get(id)
      if (connections === undefined) this.byId.set(id, (connections = new Set()))
      connections.add(connection)
    }
    this.core.emit({ type: 'peer-subscribe', peer: connection.peer, topic: 'broadcast' })
    if (id !== null) this.core.emit({ type: 'peer-subscribe', peer: connection.peer, topic: id })
  }

  private forget(connection: Connection): void {
    const subscriber = this.subscribers.get(connection)
    if (subscriber === undefined) return
    this.subscribers.delete(connection)
    if (subscriber.id === null) return
    const connections = this.byId.get(subscriber.id)
    connections?.delete(connection)
    if (connections?.size === 0) this.byId.delete(subscriber.id)
  }

  /** Subscribers with an id (each holds it besides `broadcast`). */
  private byIdCount(): number {
    let count = 0
    for (const connections of this.byId.values()) count += connections.size
    return count
  }

  async publish(payload: WireValue, options: PublishOptions = {}): Promise<void> {
    if (this.core.isClosed) throw this.core.closedError()
    // Encoded once for every recipient; too large throws before anything is written.
    const data = encodeFrame(payload, this.maxFrameBytes)
    const recipients = new Set<Connection>()
    if (options.topics === undefined) {
      for (const connection of this.subscribers.keys()) recipients.add(connection)
    } else {
      for (const topic of options.topics) {
        for (const connection of this.byId.get(topic) ?? []) recipients.add(connection)
      }
    }
    for (const connection of recipients) {
      if (!connection.write(data) && connection.isOpen) {
        this.core.messageDropped(connection.peer, `publish queue for ${connection.peer} is full (hwm ${this.hwm}); publish dropped`)
      }
    }
  }

  protected liveStats(): LiveStats {
    return { queued: this.listener.queued, inFlight: 0, peers: this.listener.connections.size, subscriptions: this.subscribers.size + this.byIdCount() }
  }

  protected async release(): Promise<void> {
    await this.listener.close()
    this.subscribers.clear()
    this.byId.clear()
  }
}
