import type { RequestContext, RequestHandler } from '@brine/transport'
import type { WireValue } from '@brine/core'

/**
 * The request handler of a master that is still starting. Its request servers are bound before the rest of its
 * start (keys, caches, the job cache, the worker threads), so a minion reconnecting after a restart is connected at
 * its first attempt instead of being refused and trying again a whole `recon_default` later; what it sends waits here
 * and is handled once the master is ready ({@link open}), or fails with the reason the start failed or the master
 * stopped ({@link fail}). Nothing is handled before the master is ready.
 */
export class RequestGate {
  #handler: RequestHandler | undefined
  #failure: Error | undefined
  readonly #ready: Promise<RequestHandler>
  #resolve!: (handler: RequestHandler) => void
  #reject!: (error: Error) => void
  /** Requests that arrived before {@link open} (a figure for the start-up log line). */
  #held = 0

  constructor() {
    this.#ready = new Promise<RequestHandler>((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
    })
    this.#ready.catch(() => {}) // every held request hears the failure through its own await
  }

  /** What the request servers call: the master's handler once open, else a wait for it. */
  readonly handle: RequestHandler = (request: WireValue, context: RequestContext): Promise<WireValue> => {
    if (this.#handler !== undefined) return this.#handler(request, context)
    if (this.#failure !== undefined) return Promise.reject(this.#failure)
    this.#held++
    return this.#ready.then((handler) => handler(request, context))
  }

  /** The master is ready: held requests and every later one go to `handler`. Once; a failed gate stays failed. */
  open(handler: RequestHandler): void {
    if (this.#handler !== undefined || this.#failure !== undefined) return
    this.#handler = handler
    this.#resolve(handler)
  }

  /** The master will not be ready (its start failed, or it stopped first): held and later requests fail with `error`. */
  fail(error: Error): void {
    if (this.#handler !== undefined || this.#failure !== undefined) return
    this.#failure = error
    this.#reject(error)
  }

  /** How many requests arrived before the gate opened. */
  get held(): number {
    return this.#held
  }
}
