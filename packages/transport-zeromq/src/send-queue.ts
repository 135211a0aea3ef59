import { ClosedError } from '@brine/core'
import type { MessageLike } from 'zeromq'

/** The part of a zeromq socket the queue needs. */
export interface SendTarget {
  send(message: MessageLike | MessageLike[]): Promise<void>
}

/**
 * Serialises sends on one socket. zeromq.js allows a single pending `send()` per socket and
 * rejects a second with EBUSY, so every send goes through this chain. Each call resolves once
 * libzmq has taken the message (not when it is delivered) and rejects with the mapped error.
 */
export class SendQueue {
  private tail: Promise<void> = Promise.resolve()
  private waiting = 0
  private closed = false

  constructor(
    private readonly target: SendTarget,
    private readonly mapError: (error: unknown) => Error,
    private readonly closedError: () => ClosedError,
  ) {}

  /** Sends waiting for their turn (or being handed to libzmq) right now. */
  get size(): number {
    return this.waiting
  }

  send(message: MessageLike | MessageLike[]): Promise<void> {
    if (this.closed) return Promise.reject(this.closedError())
    this.waiting++
    const run = async (): Promise<void> => {
      try {
        if (this.closed) throw this.closedError()
        await this.target.send(message)
      } catch (error) {
        throw this.mapError(error)
      } finally {
        this.waiting--
      }
    }
    const result = this.tail.then(run)
    // The chain must survive a failed send; the caller sees the rejection through `result`.
    this.tail = result.catch(() => {})
    return result
  }

  /** Sends still waiting reject with ClosedError; later sends reject at once. */
  close(): void {
    this.closed = true
  }
}
