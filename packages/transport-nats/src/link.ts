import type { NatsConnection, Status } from '@nats-io/transport-node'
import { type EndpointCore } from '@brine/transport'
import { type BackoffOptions } from '@brine/core'
import { NatsConnector, type ConnectionMember } from './connector.js'
import { type ResolvedBroker } from './options.js'

/** nats-server's own default, used until the server's INFO says otherwise. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024

/**
 * Bytes an endpoint may hand its connection before it waits for the broker to have read them all. nats.js
 * writes to its socket without backpressure: a master publishing faster than the broker reads (a targeted
 * job to thousands of minions is one message per minion) would otherwise hold the excess in its own memory.
 */
export const OUTBOUND_FLUSH_BYTES = 4 * 1024 * 1024

export interface LinkHandlers {
  /**
   * Connected: to a connection new to this endpoint (`first`: subscribe), or again after nats.js reconnected
   * it (subscriptions are restored by nats.js).
   */
  onConnect(connection: NatsConnection, first: boolean): void
}

/**
 * One endpoint's view of its NATS connection: its own when it has no connection scope, else the one its
 * scope's endpoints share (a minion's publish and request clients), owned by a {@link NatsConnector}. Each
 * status of the connection becomes this endpoint's transport event; its subscriptions are its own to drop.
 */
export class NatsLink implements ConnectionMember {
  current: NatsConnection | undefined
  #up = false
  #stopped = false
  readonly #connector: NatsConnector
  /** Bytes handed to the connection since the broker last confirmed it had read everything sent. */
  #unflushed = 0
  #flushing: Promise<void> | undefined

  constructor(
    private readonly core: EndpointCore,
    broker: ResolvedBroker,
    name: string,
    reconnect: BackoffOptions | undefined,
    private readonly handlers: LinkHandlers,
    scope?: object,
  ) {
    this.#connector = NatsConnector.for(broker, name, reconnect, scope)
  }

  get isConnected(): boolean {
    return this.current !== undefined && !this.current.isClosed() && this.#up
  }

  /** The server's `max_payload`: the largest message it takes. */
  get maxPayload(): number {
    return this.current?.info?.max_payload ?? DEFAULT_MAX_PAYLOAD
  }

  /**
   * Counts `bytes` just handed to the connection. Past {@link OUTBOUND_FLUSH_BYTES} since the broker last caught
   * up, resolves only once it has read everything sent so far (one PING/PONG round, shared by every caller),
   * so what waits is the caller's next message, not a socket buffer growing in this process.
   */
  async sent(bytes: number): Promise<void> {
    this.#unflushed += bytes
    if (this.#unflushed < OUTBOUND_FLUSH_BYTES) return
    if (this.#flushing === undefined) {
      const connection = this.current
      if (connection === undefined || connection.isClosed()) return
      this.#unflushed = 0
      this.#flushing = connection
        .flush()
        .catch(() => {})
        .finally(() => {
          this.#flushing = undefined
        })
    }
    await this.#flushing
  }

  /** Servers: one connect over all of `nats_servers`; rejects with NatsConnectError (ClosedError once closed). */
  async connectOnce(): Promise<NatsConnection> {
    this.#connector.join(this)
    try {
      return await this.#connector.connectOnce()
    } catch (error) {
      if (this.#stopped) throw this.core.closedError()
      throw error
    }
  }

  /** Clients: connect in the background (or ride the scope's connection), retrying with backoff until close(). */
  start(): void {
    if (this.#stopped) return
    this.#connector.join(this)
    this.#connector.start()
  }

  attach(connection: NatsConnection): void {
    if (this.#stopped) return
    const first = this.current !== connection
    this.current = connection
    this.#up = true
    this.core.emit({ type: 'peer-connect', peer: connection.getServer() })
    this.handlers.onConnect(connection, first)
  }

  detach(): void {
    this.#up = false
    this.core.emit({ type: 'peer-disconnect', peer: this.current?.getServer() ?? 'NATS', reason: 'the NATS connection closed' })
  }

  connectFailed(error: Error, attempt: number, delay: number): void {
    if (attempt === 1 || attempt % 10 === 0) this.core.logger.warning(`${this.core.what} ${this.core.address}: ${error.message} (attempt ${attempt}; retrying)`)
    this.core.emit({ type: 'reconnect-attempt', address: this.core.address, attempt, delay })
  }

  status(connection: NatsConnection, status: Status): void {
    switch (status.type) {
      case 'disconnect':
        this.#up = false
        this.core.emit({ type: 'peer-disconnect', peer: status.server })
        break
      case 'reconnecting':
        this.core.emit({ type: 'reconnect-attempt', address: this.core.address, attempt: this.#connector.attempt + 1, delay: 0 })
        break
      case 'reconnect':
        this.#up = true
        this.core.counters.reconnects++
        this.core.emit({ type: 'peer-connect', peer: status.server })
        this.handlers.onConnect(connection, false)
        break
      case 'slowConsumer':
        this.slowConsumer(connection.getServer(), `the client fell ${status.pending} messages behind on ${status.sub.getSubject()}`)
        break
      case 'error':
        if (/slow consumer/i.test(status.error.message))
          this.slowConsumer(connection.getServer(), `the server reported a slow consumer: ${status.error.message}`)
        else this.core.logger.warning(`${this.core.what} ${this.core.address}: NATS error: ${status.error.message}`)
        break
      default:
        break
    }
  }

  /** Counted in stats().slowConsumers and reported as a message drop (rate-limited). */
  slowConsumer(peer: string, reason: string): void {
    this.core.counters.slowConsumers++
    this.core.messageDropped(peer, `slow consumer: ${reason}`)
  }

  /** Leaves the connection: the last endpoint on it closes it. The endpoint drops its own subscriptions first. */
  async close(): Promise<void> {
    this.#stopped = true
    this.#up = false
    await this.#connector.leave(this)
  }
}
