import { mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createHash, randomBytes } from 'node:crypto'
import type { Grains } from '@brine/targeting'
import { isValidMinionId, validateMinionId } from '@brine/crypt'
import { silentLogger, type Logger } from '@brine/core'

/** A write in progress for one minion; `latest` is what must be on disk when `done` resolves. */
interface Flight {
  latest: string
  done: Promise<void>
}

const digest = (json: string): string => createHash('sha256').update(json).digest('base64')

/**
 * Minions' grains as they last reported them (`_grains`), in memory and at
 * `<cachedir>/minions/<id>/grains` (JSON), so grain targeting still knows them after a restart.
 *
 * It is a cache, rebuilt by the next `_grains` a minion sends, so files are replaced atomically
 * (temporary file + rename) but never fsynced: a crash can lose a recent write, never tear one.
 * A reconnecting swarm re-sends identical grains, so unchanged grains are not written again, and
 * grains that arrive while a write for the same minion is under way replace each other: only the
 * latest is written next.
 */
/** Grains files read at once while loading the cache. */
const GRAINS_LOAD_PARALLEL = 64

export class GrainsCache {
  readonly dir: string
  readonly #grains = new Map<string, Grains>()
  /** sha256 of the JSON each minion's file holds (a digest, not the text, to keep memory flat). */
  readonly #onDisk = new Map<string, string>()
  readonly #flights = new Map<string, Flight>()
  /** Minions whose directory this cache has seen or made: a new minion's directory is made before its first write. */
  readonly #dirs = new Set<string>()
  readonly #logger: Logger
  /** The load under way (or the last one): what {@link whenLoaded} waits for. */
  #loading: Promise<void> = Promise.resolve()
  /** Minions set or deleted while a load runs: what the load read of them is older, and is not kept. */
  #touched: Set<string> | undefined
  /** Files actually written (for tests and benchmarks). */
  writes = 0

  constructor(cachedir: string, logger: Logger = silentLogger) {
    this.dir = join(cachedir, 'minions')
    this.#logger = logger
  }

  /**
   * Reads every cached grains file; unreadable ones are logged and skipped. The cache serves meanwhile (a restarting
   * master listens without waiting for a thousand files): grains set or deleted during the load win over what it read,
   * and {@link whenLoaded} tells a reader of all of them (a publish's targeting) when they are in.
   */
  load(): Promise<void> {
    const touched = new Set<string>()
    this.#touched = touched
    this.#loading = this.#load(touched).finally(() => {
      if (this.#touched === touched) this.#touched = undefined
    })
    return this.#loading
  }

  /** Resolves once the grains on disk are loaded (at once when no load is under way). */
  whenLoaded(): Promise<void> {
    return this.#loading
  }

  async #load(touched: ReadonlySet<string>): Promise<void> {
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch {
      return
    }
    const loadOne = async (id: string): Promise<void> => {
      const file = join(this.dir, id, 'grains')
      try {
        const text = await readFile(file, 'utf8')
        const value: unknown = JSON.parse(text)
        if (touched.has(id)) return
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
          this.#grains.set(id, value as Grains)
          this.#onDisk.set(id, digest(text))
        }
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.#logger.warning(`ignoring grains cache ${file}: ${String(error)}`)
      }
    }
    // Read in parallel, a bounded number at a time: one after another, a thousand minions' files
    // kept a restarting master from serving for most of a second.
    const ids = names.filter((id) => isValidMinionId(id))
    for (const id of ids) this.#dirs.add(id)
    for (let first = 0; first < ids.length; first += GRAINS_LOAD_PARALLEL) {
      await Promise.all(ids.slice(first, first + GRAINS_LOAD_PARALLEL).map(loadOne))
    }
  }

  get(id: string): Grains | undefined {
    return this.#grains.get(id)
  }

  /**
   * Caches `grains` for `id` (validated before it becomes a path). Resolves once the file holds
   * these grains or newer ones; at once when the file already holds identical grains.
   */
  set(id: string, grains: Grains): Promise<void> {
    try {
      validateMinionId(id)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    this.#touched?.add(id)
    const json = JSON.stringify(grains)
    // What is kept is what the file holds (and what a restarted master loads), parsed afresh: the decoded request's
    // objects and strings are views that keep the whole request alive, and cost about three times as much.
    this.#grains.set(id, JSON.parse(json) as Grains)
    const flight = this.#flights.get(id)
    if (flight !== undefined) {
      flight.latest = json
      return flight.done
    }
    if (this.#onDisk.get(id) === digest(json)) return Promise.resolve()
    const started: Flight = { latest: json, done: Promise.resolve() }
    this.#flights.set(id, started)
    started.done = this.#flush(id, started)
    return started.done
  }

  /** Writes `flight.latest` until it stops changing under the write (coalescing what came meanwhile). */
  async #flush(id: string, flight: Flight): Promise<void> {
    try {
      for (;;) {
        const json = flight.latest
        const hash = digest(json)
        if (this.#onDisk.get(id) === hash) return
        this.#onDisk.delete(id) // unknown until the rename succeeds
        await this.#write(id, json)
        this.#onDisk.set(id, hash)
      }
    } finally {
      this.#flights.delete(id)
    }
  }

  async #write(id: string, json: string): Promise<void> {
    const dir = join(this.dir, id)
    const temp = join(dir, `.grains.${randomBytes(6).toString('hex')}.tmp`)
    try {
      // A new minion (a fleet's launch brings a thousand): its directory first, rather than a write that fails without it.
      if (!this.#dirs.has(id)) {
        await mkdir(dir, { recursive: true, mode: 0o700 })
        this.#dirs.add(id)
      }
      try {
        await writeFile(temp, json, { mode: 0o600, flag: 'wx' })
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
        // The directory went away meanwhile (removed by hand): made again.
        await mkdir(dir, { recursive: true, mode: 0o700 })
        await writeFile(temp, json, { mode: 0o600, flag: 'wx' })
      }
      await rename(temp, join(dir, 'grains'))
    } catch (error) {
      await unlink(temp).catch(() => {})
      throw error
    }
    this.writes++
  }

  delete(id: string): void {
    this.#touched?.add(id)
    this.#grains.delete(id)
    // Forget what the file holds so grains sent again after a re-accept are written, whatever happened to it meanwhile.
    this.#onDisk.delete(id)
  }
}
