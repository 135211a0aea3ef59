/**
 * A master link's publish client: created once its port is known (a configured override, else what the
 * master's auth reply names), replaced when a restarted master names another port, and read as one
 * stream of sealed envelopes across replacements. What the envelopes hold is {@link PublishOpener}'s.
 */
import type { JobLoad } from '@brine/protocol'
import { type ClientOptions, type PublishClient, type Transport } from '@brine/transport'
import { InvalidOperationError, type Logger, type WireValue } from '@brine/core'
import type { MasterSession } from './auth.js'

/** The publish port when neither config nor the master says (Salt's default). */
const DEFAULT_PUBLISH_PORT = 4505

export interface PublishSubscriptionOptions {
  /** The id the client subscribes as. */
  id: string
  transport: Transport
  /** The master's name (`host:port` of its ret port), for log lines. */
  master: string
  /** Host, reconnect backoff and endpoint limits of the client. */
  client: Omit<ClientOptions, 'port' | 'logger'>
  /** A configured publish port: the client exists from the start and never moves. */
  publishPort?: number
  logger: Logger
  /** Aborted when the link stops: waits for the client to connect end. */
  signal: AbortSignal
  /** Whether the link is closing: no client is created or started any more. */
  closing: () => boolean
  /** Background work the link waits for as it closes. */
  track: (task: Promise<unknown>) => void
  /** The publish client connected again after a loss: the master is back, so its other link may be too. */
  onReconnect?: () => void
  /** A link that only makes requests (`brine-call`'s): no publish client is ever made, and waits for one end at once. */
  requestsOnly?: boolean
}

/** Opens one envelope: the job, undefined when dropped, or a promise of either. */
export type OpenEnvelope = (envelope: WireValue) => JobLoad | undefined | Promise<JobLoad | undefined>

export class PublishSubscription {
  readonly #o: PublishSubscriptionOptions
  /** The publish client; created once its port is known. */
  #client: PublishClient | undefined
  #port: number | undefined
  /** Resolves with the first publish client (undefined if the link closes first). */
  readonly #ready: Promise<PublishClient | undefined>
  #resolveReady!: (client: PublishClient | undefined) => void
  /** Resolves when the current publish client first connects (or the link stops). */
  #connected: Promise<void> = Promise.resolve()
  #isConnected = false
  /** Called when the current client is next connected. */
  readonly #connectWaiters = new Set<() => void>()
  #taken = false

  constructor(options: PublishSubscriptionOptions) {
    this.#o = options
    this.#ready = new Promise((resolve) => (this.#resolveReady = resolve))
    if (options.requestsOnly === true) this.#resolveReady(undefined)
    else if (options.publishPort !== undefined) this.#create(options.publishPort)
  }

  /** The current client's address, if there is a client yet. */
  get address(): string | undefined {
    return this.#client?.address
  }

  /** Whether the current client is connected now (a job published meanwhile would not reach this minion). */
  get isConnected(): boolean {
    return this.#isConnected
  }

  /** Resolves when the current client first connects, or the link stops. */
  get connected(): Promise<void> {
    return this.#connected
  }

