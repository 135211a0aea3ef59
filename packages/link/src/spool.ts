/**
 * The return spool: returns the master did not acknowledge wait here, one msgpack file per jid,
 * until they are delivered. Files are written atomically (temporary file, fsync, rename) with
 * mode 0600, so a crash leaves either the whole return or nothing, and a half-written file is
 * never mistaken for a return.
 */
import { mkdir, readdir, readFile, rename, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { decode, encode, type Logger } from '@brine/core'
import type { ReturnLoad } from '@brine/protocol'
import { writeFileAtomic } from '@brine/crypt'
import { SpoolFileError } from './errors.js'

export const SPOOL_FILE_MODE = 0o600
export const SPOOL_DIR_MODE = 0o700
const SUFFIX = '.msgpack'

/** `<cachedir>/minion/spool`: where the daemon spools returns. */
export const spoolDir = (cachedir: string): string => join(cachedir, 'minion', 'spool')

/** File name for a jid; jids are digits, anything else is hex-encoded so it can never leave the directory. */
function fileName(jid: string): string {
  const safe = /^[0-9A-Za-z_-]{1,64}$/.test(jid) ? jid : `x${Buffer.from(jid).toString('hex').slice(0, 120)}`
  return `${safe}${SUFFIX}`
}

const isNotFound = (error: unknown): boolean => (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT'

/**
 * Spool files written at once in this process, over all its spools. A master that refuses a burst (busy) has every
 * minion spool every return at once, and a process hosting many minions (brine-swarm) ran out of file descriptors
 * (EMFILE) with hundreds of writes open: each such return was lost. Past the bound a write waits for a slot.
 */
export const SPOOL_WRITES_AT_ONCE = 32

/** Slots of {@link SPOOL_WRITES_AT_ONCE}: a freed slot passes straight to the oldest waiting write. */
class WriteSlots {
  #used = 0
  readonly #waiting: Array<() => void> = []

  constructor(readonly size: number) {}

  async run<T>(write: () => Promise<T>): Promise<T> {
    if (this.#used < this.size) this.#used++
    else await new Promise<void>((resolve) => this.#waiting.push(resolve))
    try {
      return await write()
    } finally {
      const next = this.#waiting.shift()
      if (next === undefined) this.#used--
      else next()
    }
  }
}

const writeSlots = new WriteSlots(SPOOL_WRITES_AT_ONCE)

/** How a spool writes a file: atomically (the default), or a test's stand-in. */
export type SpoolFileWriter = (file: string, bytes: Uint8Array, options: { mode: number }) => Promise<void>

export class ReturnSpool {
  readonly dir: string
  readonly #logger: Logger
  readonly #writeFile: SpoolFileWriter
  /** The directory was made (or found) by this spool: a master that is behind has every return spooled, so no mkdir each time. */
  #dirReady = false

  constructor(dir: string, logger: Logger, writeFile: SpoolFileWriter = writeFileAtomic) {
    this.dir = dir
    this.#logger = logger
    this.#writeFile = writeFile
  }

  async #ensureDir(): Promise<void> {
    if (this.#dirReady) return
    await mkdir(this.dir, { recursive: true, mode: SPOOL_DIR_MODE })
    this.#dirReady = true
  }

  /**
   * Writes `load` to its jid's file (replacing an older copy) and returns the file's path. A write
   * that fails (a full disk) leaves no temporary file behind and the old copy, if any, in place.
   */
  async write(load: ReturnLoad): Promise<string> {
    await this.#ensureDir()
    const file = join(this.dir, fileName(load.jid))
    // The returner has already cut the load to fit a frame; the file itself needs no frame limit.
    const bytes = encode(load, Number.MAX_SAFE_INTEGER)
    await writeSlots.run(async () => {
      try {
        await this.#writeFile(file, bytes, { mode: SPOOL_FILE_MODE })
      } catch (error) {
        if (!isNotFound(error)) throw error
        // The directory went away since (an operator cleaned the cache): make it again, once.
        this.#dirReady = false
        await this.#ensureDir()
        await this.#writeFile(file, bytes, { mode: SPOOL_FILE_MODE })
      }
    })
    return file
  }

  /** Spooled files, oldest jid first (jids are timestamps, so name order is time order). */
  async list(): Promise<string[]> {
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch (error) {
      if (isNotFound(error)) return []
      throw error
    }
    return names
      .filter((name) => name.endsWith(SUFFIX) && !name.startsWith('.'))
      .sort()
      .map((name) => join(this.dir, name))
  }

  /** Reads one spooled return; SpoolFileError when it is not one. */
  async read(file: string): Promise<ReturnLoad> {
    let load: unknown
    try {
      load = decode(await readFile(file))
    } catch (error) {
      throw new SpoolFileError(file, 'is not readable msgpack', { cause: error })
    }
    const candidate = load as Partial<ReturnLoad> | null
    if (typeof candidate !== 'object' || candidate === null || candidate.cmd !== '_return' || typeof candidate.jid !== 'string') {
      throw new SpoolFileError(file, 'is not a _return load')
    }
    return candidate as ReturnLoad
  }

  /** Deletes a delivered return (a file already gone is fine). */
  async remove(file: string): Promise<void> {
    try {
      await unlink(file)
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
  }

  /** Renames an unreadable file to `<file>.bad` so it stops blocking the spool but stays for the operator. */
  async quarantine(file: string): Promise<void> {
    try {
      await rename(file, `${file}.bad`)
      this.#logger.error(`moved unreadable spooled return ${file} aside to ${file}.bad`)
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
  }
}
