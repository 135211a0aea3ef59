/**
 * The return spool: returns the master did not acknowledge wait here, one msgpack file per jid,
 * until they are delivered. Files are written atomically (temporary file, fsync, rename) with
 * mode 0600, so a crash leaves either the whole return or nothing, and a half-written file is
 * never mistaken for a return. A write that fails (a full disk, no descriptor left) keeps its return in
 * memory, in the spool's order, and is retried until it succeeds, within SPOOL_HELD_BYTES per process.
 */
import { mkdir, readdir, readFile, rename, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { backoffDelay, decode, encode, type Logger } from '@brine/core'
import type { ReturnLoad } from '@brine/protocol'
import { writeFileAtomic } from '@brine/crypt'
import { SpoolFileError, SpoolFullError } from './errors.js'

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

const describeError = (error: unknown): string => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  const message = error instanceof Error ? error.message : String(error)
  return code === undefined || message.includes(code) ? message : `${code}: ${message}`
}

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

/**
 * Bytes of returns (encoded) a process holds in memory, over all its spools, while their spool writes fail and are
 * retried. A return past it is not spooled: SpoolFullError.
 */
export const SPOOL_HELD_BYTES = 64 * 1024 * 1024

/** The retries of a failed spool write: 100 ms, doubling to at most 5 s, jittered so a swarm's writes do not retry in step. */
export const SPOOL_RETRY_BACKOFF = { initial: 100, max: 5_000, factor: 2, jitter: 0.5, steady: 1 } as const

/** A return whose spool write failed: in memory until a retry writes it, or the spool delivers and removes it. */
interface HeldReturn {
  readonly load: ReturnLoad
  readonly bytes: Uint8Array
  tries: number
  timer: NodeJS.Timeout | undefined
  /** Delivered and removed while a retry of its write ran: that write's file goes too. */
  delivered: boolean
}

/**
 * The returns held in memory over every spool of the process, by file: a spool that lists or reads its directory
 * sees them in their place (a minion's second spool object on the same directory too), and their bytes count
 * against one bound.
 */
class HeldReturns {
  readonly #byFile = new Map<string, HeldReturn>()
  bytes = 0

  constructor(readonly limit: number) {}

  get(file: string): HeldReturn | undefined {
    return this.#byFile.get(file)
  }

  /** Holds `load` for `file`, replacing an older copy; SpoolFullError past the bound. */
  hold(file: string, load: ReturnLoad, bytes: Uint8Array, cause: unknown): HeldReturn {
    const older = this.#byFile.get(file)
    const held = this.bytes - (older?.bytes.length ?? 0)
    if (held + bytes.length > this.limit) throw new SpoolFullError(file, held, this.limit, { cause })
    this.drop(file)
    const entry: HeldReturn = { load, bytes, tries: 1, timer: undefined, delivered: false }
    this.#byFile.set(file, entry)
    this.bytes += bytes.length
    return entry
  }

  /** Forgets `file`'s held return (written, delivered or replaced), cancelling its retry. */
  drop(file: string): void {
    const entry = this.#byFile.get(file)
    if (entry === undefined) return
    clearTimeout(entry.timer)
    this.#byFile.delete(file)
    this.bytes -= entry.bytes.length
  }

  /** Held files in `dir`. */
  filesIn(dir: string): string[] {
    const prefix = join(dir, '/')
    return [...this.#byFile.keys()].filter((file) => file.startsWith(prefix))
  }
}

const heldReturns = new HeldReturns(SPOOL_HELD_BYTES)

/** Bytes of returns this process holds in memory because their spool writes failed (for stats and tests). */
export const spoolHeldBytes = (): number => heldReturns.bytes

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

  /** Returns of this spool held in memory while their writes are retried. */
  get held(): number {
    return heldReturns.filesIn(this.dir).length
  }