  /**
   * Resolves when the current client is connected: at once if it is, else at its next connect, or when the link
   * stops. A link checking in after a reconnect waits on it, so the master hears from the minion once its
   * publishes can reach it again.
   */
  whenConnected(): Promise<void> {
    if (this.#isConnected || this.#o.signal.aborted || this.#o.requestsOnly === true) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        this.#connectWaiters.delete(done)
        this.#o.signal.removeEventListener('abort', done)
        resolve()
      }
      this.#connectWaiters.add(done)
      this.#o.signal.addEventListener('abort', done, { once: true })
    })
  }

  /** The master is known to be back: a publish client waiting to reconnect tries now. */
  reconnectNow(): void {
    this.#client?.reconnectNow()
  }

  /** Starts the client that exists (a configured port's); without one, the first auth creates it. */
  async start(): Promise<void> {
    await this.#client?.start()
  }

  /** Creates (does not start) the publish client for `port`. */
  #create(port: number): PublishClient {
    const { transport, id, client: clientOptions, logger, signal } = this.#o
    const client = transport.createPublishClient({ ...clientOptions, port, id, logger: logger.child('publish') })
    this.#client = client
    this.#port = port
    this.#isConnected = false
    this.#resolveReady(client)
    let connected: () => void = () => {}
    this.#connected = new Promise((resolve) => {
      connected = resolve
      signal.addEventListener('abort', () => resolve(), { once: true })
    })
    this.#o.track(this.#watch(client, connected))
    return client
  }

  /** Says when a lost publish connection is back: until then this master's jobs cannot reach the minion. */
  async #watch(client: PublishClient, connected: () => void): Promise<void> {
    let connects = 0
    for await (const event of client.events()) {
      if (this.#o.signal.aborted) break
      if (event.type === 'peer-disconnect') {
        if (client === this.#client) this.#isConnected = false
        this.#o.logger.info(`publishes from ${client.address}: connection lost`)
      }
      if (event.type !== 'peer-connect') continue
      if (client === this.#client) {
        this.#isConnected = true
        for (const waiter of [...this.#connectWaiters]) waiter()
      }
      if (++connects === 1) {
        connected()
        continue
      }
      this.#o.logger.info(`publishes from ${client.address}: connected again`)
      if (client === this.#client) this.#o.onReconnect?.()
    }
  }

  /**
   * After an auth: without an explicit publish port, subscribe where the master said (replacing the
   * client if a restarted master names another port; the stream then goes on from the new one).
   */
  subscribeAt(session: MasterSession): void {
    const { master, logger } = this.#o
    if (this.#o.publishPort !== undefined || this.#o.closing() || this.#o.requestsOnly === true) return
    let port = session.publishPort
    if (port === undefined) {
      port = this.#port ?? DEFAULT_PUBLISH_PORT
      if (this.#client === undefined) logger.warning(`the master at ${master} did not name its publish port; subscribing to ${port}`)
    }
    if (this.#client !== undefined && port === this.#port) return
    const old = this.#client
    const client = this.#create(port)
    logger.info(`master ${master}: publishes on port ${port}${old === undefined ? '' : ` (was ${old.address})`}, as its auth reply says`)
    this.#o.track(
      (async () => {
        await old?.close()
        // A link closing meanwhile has closed this client too: nothing to start.
        if (!this.#o.closing()) await client.start()
      })().catch((error: unknown) => {
        if (!this.#o.closing()) logger.error(`could not start the publish client for ${client.address}`, error)
      }),
    )
  }

  /**
   * The jobs `open` makes of the envelopes, in the order they were published, each wrapped by `wrap`;
   * ends when the link stops. A single consumer: a second call throws InvalidOperationError.
   */
  stream<T>(open: OpenEnvelope, wrap: (job: JobLoad) => T): AsyncIterable<T> {
    if (this.#o.requestsOnly === true) throw new InvalidOperationError(`the link to ${this.#o.master} makes requests only: it has no publishes`)
    if (this.#taken) throw new InvalidOperationError(`the publishes of ${this.#o.master} have a reader already`)
    this.#taken = true
    // A plain iterator rather than an async generator: one promise per job on the hot path, where a
    // swarm runs hundreds of links in one process.
    let client: PublishClient | undefined
    let envelopes: AsyncIterator<WireValue> | undefined
    const { signal, logger, master } = this.#o
    const ended = (): IteratorResult<T> => ({ done: true, value: undefined })
    const iterator: AsyncIterator<T> = {
      next: async () => {
        for (;;) {
          if (envelopes === undefined || client !== this.#client) {
            // The first client exists once the first auth named the port; a replaced one ends and the next takes over.
            client = this.#client ?? (await this.#ready)
            if (client === undefined || signal.aborted) return ended()
            envelopes = client[Symbol.asyncIterator]()
          }
          const next = await envelopes.next()
          if (signal.aborted) return ended()
          if (next.done === true) {
            if (client === this.#client) return ended()
            continue
          }
          let job: JobLoad | undefined
          try {
            const opened = open(next.value)
            job = opened instanceof Promise ? await opened : opened
          } catch (error) {
            if (signal.aborted) return ended()
            logger.error(`unexpected error while opening a publish from ${master}; continuing`, error)
            continue
          }
          if (job !== undefined) return { done: false, value: wrap(job) }
        }
      },
      return: async () => {
        await envelopes?.return?.()
        return ended()
      },
    }
    return { [Symbol.asyncIterator]: () => iterator }
  }

  /** Ends the stream and closes the client. */
  async close(): Promise<void> {
    this.#resolveReady(undefined)
    await this.#client?.close()
  }
}
