/**
 * How a minion uses its masters (Salt's `master_type`). A policy opens the links it wants through
 * the minion's factory, hands each one's publishes to the minion, and closes them on stop. `str`
 * (the default) uses every master at once; with one master it is simply that master. `failover`
 * (one master at a time, `master_alive_interval`, `master_failback`) is another policy on this
 * same interface and is not built yet.
 */
import type { MasterLink } from './master-link.js'

export interface MasterPolicyContext {
  /** The masters from config (`master`), in order. */
  readonly masters: readonly string[]
  /** Builds (does not start) the link to one master. */
  open(host: string): MasterLink
  /** Feeds a started link's publishes to the job runner until the link closes. */
  serve(link: MasterLink): void
}

export interface MasterPolicy {
  /** Salt's `master_type` this policy implements. */
  readonly type: string
  /** The links open now (what `Minion.links` shows). */
  readonly links: readonly MasterLink[]
  /** Opens and starts the links it uses; resolves once they are connecting (not authenticated). */
  start(context: MasterPolicyContext): Promise<void>
  /** Closes every link it opened. Idempotent. */
  close(): Promise<void>
}

/**
 * `master_type: str`: connected to every master at once. A job published by several runs once
 * (the job runner remembers jids) and returns to the master whose publish arrived first.
 */
export class AllMastersPolicy implements MasterPolicy {
  readonly type = 'str'
  readonly #links: MasterLink[] = []

  get links(): readonly MasterLink[] {
    return this.#links
  }

  async start(context: MasterPolicyContext): Promise<void> {
    for (const host of context.masters) this.#links.push(context.open(host))
    await Promise.all(this.#links.map((link) => link.start()))
    for (const link of this.#links) context.serve(link)
  }

  async close(): Promise<void> {
    await Promise.all(this.#links.map((link) => link.close()))
  }
}
