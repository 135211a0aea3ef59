import type { NatsConnection, Status } from '@nats-io/transport-node'
import { backoffDelay, type BackoffOptions } from '@brine/core'
import { connectDirect } from './direct-transport.js'
import { NatsConnectError } from './errors.js'
import { connectionOptions, type ResolvedBroker } from './options.js'

/**
 * How long one connect's handshake may take before the next server is tried: a server that answers and then says
 * nothing. One that refuses (closes, or answers -ERR and closes) fails the handshake at once (connectDirect).
 */
const CONNECT_TIMEOUT_MS = 10_000

/** What a connector tells each endpoint riding its connection. */
export interface ConnectionMember {
  /** The connection is up: the first time, or a new one after nats.js gave up on the last. */
  attach(connection: NatsConnection): void
  /** A status of the connection (disconnect, reconnect, slow consumer, …). */
  status(connection: NatsConnection, status: Status): void
  /** The connection closed for good; a new one is being made if any member is left. */
  detach(): void
  /** A background connect failed; the next try is in `delay` ms. */
  connectFailed(error: Error, attempt: number, delay: number): void
}

/** Why a connect failed, in an operator's words. */
function reasonOf(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  if (/authoriz|authenticat|permission/i.test(text)) {
    return `the server refused the credentials (${text}); check nats_user/nats_password, nats_token, nats_nkey_seed_file or nats_creds_file`
  }
  if (/ECONNREFUSED|refused/i.test(text)) return `connection refused (${text}); is nats-server running there?`
  if (/maximum connections exceeded/i.test(text)) return `the server is at its max_connections (${text}); raise it in nats-server's config`
  // A server that says why and hangs up (its -ERR, then the close) can lose the race with the handshake's CONNECT: the
  // kernel drops the unread -ERR when the server's reset answers it. The reason is then in the server's log only.
  if (/\b(EPIPE|ECONNRESET)\b|closed the connection during the handshake/.test(text))
    return `the server closed the connection during the handshake (${text}); it may be at its max_connections or refusing this client: its log says why`
  return text
}

/** Connectors shared by scope (EndpointOptions.connectionScope) and broker, forgotten with their scope. */
const SHARED = new WeakMap<object, Map<string, NatsConnector>>()

/**
 * Owns one NATS connection and the endpoints riding it. Servers connect once (connectOnce) and fail with
 * NatsConnectError naming the URLs; clients keep trying in the background with Brine's jittered backoff.
 * Once up, nats.js fails over among the servers (and those the cluster announces) on its own, with the same
 * backoff between rounds; every status goes to every member. The connection closes when its last member leaves.
 */
export class NatsConnector {
  current: NatsConnection | undefined
  readonly #members = new Set<ConnectionMember>()
  #attempt = 0
  #timer: NodeJS.Timeout | undefined
  #stopped = false
  #connecting: Promise<NatsConnection> | undefined
  #closing: Promise<void> | undefined

  private constructor(
    private readonly broker: ResolvedBroker,
    private readonly name: string,
    private readonly reconnect: BackoffOptions | undefined,
    private readonly forget: () => void,
  ) {}

  /** A connector of its own, or the one `scope` already holds for this broker. */
  static for(broker: ResolvedBroker, name: string, reconnect: BackoffOptions | undefined, scope: object | undefined): NatsConnector {
    if (scope === undefined) return new NatsConnector(broker, name, reconnect, () => {})
    const key = JSON.stringify(broker)
    let connectors = SHARED.get(scope)
    if (connectors === undefined) SHARED.set(scope, (connectors = new Map()))
    const existing = connectors.get(key)
    if (existing !== undefined && !existing.#stopped) return existing
    const created = new NatsConnector(broker, name, reconnect, () => {
      if (connectors.get(key) === created) connectors.delete(key)
    })
    connectors.set(key, created)
    return created
  }

  /** The attempt number nats.js's next reconnect round is. */
  get attempt(): number {
    return this.#attempt
  }

  get isStopped(): boolean {
    return this.#stopped
  }

  /** Adds `member`; it is attached at once when the connection is already up. */
  join(member: ConnectionMember): void {
    this.#members.add(member)
    const connection = this.current
    if (connection !== undefined && !connection.isClosed()) member.attach(connection)
  }

  /** One connect over all of `nats_servers`; rejects with NatsConnectError. */
  async connectOnce(): Promise<NatsConnection> {
    let connection: NatsConnection
    try {
      connection = await connectDirect({
        ...connectionOptions(this.broker, this.name),
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
      throw new NatsConnectError(this.broker.servers, 'closed while connecting')
    }
    this.#established(connection)
    return connection
  }

  /** Clients: connect in the background, retrying with backoff until it works or the last member leaves. */
  start(): void {
    if (this.#stopped || this.#connecting !== undefined || this.current !== undefined) return
    this.#connecting = this.connectOnce()
    this.#connecting.then(
      () => (this.#connecting = undefined),
      (error: unknown) => {
        this.#connecting = undefined
        if (this.#stopped) return
        const attempt = ++this.#attempt
        const delay = backoffDelay(attempt, this.reconnect)
        for (const member of this.#members) member.connectFailed(error as Error, attempt, delay)
        this.#timer = setTimeout(() => this.start(), delay)
      },
    )
  }

  #established(connection: NatsConnection): void {
    this.current = connection
    this.#attempt = 0
    for (const member of this.#members) member.attach(connection)
    void this.#watch(connection)
  }

  async #watch(connection: NatsConnection): Promise<void> {
    for await (const status of connection.status()) for (const member of this.#members) member.status(connection, status)
    // nats.js gave up (or we closed): a client starts over, so a fleet never stops trying.
    if (this.current === connection) this.current = undefined
    if (this.#stopped) return
    for (const member of this.#members) member.detach()
    this.start()
  }

  /** Removes `member`; the last one to leave closes the connection. Resolves once it is closed. */
  leave(member: ConnectionMember): Promise<void> {
    this.#members.delete(member)
    if (this.#members.size > 0) return Promise.resolve()
    this.#closing ??= this.#close()
    return this.#closing
  }

  async #close(): Promise<void> {
    this.#stopped = true
    this.forget()
    clearTimeout(this.#timer)
    await this.#connecting?.catch(() => {})
    const connection = this.current
    if (connection !== undefined && !connection.isClosed()) await connection.close().catch(() => {})
  }
}
