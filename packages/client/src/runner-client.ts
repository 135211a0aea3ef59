import { msFromSeconds, timeoutsFromConfig } from '@brine/config'
import { BUS_DROPPED_TAG, tags, type BusEvent } from '@brine/protocol'
import { ClearRequester, type ClientCredentials, type MasterClientOptions, type RequestOrigin } from './clear-request.js'
import { RunnerError } from './errors.js'
import type { IterOptions } from './master-event.js'
import { currentUser } from './local-client.js'

/** What a runner call answered: its jid, Salt's return, and whether the runner succeeded. */
export interface RunnerResult {
  jid: string
  return: unknown
  /** False when the runner raised; `return` is then Salt's "Exception occurred in runner …" text. */
  success: boolean
}

export interface RunnerCallOptions {
  signal?: AbortSignal
  /** Run as this eauth user (their ACL applies) instead of with the client's own credentials. */
  credentials?: ClientCredentials
  /** Where this call comes from (the master's audit log), instead of the client's `origin`. */
  origin?: RequestOrigin
}

/** What an asynchronous runner or wheel call answers: Salt's `{tag, jid}`; the return comes on the bus. */
export interface AsyncResult {
  tag: string
  jid: string
}

/** What {@link RunnerClient.cmdFollowed} reads the run's events from: the master's bus (a MasterEvent). */
export interface RunEventSource {
  iter(options: IterOptions): AsyncIterable<BusEvent>
}

export interface FollowedCallOptions extends RunnerCallOptions {
  /** Each `salt/run/<jid>/progress` event's data, as it fires. */
  onProgress: (data: Record<string, unknown>) => void
}

/** Extra time the request may take beyond the runner's own wait for minions, ms. */
const REQUEST_MARGIN_MS = 15_000

/**
 * Salt's RunnerClient: runs `jobs.*` and `manage.*` on the local master with its root key.
 *
 * ```ts
 * const runner = new RunnerClient({ configDir: '/etc/brine' })
 * console.log(await runner.cmd('manage.status'))            // { up: ['web1'], down: [] }
 * console.log(await runner.cmd('jobs.lookup_jid', [jid]))   // { web1: true }
 * await runner.close()
 * ```
 */
export class RunnerClient implements AsyncDisposable {
  readonly #requester: ClearRequester

  constructor(options: MasterClientOptions = {}) {
    this.#requester = new ClearRequester(options)
  }

  /** Runs `fun` and returns what it returned (for a failing runner, Salt's exception text). */
  async cmd(fun: string, arg: readonly unknown[] = [], kwarg: Record<string, unknown> = {}, options: RunnerCallOptions = {}): Promise<unknown> {
    return (await this.cmdFull(fun, arg, kwarg, options)).return
  }

