import { readdirSync, writeFileSync } from 'node:fs'
import { setPriority } from 'node:os'
import { join } from 'node:path'
import { loadConfig, prependRootDir, virtualFilesystemOf, type MinionConfig } from '@brine/config'
import { CryptCache, loadOrCreateKeys } from '@brine/crypt'
import { hostGrains, Minion } from '@brine/minion'
import { BrineError, createLogger, registerErrors, type Logger, type LogLevel } from '@brine/core'

/** A swarm's shared config that cannot be shared: it sets a key each instance must have its own of. */
export class SwarmConfigError extends BrineError {
  override name = 'SwarmConfigError'
}
registerErrors({ SwarmConfigError })

/** Where a swarm's instances are and what they share. */
/** Instances a swarm starts (or gives keys) at once, unless its layout says otherwise. */
export const DEFAULT_SWARM_BATCH = 50

export interface SwarmLayout {
  /** The directory holding the `minion` config file every instance shares; it must set neither `id` nor `root_dir`. */
  configDir: string
  /** Where the instances live: instance `i` is minion `<prefix><i>`, its root_dir `<dir>/<prefix><i>`. */
  dir: string
  prefix: string
  count: number
  /** Instances started (or given keys) at once (default {@link DEFAULT_SWARM_BATCH}), so keys, grains and connects do not all land together. */
  batch?: number
}

export interface SwarmRunOptions extends SwarmLayout {
  /** Log level of every instance (default warning); each logs as `[minion <id>]`. */
  logLevel?: LogLevel
  /** Where the instances log (default stderr). */
  write?: (line: string) => void
}

/**
 * Reads a swarm's shared config once, with every check `loadConfig` makes. Each instance's config is a copy of it
 * with its own id and root_dir ({@link instanceConfig}): one YAML parse per swarm, not one per minion.
 */
export async function loadSwarmConfig(configDir: string): Promise<MinionConfig> {
  const { opts, sources } = await loadConfig('minion', { configDir })
  for (const key of ['id', 'root_dir']) {
    const source = sources.get(key)
    if (source !== undefined) {
      throw new SwarmConfigError(
        `${source.file}${source.line === undefined ? '' : `:${source.line}`}: a swarm's shared config must not set ${key}: each instance has its own`,
        {
          key,
          file: source.file,
        },
      )
    }
  }
  return opts
}

/**
 * Instance `id`'s config: a deep copy of the shared one (loaded without a root_dir, so its paths are the defaults or
 * what the file set) with its id and its root_dir prepended to every path key, as `loadConfig` does with a root_dir.
 */
export function instanceConfig(shared: MinionConfig, id: string, rootDir: string): MinionConfig {
  const virtual = virtualFilesystemOf(rootDir)
  if (virtual !== undefined) throw new SwarmConfigError(`swarm instance ${id}: root_dir ${rootDir} is on ${virtual}, a virtual filesystem`, { id })
  const opts = structuredClone(shared) as MinionConfig & Record<string, unknown>
  opts.id = id
  opts.root_dir = rootDir
  prependRootDir(opts)
  return opts
}

/** The instances of `layout`, `batch` at a time: each one's index and config. */
async function forEachInstance(
  layout: SwarmLayout,
  shared: MinionConfig,
  run: (opts: MinionConfig) => Promise<void>,
  stopped = (): boolean => false,
): Promise<void> {
  const { dir, prefix, count } = layout
  const batch = Math.max(1, layout.batch ?? DEFAULT_SWARM_BATCH)
  for (let first = 0; first < count; first += batch) {
    if (stopped()) return
    const indices = Array.from({ length: Math.min(batch, count - first) }, (_, offset) => first + offset)
    await Promise.all(indices.map((index) => run(instanceConfig(shared, `${prefix}${index}`, join(dir, `${prefix}${index}`)))))
  }
}

