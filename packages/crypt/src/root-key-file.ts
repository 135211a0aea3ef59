import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { RootKeyError } from './errors.js'

/*
 * `@brine/crypt/root-key`: where the master's root key lives and how a local client reads it, apart from the
 * package's cryptography, so a client that only reads the key (the `brine` command) does not load Node's crypto
 * module and tweetnacl for it.
 */

/** Salt's name for the local client's key file, under `cachedir`. */
export const ROOT_KEY_FILE = '.root_key'

export const rootKeyPath = (cachedir: string): string => join(cachedir, ROOT_KEY_FILE)

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
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new RootKeyError(file, 'does not exist; is the master running, and are you its user?', { cause: error })
    if ((error as NodeJS.ErrnoException).code === 'EACCES')
      throw new RootKeyError(file, "is not readable by this user; run as the master's user", { cause: error })
    throw error
  }
  const key = text.trim()
  if (key === '') throw new RootKeyError(file, 'is empty')
  return key
}
