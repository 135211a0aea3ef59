import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import { writeFileAtomic } from './fs-atomic.js'
import { KEY_FILE_MODE, PKI_DIR_MODE } from './keys.js'

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