  /** Runs `fun` and returns `{jid, return, success}`. */
  async cmdFull(fun: string, arg: readonly unknown[] = [], kwarg: Record<string, unknown> = {}, options: RunnerCallOptions = {}): Promise<RunnerResult> {
    // The request must not be retried (a second manage.down removekeys=True is a second run).
    const sendOptions: { timeout: number; tries: number; signal?: AbortSignal; credentials?: ClientCredentials; origin?: RequestOrigin } = {
      timeout: await this.#waitMs(kwarg),
      tries: 1,
    }
    if (options.signal !== undefined) sendOptions.signal = options.signal
    if (options.credentials !== undefined) sendOptions.credentials = options.credentials
    if (options.origin !== undefined) sendOptions.origin = options.origin
    const load = { cmd: 'runner', fun, arg: [...arg], kwarg, user: currentUser() }
    const reply = (await this.#requester.request(load, sendOptions, RunnerError)) as Partial<RunnerResult> | null
    if (typeof reply !== 'object' || reply === null || typeof reply.jid !== 'string' || !('return' in reply)) {
      throw new RunnerError(`the master answered runner ${fun} with ${JSON.stringify(reply)?.slice(0, 200)}, not {jid, return}`, { fun })
    }
    return { jid: reply.jid, return: reply.return, success: reply.success !== false }
  }

  /**
   * Runs `fun` as Salt's `salt-run` does: its `salt/run/<jid>/progress` events reach `onProgress` as
   * they fire, then it resolves with the run's return (`salt/run/<jid>/ret`). `events` must be this
   * master's bus, connected; the wait for the return is bounded as {@link cmdFull}'s request is.
   */
  async cmdFollowed(
    fun: string,
    arg: readonly unknown[],
    kwarg: Record<string, unknown>,
    events: RunEventSource,
    options: FollowedCallOptions,
  ): Promise<RunnerResult> {
    const waitMs = await this.#waitMs(kwarg)
    const controller = new AbortController()
    const signals = options.signal === undefined ? [controller.signal] : [controller.signal, options.signal]
    // Subscribed before the call, so no event of the run can fire before this reader exists; told when the
    // master had to drop events for it, since the return may be among them.
    const runs = events.iter({ match: `^salt/run/|^${BUS_DROPPED_TAG}$`, matchType: 'regex', signal: AbortSignal.any(signals) })
    const callOptions: RunnerCallOptions = { ...options }
    const timer = setTimeout(() => controller.abort(), waitMs)
    try {
      const { jid } = await this.cmdAsync(fun, arg, kwarg, callOptions)
      for await (const { tag, data } of runs) {
        if (tag === tags.runProgress(jid)) options.onProgress(data)
        else if (tag === tags.runReturn(jid)) return { jid, return: data['return'], success: data['success'] !== false }
        else if (tag === BUS_DROPPED_TAG)
          throw new RunnerError(
            `${typeof data['count'] === 'number' ? `the master's event bus dropped ${data['count']} events for this reader` : "this reader lost its connection to the master's event bus"} while runner ${fun} (jid ${jid}) ran; its return may be among the events it missed`,
            { fun },
          )
      }
      options.signal?.throwIfAborted()
      throw new RunnerError(`runner ${fun} (jid ${jid}) did not return within ${waitMs} ms`, { fun })
    } finally {
      clearTimeout(timer)
      controller.abort()
    }
  }

  /** How long a call may wait: the runner's own wait for minions (`timeout`, then a find_job round), and a margin. */
  async #waitMs(kwarg: Record<string, unknown>): Promise<number> {
    const { opts } = await this.#requester.connect()
    const timeouts = timeoutsFromConfig(opts)
    const seconds = (name: string, fallbackMs: number): number => {
      const value = kwarg[name] === undefined ? undefined : Number(kwarg[name])
      return value !== undefined && Number.isFinite(value) && value >= 0 ? msFromSeconds(value) : fallbackMs
    }
    const waitMs = seconds('timeout', timeouts.timeoutMs) + seconds('gather_job_timeout', timeouts.gatherJobTimeoutMs)
    return Math.max(this.#requester.options.requestTimeout ?? REQUEST_MARGIN_MS, waitMs + REQUEST_MARGIN_MS)
  }

  /**
   * Salt's runner_async: the master checks the runner and the caller, answers `{tag, jid}` at once and runs
   * it in the background; its return comes as `salt/run/<jid>/ret` on the bus.
   */
  async cmdAsync(fun: string, arg: readonly unknown[] = [], kwarg: Record<string, unknown> = {}, options: RunnerCallOptions = {}): Promise<AsyncResult> {
    const load = { cmd: 'runner', fun, arg: [...arg], kwarg, user: currentUser(), asynchronous: true }
    const reply = (await this.#requester.request(load, { tries: 1, ...options }, RunnerError)) as Partial<AsyncResult> | null
    return checkAsyncReply(reply, `runner ${fun}`, RunnerError)
  }

  close(): Promise<void> {
    return this.#requester.close()
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}

/** Checks an asynchronous call's `{tag, jid}` answer; `what` names the call in the error. */
export function checkAsyncReply(reply: unknown, what: string, ErrorClass: typeof RunnerError): AsyncResult {
  const value = reply as Partial<AsyncResult> | null
  if (typeof value !== 'object' || value === null || typeof value.tag !== 'string' || typeof value.jid !== 'string') {
    throw new ErrorClass(`the master answered ${what} with ${JSON.stringify(reply)?.slice(0, 200)}, not {tag, jid}`)
  }
  return { tag: value.tag, jid: value.jid }
}
