import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { isNotFound, writeFileAtomic } from './fs-atomic.js'
import { ensurePkiDir, formatPublicKeys, parsePublicKeys, PUBLIC_FILE_MODE, readKeyText, type PublicKeys } from './keys.js'

/** Where a minion pins its master's public keys on first contact, as Salt does. */
export const MASTER_PIN_FILE = 'minion_master.pub'

/**
 * A master's address as a file name part, `<host>-<port>`: a host that is not a plain name or
 * address (IPv6 colons, anything unusual) is replaced by a digest of it, so the name never leaves
 * the directory it is used in.
 */
export function masterAddressStem(host: string, port: number): string {
  const safe = /^[A-Za-z0-9][A-Za-z0-9.-]{0,199}$/.test(host) ? host : `h${createHash('sha256').update(host).digest('hex').slice(0, 16)}`
  return `${safe}-${port}`
}

/**
 * The pin file of one master among several, named from its address: `minion_master-<host>-<port>.pub`
 * (`prefix` `syndic_master` for a syndic's upper masters, as Salt names that pin). Salt keeps one
 * `minion_master.pub` for all masters, which then must share one key; one file per master lets
 * each have its own.
 */
export function masterPinFile(host: string, port: number, prefix = 'minion_master'): string {
  return `${prefix}-${masterAddressStem(host, port)}.pub`
}

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
