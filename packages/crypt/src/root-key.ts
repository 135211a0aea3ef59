import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { mkdir, open } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { RootKeyError } from './errors.js'
import { isNotFound, writeFileAtomic } from './fs-atomic.js'
import { KEY_FILE_MODE, PKI_DIR_MODE } from './keys.js'

/** Salt's name for the local client's key file, under `cachedir`. */
export const ROOT_KEY_FILE = '.root_key'

export const rootKeyPath = (cachedir: string): string => join(cachedir, ROOT_KEY_FILE)

/**
 * Writes a fresh random root key (32 bytes, base64url) to `file`, mode 0600, atomically, and
 * returns it. The master calls this at every start, as Salt does, so a key read by a former
 * process does not outlive it; local clients running as the master's user read it to publish.
 */
export async function createRootKey(file: string): Promise<string> {
  await mkdir(dirname(file), { recursive: true, mode: PKI_DIR_MODE })
  const key = randomBytes(32).toString('base64url')
  await writeFileAtomic(file, `${key}\n`, { mode: KEY_FILE_MODE })
  return key
}

/** Reads the root key; RootKeyError when missing, empty, or readable by group or others. */
export async function readRootKey(file: string): Promise<string> {
  let text: string
  try {
    const handle = await open(file, 'r')
    try {
      const info = await handle.stat()
      if (!info.isFile()) throw new RootKeyError(file, 'is not a regular file')
      if ((info.mode & 0o077) !== 0) throw new RootKeyError(file, `has mode 0${(info.mode & 0o777).toString(8)}; it must be 0600`)
      text = await handle.readFile('utf8')
    } finally {
      await handle.close()
    }
  } catch (error) {
    if (isNotFound(error)) throw new RootKeyError(file, 'does not exist; is the master running, and are you its user?', { cause: error })
    if ((error as NodeJS.ErrnoException).code === 'EACCES')
      throw new RootKeyError(file, "is not readable by this user; run as the master's user", { cause: error })
    throw error
  }
  const key = text.trim()
  if (key === '') throw new RootKeyError(file, 'is empty')
  return key
}

/**
 * Constant-time equality for secrets of any length: both sides are hashed first, so neither the
 * content nor where the first difference lies leaks through timing.
 */
export function constantTimeEqual(a: string | Uint8Array, b: string | Uint8Array): boolean {
  const digest = (value: string | Uint8Array): Buffer => createHash('sha256').update(value).digest()
  const equalDigests = timingSafeEqual(digest(a), digest(b))
  const length = (value: string | Uint8Array): number => (typeof value === 'string' ? Buffer.byteLength(value) : value.length)
  return equalDigests && length(a) === length(b)
}
