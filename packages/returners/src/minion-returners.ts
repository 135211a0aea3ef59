import type { JobCache } from '@brine/common'
import type { JobLoad, ReturnLoad } from '@brine/protocol'
import type { Logger } from '@brine/core'
import { UnknownReturnerError } from './errors.js'
import { LocalJobCache } from './local-cache.js'

/**
 * The returners a job may name in its `ret` (Salt's `salt --return a,b`): where a minion sends a return
 * besides its master. `local_cache` is a job cache of the minion's own, under its `cachedir`.
 */
export const RETURNERS = ['local_cache'] as const
export type ReturnerName = (typeof RETURNERS)[number]

const isReturnerName = (name: string): name is ReturnerName => (RETURNERS as readonly string[]).includes(name)

/** The names in a job's `ret`, comma-separated as Salt writes them, each once; `''` names none. */
export function returnerNames(ret: string): string[] {
  return [
    ...new Set(
      ret
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== ''),
    ),
  ]
}

/** Throws UnknownReturnerError for the first name in `ret` that Brine has no returner for (the master checks a publish with it). */
export function checkReturners(ret: string): void {
  for (const name of returnerNames(ret)) if (!isReturnerName(name)) throw new UnknownReturnerError(name, RETURNERS)
}

/** What a returner is told of the job besides its return (what the job cache stores as the job's load). */
export type ReturnedJob = Pick<JobLoad, 'jid' | 'fun' | 'arg' | 'tgt' | 'tgt_type' | 'user' | 'ret'>

export interface MinionReturnersOptions {
  /** The minion's `cachedir`: `local_cache` keeps its job cache in `<cachedir>/jobs`. */
  cachedir: string
  logger?: Logger
}

/**
 * One minion's returners, each opened at its first use and kept open until close(). A return that a
 * returner cannot take is logged and dropped there, as Salt's minion does: the master has it already.
 */
export class MinionReturners {
  readonly #options: MinionReturnersOptions
  readonly #opened = new Map<ReturnerName, Promise<JobCache>>()
  readonly #sending = new Set<Promise<void>>()
  #closed = false

  constructor(options: MinionReturnersOptions) {
    this.#options = options
  }

  /** Sends `ret` to each returner `job.ret` names; resolves when each has stored it or failed (logged). */
  send(job: ReturnedJob, ret: ReturnLoad): Promise<void> {
    if (job.ret === '' || this.#closed) return Promise.resolve()
    const sending = Promise.all(returnerNames(job.ret).map((name) => this.#sendOne(name, job, ret))).then(() => {})
    this.#sending.add(sending)
    return sending.finally(() => this.#sending.delete(sending))
  }

  /** Waits for the returns being sent, then closes every returner opened. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true
    while (this.#sending.size > 0) await Promise.allSettled([...this.#sending])
    const opened = [...this.#opened.values()]
    this.#opened.clear()
    await Promise.allSettled(opened.map(async (cache) => (await cache).close()))
  }

  async #sendOne(name: string, job: ReturnedJob, ret: ReturnLoad): Promise<void> {
    const logger = this.#options.logger
    if (!isReturnerName(name)) {
      logger?.error(`returner ${name} of job ${job.jid}: ${new UnknownReturnerError(name, RETURNERS).message}`)
      return
    }
    try {
      const cache = await this.#open(name)
      const { jid, fun, arg, tgt, tgt_type, user } = job
      await cache.saveJob(jid, { jid, fun, arg, tgt, tgt_type, user, ret: job.ret }, [ret.id])
      await cache.saveReturn(jid, ret.id, ret)
    } catch (error) {
      logger?.error(`returner ${name}: the return of job ${job.jid} was not stored: ${(error as Error).message}`)
    }
  }

  #open(name: ReturnerName): Promise<JobCache> {
    let opening = this.#opened.get(name)
    if (opening === undefined) {
      opening = new LocalJobCache({ cachedir: this.#options.cachedir, logger: this.#options.logger?.child(name) }).open()
      // A cache that failed to open is tried again by the next return.
      opening.catch(() => this.#opened.delete(name))
      this.#opened.set(name, opening)
    }
    return opening
  }
}
