import { InvalidOperationError, type Logger } from '@brine/core'
import type { Endpoint, EndpointStats, TransportEvent } from '../contract/types.js'
import { EndpointCore } from './endpoint-core.js'

/** The counters an endpoint reads from its sockets and queues at the moment stats() is called. */
export type LiveStats = Pick<EndpointStats, 'queued' | 'inFlight' | 'peers'> & { subscriptions?: number }

/**
 * The lifecycle every endpoint of every transport shares, written once: start() at most once and
 * never after close(); an idempotent close() that marks the endpoint closed, waits for a start
 * still binding, lets the transport release its sockets, then ends the event stream and resolves
 * `closed`; events(), stats() and `Symbol.asyncDispose`. A transport supplies only {@link open},
 * {@link release} and {@link liveStats}.
 */
export abstract class EndpointBase implements Endpoint {
  protected readonly core: EndpointCore
  #starting: Promise<void> | undefined
  #closing: Promise<void> | undefined

  protected constructor(transport: string, role: string, address: string, logger?: Logger) {
    this.core = new EndpointCore(transport, role, address, logger)
  }

  /** `tcp://host:port`; a server bound to port 0 reports the port it took once started. */
  get address(): string {
    return this.core.address
  }

  get closed(): Promise<void> {
    return this.core.closed
  }

  /** True once start() has been called (whether or not it has finished). */
  protected get started(): boolean {
    return this.#starting !== undefined
  }

  start(): Promise<void> {
    if (this.core.isClosed) return Promise.reject(this.core.closedError())
    if (this.#starting !== undefined) return Promise.reject(new InvalidOperationError(`${this.core.what} ${this.address} is already started`))
    try {
      // A synchronous throw (a missing handler) leaves the endpoint unstarted, so start() may be called again.
      this.#starting = this.open()
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#starting
  }

  /** Binds or begins connecting. Servers resolve once bound; clients at once. Throw synchronously to refuse to start. */
  protected abstract open(): Promise<void>

  close(): Promise<void> {
    this.#closing ??= this.#shutdown()
    return this.#closing
  }

  async #shutdown(): Promise<void> {
    this.core.markClosed()
    await this.#starting?.catch(() => {})
    await this.release()
    this.core.finishClose()
  }

  /** Rejects pending work with ClosedError and closes the sockets; for a server, resolves once the port is free. */
  protected abstract release(): Promise<void>

  protected abstract liveStats(): LiveStats

  events(): AsyncIterable<TransportEvent> {
    return this.core.events()
  }

  stats(): EndpointStats {
    const live = this.liveStats()
    return { ...this.core.counters, ...live, subscriptions: live.subscriptions ?? 0 }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
