import { join } from 'node:path'
import { loadConfig } from '@brine/config'
import { CryptCache } from '@brine/crypt'
import { Minion } from '@brine/minion'
import { createLogger, type Logger, type LogLevel } from '@brine/core'

export interface SwarmRunOptions {
  /** Directory holding one config directory per minion: `<dir>/<prefix><index>/minion`. */
  dir: string
  /** Id prefix; instance `i` reads `<dir>/<prefix><i>`. */
  prefix: string
  count: number
  /** Instances started at once (default 50), so keys, grains and connects do not all land together. */
  batch?: number
  /** Log level of every instance (default warning); each logs as `[minion <id>]`. */
  logLevel?: LogLevel
  /** Where the instances log (default stderr). */
  write?: (line: string) => void
}

/**
 * Many real {@link Minion} instances in one process, as Salt's tests/minionswarm.py runs many
 * minions on one machine: each has its own id, config, keys (pki_dir), cache (spool), request and
 * publish sockets and job execution; the Node process (and its event loop) is shared, and so is
 * one {@link CryptCache} the swarm owns: every instance receives the same publish, and with the
 * cache only the first verifies, decrypts and decodes it (each job still gets its own copy of
 * the arguments).
 */
export class MinionSwarm {
  readonly minions: Minion[] = []
  /** The publish-opening cache all instances share (its stats() show how much it saved). */
  readonly cache = new CryptCache()
  #stopping: Promise<void> | undefined

  constructor(private readonly options: SwarmRunOptions) {}

  /** Loads every instance's config and starts them, `batch` at a time. Resolves once all have started. */
  async start(): Promise<void> {
    const { dir, prefix, count } = this.options
    await raiseZeroMqSocketLimit(count * 8 + 64)
    const batch = Math.max(1, this.options.batch ?? 50)
    for (let first = 0; first < count; first += batch) {
      if (this.#stopping !== undefined) return
      const indices = Array.from({ length: Math.min(batch, count - first) }, (_, offset) => first + offset)
      await Promise.all(
        indices.map(async (index) => {
          const { opts } = await loadConfig('minion', { configDir: join(dir, `${prefix}${index}`) })
          const logger: Logger = createLogger({ level: this.options.logLevel ?? 'warning', name: `minion ${String(opts.id)}`, write: this.options.write })
          const minion = new Minion(opts, { logger, cryptCache: this.cache })
          this.minions.push(minion)
          await minion.start()
        }),
      )
    }
  }

  /** Stops every instance (in parallel). Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= Promise.allSettled(this.minions.map((minion) => minion.stop())).then(() => undefined)
    return this.#stopping
  }
}

/**
 * libzmq's context allows 1,023 sockets by default and each ZeroMQ minion holds about six (dealer,
 * subscriber, their monitors and monitor pairs), so a swarm of more than ~170 would fail with "Too many open file
 * descriptors". All instances share zeromq's global context: raise its limit once, before any starts.
 */
async function raiseZeroMqSocketLimit(wanted: number): Promise<void> {
  let zmq: { context: { maxSockets: number; readonly maxSocketsLimit: number } }
  try {
    zmq = (await import('zeromq')) as unknown as typeof zmq
  } catch {
    return // no ZeroMQ here: only TCP minions can run
  }
  if (zmq.context.maxSockets < wanted) zmq.context.maxSockets = Math.min(wanted, zmq.context.maxSocketsLimit)
}
