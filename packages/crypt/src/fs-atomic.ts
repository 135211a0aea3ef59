import { randomBytes } from 'node:crypto'
import { link, open, rename, unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

/** Atomic file writes: readers see the old content or the new, never a torn file. */

export interface AtomicWriteOptions {
  /** Mode the file is created with (umask can only narrow it). */
  mode: number
  /** Where the temporary file goes; must be on the same filesystem as the target (default: its directory). */
  tempDir?: string
}

/** Random bytes in a temporary file's name (hex-encoded, so twice as many characters). */
const TEMP_RANDOM_BYTES = 6

/** The temporary file name a write of `name` goes through: `.<name>.<12 hex>.tmp`. */
export function tempFileName(name: string): string {
  return `.${name}.${randomBytes(TEMP_RANDOM_BYTES).toString('hex')}.tmp`
}

/**
 * Bytes {@link tempFileName} adds to a name (`.` + `.` + 12 hex + `.tmp` = 18): a name that must be
 * written atomically has to be this much shorter than the filesystem's 255-byte limit.
 */
export const TEMP_NAME_EXTRA_BYTES = Buffer.byteLength(tempFileName(''))

async function writeTemp(target: string, data: string | Uint8Array, options: AtomicWriteOptions): Promise<string> {
  const temp = join(options.tempDir ?? dirname(target), tempFileName(basename(target)))
  // 'wx' refuses to follow a planted symlink or reuse a file someone else created.
  const handle = await open(temp, 'wx', options.mode)
  try {
    await handle.writeFile(data)
    // chmod explicitly as well: the mode argument is ignored if the file somehow pre-existed.
    await handle.chmod(options.mode)
    await handle.sync()
    await handle.close()
  } catch (error) {
    // A failed write (a full disk, a quota) leaves no temporary file behind.
    await handle.close().catch(() => {})
    await unlink(temp).catch(() => {})
    throw error
  }
  return temp
}

/** Writes `data` to `target` through a temporary file and rename(2), replacing any old file. */
export async function writeFileAtomic(target: string, data: string | Uint8Array, options: AtomicWriteOptions): Promise<void> {
  const temp = await writeTemp(target, data, options)
  try {
    await rename(temp, target)
  } catch (error) {
    await unlink(temp).catch(() => {})
    throw error
  }
}

/**
 * Creates `target` with `data` only if it does not exist yet; returns false when it already did.
 * link(2) is atomic create-if-absent with the full content in place, so two processes starting at
 * once never see each other's half-written key.
 */
export async function createFileExclusive(target: string, data: string | Uint8Array, options: AtomicWriteOptions): Promise<boolean> {
  const temp = await writeTemp(target, data, options)
  try {
    await link(temp, target)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    await unlink(temp).catch(() => {})
  }
}

export const isNotFound = (error: unknown): boolean => (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT'
