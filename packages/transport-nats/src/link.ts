import { connect, type NatsConnection, type Status } from '@nats-io/transport-node'
import { type EndpointCore } from '@brine/transport'
import { backoffDelay, type BackoffOptions } from '@brine/core'
import { NatsConnectError } from './errors.js'
import { connectionOptions, type ResolvedBroker } from './options.js'

/** How long one connect may take before the next server is tried. */
const CONNECT_TIMEOUT_MS = 10_000

/** nats-server's own default, used until the server's INFO says otherwise. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024

/**
 * Bytes an endpoint may hand its connection before it waits for the broker to have read them all. nats.js
 * writes to its socket without backpressure: a master publishing faster than the broker reads (a targeted
 * job to thousands of minions is one message per minion) would otherwise hold the excess in its own memory.
 */
export const OUTBOUND_FLUSH_BYTES = 4 * 1024 * 1024

export interface LinkHandlers {
  /** Connected: the first time (`first`), or again after nats.js reconnected (subscriptions are restored by it). */
  onConnect(connection: NatsConnection, first: boolean): void
}

/** Why a connect failed, in an operator's words. */
function reasonOf(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  if (/authoriz|authenticat|permission/i.test(text)) {
    return `the server refused the credentials (${text}); check nats_user/nats_password, nats_token, nats_nkey_seed_file or nats_creds_file`
  }
  if (/ECONNREFUSED|refused/i.test(text)) return `connection refused (${text}); is nats-server running there?`
  return text
}

/**
 * One endpoint's connection to the NATS cluster. Servers connect once in start() and fail with
 * NatsConnectError naming the URLs; clients keep trying in the background with Brine's jittered
 * backoff. Once up, nats.js fails over among the servers (and those the cluster announces) on its
 * own, with the same backoff between rounds; each status becomes a transport event.
 */
export class NatsLink {
  current: NatsConnection | undefined
  #attempt = 0
  #timer: NodeJS.Timeout | undefined
  #stopped = false
  #connecting: Promise<NatsConnection> | undefined
  /** Bytes handed to the connection since the broker last confirmed it had read everything sent. */
  #unflushed = 0
  #flushing: Promise<void> | undefined

  constructor(
    private readonly core: EndpointCore,
    private readonly broker: ResolvedBroker,
    private readonly name: string,
    private readonly reconnect: BackoffOptions | undefined,
    private readonly handlers: LinkHandlers,
  ) {}

  get isConnected(): boolean {
    return this.current !== undefined && !this.current.isClosed() && this.#up
  }

  #up = false

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

  /** One connect over all of `nats_servers`; rejects with NatsConnectError. */
  async connectOnce(): Promise<NatsConnection> {
    let connection: NatsConnection
    try {
      connection = await connect({
        ...connectionOptions(this.broker, this.name),
        // A server past its max_connections answers -ERR and nats.js waits out this timeout: keep it short.
        timeout: CONNECT_TIMEOUT_MS,
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectDelayHandler: () => backoffDelay(++this.#attempt, this.reconnect),
      })
    } catch (error) {
      if (error instanceof Error && error.name === 'NatsOptionsError') throw error
      throw new NatsConnectError(this.broker.servers, reasonOf(error), { cause: error })
    }
    if (this.#stopped) {
      await connection.close().catch(() => {})
      throw this.core.closedError()
    }
    this.#established(connection)
    return connection
  }

  /** Clients: connect in the background, retrying with backoff until it works or close(). */
  start(): void {
    if (this.#stopped || this.#connecting !== undefined) return
    this.#connecting = this.connectOnce()
    this.#connecting.then(
      () => (this.#connecting = undefined),
      (error: unknown) => {
        this.#connecting = undefined
        if (this.#stopped) return
        const attempt = ++this.#attempt
        const delay = backoffDelay(attempt, this.reconnect)
        if (attempt === 1 || attempt % 10 === 0)
          this.core.logger.warning(`${this.core.what} ${this.core.address}: ${(error as Error).message} (attempt ${attempt}; retrying)`)
        this.core.emit({ type: 'reconnect-attempt', address: this.core.address, attempt, delay })
        this.#timer = setTimeout(() => this.start(), delay)
      },
    )
  }

  #established(connection: NatsConnection): void {
    const first = this.current === undefined
    this.current = connection
    this.#up = true
    this.#attempt = 0
    this.core.emit({ type: 'peer-connect', peer: connection.getServer() })
    this.handlers.onConnect(connection, first)
    void this.#watch(connection)
  }

  async #watch(connection: NatsConnection): Promise<void> {
    for await (const status of connection.status()) this.#onStatus(connection, status)
    // nats.js gave up (or we closed): a client starts over, so a fleet never stops trying.
    this.#up = false
    if (!this.#stopped) {
      this.core.emit({ type: 'peer-disconnect', peer: this.broker.servers.join(','), reason: 'the NATS connection closed' })
      this.start()
    }
  }

  #onStatus(connection: NatsConnection, status: Status): void {
    switch (status.type) {
      case 'disconnect':
        this.#up = false
        this.core.emit({ type: 'peer-disconnect', peer: status.server })
        break
      case 'reconnecting':
        this.core.emit({ type: 'reconnect-attempt', address: this.core.address, attempt: this.#attempt + 1, delay: 0 })
        break
      case 'reconnect':
        this.#up = true
        this.#attempt = 0
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

  async close(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    await this.#connecting?.catch(() => {})
    const connection = this.current
    this.#up = false
    if (connection !== undefined && !connection.isClosed()) await connection.close().catch(() => {})
  }
}
