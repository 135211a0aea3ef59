import type { EndpointCore } from './endpoint-core.js'
import type { FramedConnection } from './framed-connection.js'
import type { PendingRequest, RequestLink } from './request-table.js'

/**
 * A socket request client's side of its RequestTable, the same for both socket transports: each try goes out on
 * the link's connection, or, while the link is down, the request waits (once, whatever its tries) and goes out
 * when the link is up again; a request leaves the wait when it settles (answered, timed out, aborted, closed).
 */
export class LinkRequests implements RequestLink {
  readonly #waiting = new Set<PendingRequest>()

  constructor(
    private readonly core: EndpointCore,
    /** The link's connection while it is up. */
    private readonly current: () => FramedConnection | undefined,
  ) {}

  /** Requests waiting for the link. */
  get waiting(): number {
    return this.#waiting.size
  }

  transmit(request: PendingRequest): void {
    const connection = this.current()
    if (connection === undefined) this.#waiting.add(request)
    else this.#write(request, connection)
  }

  settled(request: PendingRequest): void {
    this.#waiting.delete(request)
  }

  /** The link is up on `connection`: the waiting requests go out, in send order. */
  flush(connection: FramedConnection): void {
    const waiting = [...this.#waiting]
    this.#waiting.clear()
    for (const request of waiting) this.#write(request, connection)
  }

  #write(request: PendingRequest, connection: FramedConnection): void {
    if (!connection.write(request.data) && connection.isOpen) {
      this.core.messageDropped(connection.peer, `send queue to ${this.core.address} is full; request ${request.id} try ${request.attempt} not sent`)
    }
  }
}
