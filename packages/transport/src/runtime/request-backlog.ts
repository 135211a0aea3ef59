import { BoundedQueue, type WireValue } from '@brine/core'

/** One request waiting for a handler slot. */
export interface WaitingRequest<P> {
  id: number
  request: WireValue
  peer: P
  peerName: string
  address: string | undefined
}

/**
 * The requests a server holds while every handler slot is taken, at most `capacity` over two lanes: the
 * urgent lane is always served first (a master puts its operator's requests there, so a publish never waits
 * behind a flood of minions' returns), each lane in arrival order. It also knows which request ids of each
 * peer are waiting, so a retry of a request still waiting is recognised instead of queued a second time.
 */
export class RequestBacklog<P> {
  readonly #urgent: BoundedQueue<WaitingRequest<P>>
  readonly #common: BoundedQueue<WaitingRequest<P>>
  /** Each peer's request ids waiting now; a peer leaves the map with its last one. */
  readonly #ids = new Map<P, Set<number>>()

  constructor(readonly capacity: number) {
    this.#urgent = new BoundedQueue(capacity)
    this.#common = new BoundedQueue(capacity)
  }

  /** Requests waiting now, both lanes. */
  get size(): number {
    return this.#urgent.size + this.#common.size
  }

  /** True while request `id` from `peer` waits here. */
  holds(peer: P, id: number): boolean {
    return this.#ids.get(peer)?.has(id) === true
  }

  /** Queues `waiting` in its lane; false (nothing queued) when `capacity` requests already wait. */
  push(waiting: WaitingRequest<P>, urgent: boolean): boolean {
    if (this.size >= this.capacity) return false
    ;(urgent ? this.#urgent : this.#common).push(waiting)
    const ids = this.#ids.get(waiting.peer)
    if (ids === undefined) this.#ids.set(waiting.peer, new Set([waiting.id]))
    else ids.add(waiting.id)
    return true
  }

  /** The next request to serve: the oldest urgent one, else the oldest of the rest. */
  shift(): WaitingRequest<P> | undefined {
    const next = this.#urgent.shift() ?? this.#common.shift()
    if (next === undefined) return undefined
    const ids = this.#ids.get(next.peer)
    if (ids !== undefined && ids.delete(next.id) && ids.size === 0) this.#ids.delete(next.peer)
    return next
  }

  /** Forgets everything waiting. */
  clear(): void {
    this.#urgent.drain()
    this.#common.drain()
    this.#ids.clear()
  }
}