/**
 * Lowers this process's scheduling priority to `nice` (0–19). A swarm stands in for machines of their own; at tens of
 * thousands of minions on the master's cores, its processes would otherwise take the CPU of the master it measures.
 * On Linux a nice value is per thread (V8's helper threads exist before this runs; threads made later inherit it), and
 * with autogroup scheduling it ranks a thread only within its session's group: a swarm is a daemon in a session of its
 * own, so the group's nice (`/proc/self/autogroup`) is what ranks it against the master's.
 */
export function lowerPriority(nice: number): void {
  let threads: number[]
  try {
    threads = readdirSync('/proc/self/task').map(Number)
  } catch {
    threads = [0]
  }
  for (const thread of threads) {
    try {
      setPriority(thread, nice)
    } catch {
      // A thread that ended since the listing has nothing left to rank.
    }
  }
  try {
    writeFileSync('/proc/self/autogroup', String(nice))
  } catch {
    // No autogroup scheduling here (not Linux, or a kernel without it): the threads' nice values rank them.
  }
}

/**
 * Makes every instance's key pairs in its pki_dir, as each minion's first start would (the same code: `loadOrCreateKeys`),
 * keeping those already there; how many were made. The bench does this before it times a launch: a real minion makes its
 * keys once, at its first start, on its own machine, while a swarm would make a thousand of them one after the other.
 */
export async function makeSwarmKeys(layout: SwarmLayout): Promise<{ created: number }> {
  const shared = await loadSwarmConfig(layout.configDir)
  let created = 0
  await forEachInstance(layout, shared, async (opts) => {
    if ((await loadOrCreateKeys(opts.pki_dir, 'minion')).created) created++
  })
  return { created }
}

/**
 * How many opened publishes (and verified signatures) a swarm's shared cache keeps. Every instance opens every
 * publish, but one instance's socket read can hold a whole burst: it opens all of them before the next instance
 * opens the first, so the cache must hold as many publishes as are in flight at once, or each instance finds the
 * first ones evicted and verifies, decrypts and decodes every publish again (CryptCache's default of 64 is a lone
 * minion's). This holds the bench's overload burst of 200 with room to spare.
 */
export const SWARM_PUBLISHES_KEPT = 1024

/**
 * Many real {@link Minion} instances in one process, as Salt's tests/minionswarm.py runs many
 * minions on one machine: each has its own id, config, keys (pki_dir), cache (spool), request and
 * publish sockets and job execution; the Node process (and its event loop) is shared, and so are what a
 * host's minions would compute alike: the config file, read once ({@link loadSwarmConfig}), the host's grains,
 * computed once (each instance copies them and adds its own id), and one {@link CryptCache}: every instance
 * receives the same publish, and with the cache only the first verifies, decrypts and decodes it (each job still
 * gets its own copy of the arguments).
 */
export class MinionSwarm {
  readonly minions: Minion[] = []
  /** The publish-opening cache all instances share (its stats() show how much it saved). */
  readonly cache = new CryptCache({ openedPublishes: SWARM_PUBLISHES_KEPT, verifiedSignatures: SWARM_PUBLISHES_KEPT })
  #stopping: Promise<void> | undefined

  constructor(private readonly options: SwarmRunOptions) {}

  /** Loads the shared config and starts every instance, `batch` at a time. Resolves once all have started. */
  async start(): Promise<void> {
    const shared = await loadSwarmConfig(this.options.configDir)
    const host = hostGrains()
    await forEachInstance(
      this.options,
      shared,
      async (opts) => {
        const logger: Logger = createLogger({ level: this.options.logLevel ?? 'warning', name: `minion ${String(opts.id)}`, write: this.options.write })
        const minion = new Minion(opts, { logger, cryptCache: this.cache, hostGrains: host })
        this.minions.push(minion)
        await minion.start()
      },
      () => this.#stopping !== undefined,
    )
  }

  /** Stops every instance (in parallel). Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= Promise.allSettled(this.minions.map((minion) => minion.stop())).then(() => undefined)
    return this.#stopping
  }
}
