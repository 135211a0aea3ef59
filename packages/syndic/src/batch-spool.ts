/**
 * Batches the upper master did not acknowledge (it was down, restarting, unreachable) wait here until it
 * is back: one msgpack file per batch, `<sequence>.msgpack`, written atomically (temporary file, fsync,
 * rename, mode 0600), read back oldest first and deleted once acknowledged. The directory is bounded by
 * `syndic_spool_max_bytes`: a batch that does not fit is refused with a {@link SyndicSpoolFullError}.
 */
import { randomBytes } from 'node:crypto'
import { chmod, mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import type { SyndicJobEntry } from '@brine/protocol'
import { decode, encode } from '@brine/core'
import { SyndicFileError, SyndicSpoolFullError } from './errors.js'

const SUFFIX = '.msgpack'
const NAME = /^(\d{16})\.msgpack$/

export interface SpooledBatch {
  file: string
  jobs: SyndicJobEntry[]
}

export class BatchSpool {
  readonly dir: string
  readonly maxBytes: number
  /** Spooled files (oldest first) and their sizes. */
  readonly #files = new Map<string, number>()
  #bytes = 0
  #sequence = 0
  #opened: Promise<void> | undefined

  constructor(dir: string, maxBytes: number) {
    this.dir = dir
    this.maxBytes = maxBytes
  }

  /** Bytes spooled now. */
  get bytes(): number {
    return this.#bytes
  }

  /** Batches spooled now. */
  get size(): number {
    return this.#files.size
  }

  /** Creates the directory (0700) and learns what an earlier run left there. */
  open(): Promise<void> {
    this.#opened ??= this.#open()
    return this.#opened
  }

  async #open(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 })
    const names = (await readdir(this.dir)).filter((name) => NAME.test(name)).sort()
    for (const name of names) {
      const file = join(this.dir, name)
      const size = (await stat(file)).size
      this.#files.set(file, size)
      this.#bytes += size
      this.#sequence = Math.max(this.#sequence, Number(NAME.exec(name)![1]))
    }
  }

  /** Writes one batch; SyndicSpoolFullError when it would take the spool past its limit. */
  async write(jobs: readonly SyndicJobEntry[]): Promise<string> {
    await this.open()
    const bytes = encode(jobs as unknown as SyndicJobEntry[])
    if (this.#bytes + bytes.length > this.maxBytes) throw new SyndicSpoolFullError(this.dir, bytes.length, this.#bytes, this.maxBytes)
    const file = join(this.dir, `${String(++this.#sequence).padStart(16, '0')}${SUFFIX}`)
    const temp = join(this.dir, `.tmp-${process.pid}-${randomBytes(6).toString('hex')}`)
    // Counted before the write: concurrent writers cannot overshoot the bound together.
    this.#bytes += bytes.length
    try {
      const handle = await open(temp, 'wx', 0o600)
      try {
        await handle.writeFile(bytes)
        await handle.sync()
      } finally {
        await handle.close()
      }
      await chmod(temp, 0o600)
      await rename(temp, file)
    } catch (error) {
      this.#bytes -= bytes.length
      await unlink(temp).catch(() => {})
      throw error
    }
    this.#files.set(file, bytes.length)
    return file
  }

  /** The oldest spooled batch, if any; an unreadable file is moved aside (`.bad`) and reported as SyndicFileError. */
  async oldest(): Promise<SpooledBatch | undefined> {
    await this.open()
    const [file] = this.#files.keys()
    if (file === undefined) return undefined
    let jobs: unknown
    try {
      jobs = decode(await readFile(file))
    } catch (error) {
      await this.#setAside(file)
      throw new SyndicFileError(file, `is not a readable spooled batch (${(error as Error).message}); moved to ${file}.bad`, { cause: error })
    }
    if (!Array.isArray(jobs)) {
      await this.#setAside(file)
      throw new SyndicFileError(file, `is not a spooled batch (a list of jobs); moved to ${file}.bad`)
    }
    return { file, jobs: jobs as SyndicJobEntry[] }
  }

  /** Deletes a delivered batch. */
  async remove(file: string): Promise<void> {
    const size = this.#files.get(file)
    if (size === undefined) return
    this.#files.delete(file)
    this.#bytes -= size
    await unlink(file).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error
    })
  }

  async #setAside(file: string): Promise<void> {
    const size = this.#files.get(file) ?? 0
    this.#files.delete(file)
    this.#bytes -= size
    await rename(file, `${file}.bad`).catch(() => {})
  }
}
