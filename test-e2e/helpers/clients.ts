import { LocalClient, RunnerClient } from '@brine/client'
import type { Fleet } from '@brine/harness'

/** The clients a test file holds to one fleet's master. */
export interface MasterClients {
  local: LocalClient
  runner: RunnerClient
}

/**
 * A LocalClient and a RunnerClient per fleet, made at the first call and reused: for the files whose jobs and runners
 * are a means, not what they test (the CLI's own output has its e2e files), so each call costs a request instead of a
 * `brine` or `brine-run` process. Close a fleet's clients before it stops.
 */
export class FleetClients {
  readonly #made = new Map<Fleet, MasterClients>()

  of(fleet: Fleet): MasterClients {
    let made = this.#made.get(fleet)
    if (made === undefined) {
      made = { local: new LocalClient({ configDir: fleet.masterConfigDir }), runner: new RunnerClient({ configDir: fleet.masterConfigDir }) }
      this.#made.set(fleet, made)
    }
    return made
  }

  /** Closes the clients of `fleet`, or of every fleet. */
  async close(fleet?: Fleet): Promise<void> {
    const fleets = fleet === undefined ? [...this.#made.keys()] : [fleet]
    for (const each of fleets) {
      const made = this.#made.get(each)
      this.#made.delete(each)
      if (made !== undefined) await Promise.all([made.local.close(), made.runner.close()])
    }
  }

  /**
   * What `brine <tgt> <fun> <arg…> --show-jid --out json --static` yields: the jid and every expected minion's
   * return, waited for as the CLI waits (the master's timeout and gather_job_timeout), and whether the CLI would
   * exit 0: every expected minion returned, each with retcode 0. `timeout` (ms) is the CLI's `-t` (in seconds there),
   * `kwarg` its `key=value` arguments.
   */
  async run(
    fleet: Fleet,
    tgt: string,
    fun: string,
    arg: readonly unknown[] = [],
    options: { timeout?: number; kwarg?: Record<string, unknown> } = {},
  ): Promise<{ jid: string; returns: Record<string, unknown>; allSucceeded: boolean }> {
    await using job = await this.of(fleet).local.runJob(tgt, fun, arg, { listen: true, timeout: options.timeout, kwarg: options.kwarg })
    const returns: Record<string, unknown> = {}
    let allSucceeded = job.expectsReturns
    for await (const item of job.returns()) {
      if (item.status === 'returned') returns[item.id] = item.ret
      if (item.status !== 'returned' || item.retcode !== 0) allSucceeded = false
    }
    return { jid: job.jid, returns, allSucceeded }
  }

  /** What `brine-run <fun> [key=value…] --out json` prints, parsed: the runner's return as JSON carries it. */
  async runner(fleet: Fleet, fun: string, arg: readonly unknown[] = [], kwarg: Record<string, unknown> = {}): Promise<unknown> {
    return JSON.parse(JSON.stringify(await this.of(fleet).runner.cmd(fun, arg, kwarg))) as unknown
  }
}

/**
 * `fn` with clients of `fleet`'s master made for it alone and closed after: for a master that is killed or restarted
 * between calls, where clients held across it would first have to notice that it went away.
 */
export async function withClients<T>(fleet: Fleet, fn: (clients: FleetClients, made: MasterClients) => Promise<T>): Promise<T> {
  const clients = new FleetClients()
  try {
    return await fn(clients, clients.of(fleet))
  } finally {
    await clients.close()
  }
}
