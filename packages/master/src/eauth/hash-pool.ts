import { threadId } from 'node:worker_threads'
import bcrypt from 'bcryptjs'
import { LoginBusyError } from '@brine/common'
import type { HashVerdict } from '../request-worker.js'
import type { RequestPool } from '../worker-pool.js'

/** Checks a password against a bcrypt hash: where the CPU goes when a login is checked. */
export interface PasswordHasher {
  compareBcrypt(password: string, hash: string): Promise<boolean>
}

/** On the calling thread (tests, `eauth_hash_threads: 0`). */
export const inlineHasher: PasswordHasher = { compareBcrypt: (password, hash) => bcrypt.compare(password, hash) }

export interface PasswordHashPoolOptions {
  /** The threads that hash: a ThreadPool of its own, so logins never queue behind (or ahead of) job crypto. */
  pool: RequestPool
  /** Hashes running at once (at least 1; the pool's size when it has threads). */
  concurrency: number
  /** Hashes waiting for a slot, at most; beyond it a login is refused with LoginBusyError. */
  backlog: number
}

/** What the pool has done, for `stats()`: what tests assert instead of timings. */
export interface PasswordHashStats {
  hashed: number
  /** Of those, checked on a thread other than the caller's (the master's event loop). */
  offThread: number
  refused: number
  running: number
  waiting: number
}

/**
 * bcrypt checks (ten of milliseconds of CPU each, by design) off the master's event loop, with bounded
 * concurrency and a bounded wait: a storm of logins occupies at most `concurrency` hashing threads and
 * `backlog` queued checks, and is refused beyond that, so jobs, returns and auth on the request workers
 * keep their threads and the event loop.
 */
export class PasswordHashPool implements PasswordHasher {
  readonly #o: PasswordHashPoolOptions
  readonly #waiting: Array<() => void> = []
  #running = 0
  #next = 0
  readonly #stats = { hashed: 0, offThread: 0, refused: 0 }

  constructor(options: PasswordHashPoolOptions) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1)
      throw new RangeError(`hash concurrency must be a positive integer, got ${options.concurrency}`)
    this.#o = options
  }

  stats(): PasswordHashStats {
    return { ...this.#stats, running: this.#running, waiting: this.#waiting.length }
  }

  async compareBcrypt(password: string, hash: string): Promise<boolean> {
    if (this.#running >= this.#o.concurrency) {
      if (this.#waiting.length >= this.#o.backlog) {
        this.#stats.refused++
        throw new LoginBusyError(this.#running, this.#waiting.length)
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve))
    } else {
      this.#running++
    }
    try {
      // Round robin over the threads: ThreadPool picks a thread by hashing the key.
      const verdict = (await this.#o.pool.run(`bcrypt-${this.#next++}`, { op: 'bcrypt-compare', password, hash })) as unknown as HashVerdict
      this.#stats.hashed++
      if (verdict.threadId !== threadId) this.#stats.offThread++
      return verdict.match
    } finally {
      // A waiting check takes this slot over; the running count only drops when nobody waits.
      const next = this.#waiting.shift()
      if (next !== undefined) next()
      else this.#running--
    }
  }

  close(): Promise<void> {
    return this.#o.pool.close()
  }
}