  async #ensureDir(): Promise<void> {
    if (this.#dirReady) return
    await mkdir(this.dir, { recursive: true, mode: SPOOL_DIR_MODE })
    this.#dirReady = true
  }

  /**
   * Writes `load` to its jid's file (replacing an older copy) and returns the file's path. A write that fails
   * (a full disk, EMFILE, EIO) leaves no temporary file behind and the old copy, if any, in place; the return is
   * then held in memory, where list() and read() find it in its place, and written again with backoff until it
   * is written or delivered. SpoolFullError when the returns held already take SPOOL_HELD_BYTES.
   */
  async write(load: ReturnLoad): Promise<string> {
    const file = join(this.dir, fileName(load.jid))
    // The returner has already cut the load to fit a frame; the file itself needs no frame limit.
    const bytes = encode(load, Number.MAX_SAFE_INTEGER)
    if (heldReturns.get(file) !== undefined) {
      // An older copy is still being retried: this one takes its place, so a late retry cannot put the old one back.
      this.#retryLater(file, heldReturns.hold(file, load, bytes, undefined))
      return file
    }
    try {
      await this.#writeOnce(file, bytes)
    } catch (error) {
      const held = heldReturns.hold(file, load, bytes, error)
      this.#logger.warning(
        `writing spooled return ${file} failed (${describeError(error)}); holding it in memory ` +
          `(${heldReturns.bytes} of SPOOL_HELD_BYTES ${heldReturns.limit} bytes held) and writing it again until that succeeds`,
      )
      this.#retryLater(file, held)
    }
    return file
  }

  /** One try: the directory, then the file through a write slot (the directory made again if it went away). */
  async #writeOnce(file: string, bytes: Uint8Array): Promise<void> {
    await this.#ensureDir()
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
  }

  #retryLater(file: string, held: HeldReturn): void {
    held.timer = setTimeout(() => void this.#retry(file, held), backoffDelay(held.tries, SPOOL_RETRY_BACKOFF))
    // A held return does not keep a process alive on its own: the daemon's links do while it runs.
    held.timer.unref()
  }

  async #retry(file: string, held: HeldReturn): Promise<void> {
    held.timer = undefined
    if (heldReturns.get(file) !== held) return
    try {
      await this.#writeOnce(file, held.bytes)
    } catch (error) {
      if (heldReturns.get(file) !== held) return // delivered or replaced meanwhile
      held.tries++
      this.#logger.debug(`writing spooled return ${file} failed again (${describeError(error)}; try ${held.tries}); retrying`)
      this.#retryLater(file, held)
      return
    }
    if (held.delivered) {
      // Delivered (removed) while this write ran: the file must not be sent a second time.
      await this.#unlink(file)
    } else if (heldReturns.get(file) === held) {
      heldReturns.drop(file)
      this.#logger.info(`spooled return ${file} written after ${held.tries + 1} tries`)
    }
  }

  /** Spooled files, oldest jid first (jids are timestamps, so name order is time order); returns held in memory among them. */
  async list(): Promise<string[]> {
    const held = heldReturns.filesIn(this.dir)
    let names: string[]
    try {
      names = await readdir(this.dir)
    } catch (error) {
      if (!isNotFound(error)) throw error
      names = []
    }
    const files = new Set(held)
    for (const name of names) if (name.endsWith(SUFFIX) && !name.startsWith('.')) files.add(join(this.dir, name))
    return [...files].sort()
  }

  /** Reads one spooled return (from memory when its write is still being retried); SpoolFileError when it is not one. */
  async read(file: string): Promise<ReturnLoad> {
    const held = heldReturns.get(file)
    if (held !== undefined) return held.load
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

  /** Deletes a delivered return (a file already gone is fine), and its copy held in memory if any. */
  async remove(file: string): Promise<void> {
    const held = heldReturns.get(file)
    if (held !== undefined) held.delivered = true
    heldReturns.drop(file)
    await this.#unlink(file)
  }

  async #unlink(file: string): Promise<void> {
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
