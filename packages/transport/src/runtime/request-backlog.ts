import { BoundedQueue } from '@brine/core'

/** One request waiting for a handler slot. */
export interface WaitingRequest<P> {
  id: number
  /** What it counts against the server's `maxInFlightBytes` as it runs: its frame and REQUEST_OVERHEAD_BYTES. */
  cost: number
  /**
   * What it counts while it waits: `cost`, or, waiting past the bound of a server without an intake gate, its frame
   * and WAITING_FRAME_OVERHEAD_BYTES (RequestServing counts the rest in as it starts).
   */
  held: number
  /**
   * The request as its frame's bytes, copied out of the read it arrived in: decoded again when its turn comes, so a
   * burst waits as frames and not as the objects they decode to, which would outlive two scavenges and be promoted.
   */
  frame: Buffer
  peer: P
  peerName: string
  address: string | undefined
}

/**
 * The requests a server holds while every handler slot is taken, at most `capacity` over two lanes: the
 * urgent lane is always served first (a master puts its operator's requests there, so a publish never waits
 * behind a flood of minions' returns), each lane in arrival order.
 */
export class RequestBacklog<P> {
  readonly #urgent: BoundedQueue<WaitingRequest<P>>
  readonly #common: BoundedQueue<WaitingRequest<P>>

  constructor(readonly capacity: number) {
    this.#urgent = new BoundedQueue(capacity)
    this.#common = new BoundedQueue(capacity)
  }

  /** Requests waiting now, both lanes. */
  get size(): number {
    return this.#urgent.size + this.#common.size
  }

  /** Queues `waiting` in its lane; false (nothing queued) when `capacity` requests already wait. */
  push(waiting: WaitingRequest<P>, urgent: boolean): boolean {
    if (this.size >= this.capacity) return false
    ;(urgent ? this.#urgent : this.#common).push(waiting)
    return true
  }

  /** The next request to serve: the oldest urgent one, else the oldest of the rest. */
  shift(): WaitingRequest<P> | undefined {
    return this.#urgent.shift() ?? this.#common.shift()
  }

  /** Forgets everything waiting. */
  clear(): void {
    this.#urgent.drain()
    this.#common.drain()
  }
}

/**
 * The request ids a server holds for each peer, waiting or running, until each is answered: a try of a request
 * already in hand (a client's tries carry the same id) is recognised instead of served again. A peer leaves the
 * map with its last id.
 */
export class RequestsInHand<P> {
  readonly #ids = new Map<P, Set<number>>()

  /** True while request `id` from `peer` waits or runs. */
  holds(peer: P, id: number): boolean {
    return this.#ids.get(peer)?.has(id) === true
  }

  add(peer: P, id: number): void {
    const ids = this.#ids.get(peer)
    if (ids === undefined) this.#ids.set(peer, new Set([id]))
    else ids.add(id)
  }

  delete(peer: P, id: number): void {
    const ids = this.#ids.get(peer)
    if (ids !== undefined && ids.delete(id) && ids.size === 0) this.#ids.delete(peer)
  }

  clear(): void {
    this.#ids.clear()
  }
}
