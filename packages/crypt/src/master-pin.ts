import { join } from 'node:path'
import { isNotFound, writeFileAtomic } from './fs-atomic.js'
import { ensurePkiDir, formatPublicKeys, parsePublicKeys, PUBLIC_FILE_MODE, readKeyText, type PublicKeys } from './keys.js'

/** Where a minion pins its master's public keys on first contact, as Salt does. */
export const MASTER_PIN_FILE = 'minion_master.pub'

export const masterPinPath = (pkiDir: string, file: string = MASTER_PIN_FILE): string => join(pkiDir, file)

/** The pinned master keys, or undefined before first contact. A corrupt pin is a KeyFileError, never "no pin". */
export async function readPinnedMasterKeys(pkiDir: string, file: string = MASTER_PIN_FILE): Promise<PublicKeys | undefined> {
  const path = masterPinPath(pkiDir, file)
  try {
    return parsePublicKeys(await readKeyText(path, false), path)
  } catch (error) {
    if (isNotFound(error)) return undefined
    throw error
  }
}

/** Pins the master's public keys (atomic write). */
export async function pinMasterKeys(pkiDir: string, keys: PublicKeys, file: string = MASTER_PIN_FILE): Promise<string> {
  await ensurePkiDir(pkiDir)
  const path = masterPinPath(pkiDir, file)
  await writeFileAtomic(path, formatPublicKeys(keys), { mode: PUBLIC_FILE_MODE })
  return path
}
