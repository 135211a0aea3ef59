/**
 * The syndic's own master, beside it: clear requests with the root key (`publish` a job passed down,
 * `runner` to read a job back) and its event bus. A master that restarted wrote a new root key: a request
 * refused for the key reads it again and asks once more.
 */
import { type MasterConfig, type SyndicConfig } from '@brine/config'
import { PermissionDeniedError } from '@brine/protocol'
import { ClearRequester, MasterEvent, MasterRequestError } from '@brine/client'
import { ClosedError, remoteCause, sleep, type Logger } from '@brine/core'

/** How long one request to its own master may take (a publish passed down, a job read back), ms. */
export const LOWER_REQUEST_MS = 30_000
/** Bound on waiting for the own master's root key and bus at start, between attempts. */
const LOWER_RETRY_MS = 500

export interface LowerMasterOptions {
  opts: SyndicConfig
  /** The syndic's id, for the ClosedError of a wait cut short. */
  id: string
  logger: Logger
  /** Aborting it ends the start-up wait and the requests in flight. */
  signal: AbortSignal
}

export class LowerMaster {
  readonly #o: LowerMasterOptions
  #requester: ClearRequester | undefined
  #bus: MasterEvent | undefined

  constructor(options: LowerMasterOptions) {
    this.#o = options
  }

  /** How log lines name it: its transport and request address. */
  get address(): string {
    const opts = this.#o.opts
    return `${opts.transport} ${opts.interface}:${String(opts.transport_opts[opts.transport]?.['ret_port'] ?? opts.ret_port)}`
  }

  /** The master's event bus (once {@link connect} resolved). */
  get bus(): MasterEvent {
    if (this.#bus === undefined) throw new ClosedError('syndic master bus', this.#o.opts.sock_dir)
    return this.#bus
  }

  #newRequester(): ClearRequester {
    return new ClearRequester({ opts: this.#o.opts as unknown as MasterConfig, logger: this.#o.logger.child('master'), requestTimeout: LOWER_REQUEST_MS })
  }

  /** Connects to the root key and request port, and to the event bus; waits for them (ClosedError once aborted). */
  async connect(): Promise<void> {
    const { signal, logger, opts, id } = this.#o
    let logged = false
    const requester = this.#newRequester()
    this.#requester = requester
    for (;;) {
      try {
        await requester.connect()
        const bus = new MasterEvent({ sockDir: opts.sock_dir, logger: logger.child('bus'), reconnect: { initial: 100, max: 2000 } })
        try {
          await bus.connect()
        } catch (error) {
          await bus.close()
          throw error
        }
        this.#bus = bus
        return
      } catch (error) {
        if (signal.aborted) throw new ClosedError('syndic', id)
        if (!logged) logger.warning(`waiting for this syndic's master (${this.address}, bus in ${opts.sock_dir}): ${(error as Error).message}`)
        logged = true
        if (!(await sleep(LOWER_RETRY_MS, signal))) throw new ClosedError('syndic', id)
      }
    }
  }

  /**
   * One clear request with the root key. A master that restarted wrote a new root key: refused for the key,
   * the syndic reads it again and asks once more.
   */
  async request(load: Record<string, unknown>): Promise<unknown> {
    const { signal, logger } = this.#o
    try {
      return await this.#requester!.request(load, { signal })
    } catch (error) {
      if (!(error instanceof MasterRequestError) || !(remoteCause(error) instanceof PermissionDeniedError) || signal.aborted) throw error
      logger.info(`this syndic's master refused its root key (${error.message}); reading the key again`)
      const stale = this.#requester!
      this.#requester = this.#newRequester()
      await stale.close()
      return this.#requester.request(load, { signal })
    }
  }

  /** Closes the bus: its reader's loop ends. */
  async closeBus(): Promise<void> {
    await this.#bus?.close()
  }

  /** Closes the request client (after the bus, once nothing asks any more). */
  async close(): Promise<void> {
    await this.#requester?.close()
  }
}
