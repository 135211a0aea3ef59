import { createHash } from 'node:crypto'
import { mkdir, open, stat } from 'node:fs/promises'
import { join } from 'node:path'
import nacl from 'tweetnacl'
import { silentLogger, type Logger } from '@brine/transport'
import { bytesEqual, fromBase64Exact, toBase64 } from './bytes.js'
import { InsecureKeyFileError, KeyFileError } from './errors.js'
import { createFileExclusive, isNotFound, writeFileAtomic } from './fs-atomic.js'
import { minionIdProblem } from './minion-id.js'

/** X25519 key pair for `box` (32-byte public, 32-byte secret). */
export interface BoxKeyPair {
  readonly publicKey: Uint8Array
  readonly secretKey: Uint8Array
}

/** Ed25519 key pair for signing (32-byte public, 64-byte nacl secret: seed ‖ public). */
export interface SignKeyPair {
  readonly publicKey: Uint8Array
  readonly secretKey: Uint8Array
}

/** A daemon's identity: one key pair to seal with and one to sign with. */
export interface KeyPair {
  readonly box: BoxKeyPair
  readonly sign: SignKeyPair
}

/** The public halves, as a peer stores and sends them. */
export interface PublicKeys {
  readonly box: Uint8Array
  readonly sign: Uint8Array
}

export const KEY_FILE_MODE = 0o600
export const PUBLIC_FILE_MODE = 0o644
export const PKI_DIR_MODE = 0o700
/** Key files are a few hundred bytes; anything far larger is not one of ours. */
const MAX_KEY_FILE_BYTES = 64 * 1024

const SECRET_LABEL = 'BRINE SECRET KEYS'
const PUBLIC_LABEL = 'BRINE PUBLIC KEYS'

export function generateKeys(): KeyPair {
  return { box: nacl.box.keyPair(), sign: nacl.sign.keyPair() }
}

/** Rebuilds a key pair from its two 32-byte secrets (X25519 secret, Ed25519 seed). */
export function keysFromSecrets(boxSecret: Uint8Array, signSeed: Uint8Array): KeyPair {
  return { box: nacl.box.keyPair.fromSecretKey(boxSecret), sign: nacl.sign.keyPair.fromSeed(signSeed) }
}

export const publicKeysOf = (keys: KeyPair): PublicKeys => ({ box: keys.box.publicKey, sign: keys.sign.publicKey })

export const publicKeysEqual = (a: PublicKeys, b: PublicKeys): boolean => bytesEqual(a.box, b.box) && bytesEqual(a.sign, b.sign)

/**
 * Like `salt-key -F`: SHA-256 of the public key bytes (box ‖ sign), as colon-separated hex pairs.
 * This is the value `master_finger` takes.
 */
export function fingerprint(publicKeys: PublicKeys): string {
  const digest = createHash('sha256').update(publicKeys.box).update(publicKeys.sign).digest('hex')
  return digest.match(/../g)!.join(':')
}

/** Lower-cases a fingerprint and drops separators, so `AB:CD…` and `abcd…` compare equal. */
export const normalizeFingerprint = (finger: string): string => finger.toLowerCase().replace(/[^0-9a-f]/g, '')

function armor(label: string, fields: ReadonlyArray<readonly [string, Uint8Array]>): string {
  const body = fields.map(([name, bytes]) => `${name}: ${toBase64(bytes)}`).join('\n')
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`
}

/**
 * Parses the PEM-like text written by {@link armor}: a BEGIN line, `box:` and `sign:` lines of
 * base64 holding exactly 32 bytes each, an END line. Strict, so truncation or corruption is
 * reported with the file and line rather than producing a wrong key.
 */
function unarmor(text: string, label: string, file: string): { box: Uint8Array; sign: Uint8Array } {
  const lines = text.split('\n').map((line) => line.replace(/\r$/, ''))
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
  const begin = `-----BEGIN ${label}-----`
  const end = `-----END ${label}-----`
  if (lines[0] !== begin) throw new KeyFileError(file, `line 1: expected '${begin}'`)
  const fields: Record<string, Uint8Array> = {}
  for (const [index, name] of (['box', 'sign'] as const).entries()) {
    const line = lines[index + 1]
    if (line === undefined || line === end) throw new KeyFileError(file, `truncated: no '${name}:' line`)
    const match = /^([a-z]+): (\S+)$/.exec(line)
    if (match === null || match[1] !== name) throw new KeyFileError(file, `line ${index + 2}: expected '${name}: <base64>'`)
    const bytes = fromBase64Exact(match[2] as string, 32)
    if (bytes === undefined) throw new KeyFileError(file, `line ${index + 2}: '${name}' is not base64 of 32 bytes`)
    fields[name] = bytes
  }
  if (lines[3] !== end) throw new KeyFileError(file, lines[3] === undefined ? `truncated: no '${end}' line` : `line 4: expected '${end}'`)
  if (lines.length > 4) throw new KeyFileError(file, `line 5: unexpected text after '${end}'`)
  return { box: fields.box as Uint8Array, sign: fields.sign as Uint8Array }
}

export const formatPublicKeys = (keys: PublicKeys): string => armor(PUBLIC_LABEL, [['box', keys.box], ['sign', keys.sign]])

/** Parses public-key text (a `.pub` file, a pki store entry, `minion_master.pub`); `file` names it in errors. */
export const parsePublicKeys = (text: string, file: string): PublicKeys => unarmor(text, PUBLIC_LABEL, file)

/** Secret key text: the X25519 secret and the Ed25519 seed; public halves are derived on load. */
export const formatSecretKeys = (keys: KeyPair): string =>
  armor(SECRET_LABEL, [['box', keys.box.secretKey], ['sign', keys.sign.secretKey.subarray(0, 32)]])

export function parseSecretKeys(text: string, file: string): KeyPair {
  const { box, sign } = unarmor(text, SECRET_LABEL, file)
  return keysFromSecrets(box, sign)
}

/** Reads a small regular file, refusing anything else; `secret` also refuses group/other permissions. */
export async function readKeyText(file: string, secret: boolean): Promise<string> {
  const handle = await open(file, 'r')
  try {
    const info = await handle.stat()
    if (!info.isFile()) throw new KeyFileError(file, 'is not a regular file')
    if (secret && (info.mode & 0o077) !== 0) throw new InsecureKeyFileError(file, info.mode)
    if (info.size > MAX_KEY_FILE_BYTES) throw new KeyFileError(file, `is ${info.size} bytes; a key file is under ${MAX_KEY_FILE_BYTES}`)
    if (info.size === 0) throw new KeyFileError(file, 'is empty')
    return await handle.readFile('utf8')
  } finally {
    await handle.close()
  }
}

/** Creates the pki dir (0700) if it is missing; warns when an existing one is open to others. */
export async function ensurePkiDir(pkiDir: string, logger: Logger = silentLogger): Promise<void> {
  await mkdir(pkiDir, { recursive: true, mode: PKI_DIR_MODE })
  const info = await stat(pkiDir)
  if ((info.mode & 0o077) !== 0) {
    logger.warning(`pki_dir ${pkiDir} has mode 0${(info.mode & 0o777).toString(8)}; 0700 is expected`)
  }
}

export interface LoadedKeys {
  keys: KeyPair
  /** True when this call generated the keys (first start). */
  created: boolean
  /** `<pkiDir>/<name>.key`: the secret keys, mode 0600. */
  keyFile: string
  /** `<pkiDir>/<name>.pub`: the public keys. */
  pubFile: string
}

export interface LoadKeysOptions {
  logger?: Logger
}

/**
 * Loads `<pkiDir>/<name>.key` and `.pub`, creating both on first start (pki dir 0700, secret
 * file 0600, created atomically so two processes starting at once agree on one key pair).
 * A missing `.pub` is rewritten from the secret file; a `.pub` without its `.key`, a corrupt
 * file, or a `.pub` that does not match the secret is a KeyFileError naming the file; a secret
 * file readable by others is an InsecureKeyFileError.
 */
export async function loadOrCreateKeys(pkiDir: string, name: string, options: LoadKeysOptions = {}): Promise<LoadedKeys> {
  const logger = options.logger ?? silentLogger
  const problem = minionIdProblem(name)
  if (problem !== undefined) throw new KeyFileError(join(pkiDir, String(name)), `key name ${problem}`)
  const keyFile = join(pkiDir, `${name}.key`)
  const pubFile = join(pkiDir, `${name}.pub`)
  await ensurePkiDir(pkiDir, logger)

  let created = false
  let keys: KeyPair
  try {
    keys = parseSecretKeys(await readKeyText(keyFile, true), keyFile)
  } catch (error) {
    if (!isNotFound(error)) throw error
    if ((await exists(pubFile)) && !(await exists(keyFile))) {
      // Regenerating here would silently change this daemon's identity under its peers' feet.
      throw new KeyFileError(pubFile, `exists but its secret key file ${keyFile} is missing; restore it, or remove ${pubFile} to generate a new key pair`)
    }
    // (When both exist now, another process just created them: the exclusive create below loses and loads theirs.)
    const fresh = generateKeys()
    if (await createFileExclusive(keyFile, formatSecretKeys(fresh), { mode: KEY_FILE_MODE })) {
      keys = fresh
      created = true
      logger.info(`generated new key pair ${keyFile}`)
    } else {
      keys = parseSecretKeys(await readKeyText(keyFile, true), keyFile) // another process won the race
    }
  }

  const expected = publicKeysOf(keys)
  let pubText: string | undefined
  try {
    pubText = await readKeyText(pubFile, false)
  } catch (error) {
    if (!isNotFound(error)) throw error
  }
  if (pubText === undefined) {
    await writeFileAtomic(pubFile, formatPublicKeys(expected), { mode: PUBLIC_FILE_MODE })
    if (!created) logger.warning(`public key file ${pubFile} was missing; rewrote it from ${keyFile}`)
  } else if (!publicKeysEqual(parsePublicKeys(pubText, pubFile), expected)) {
    throw new KeyFileError(pubFile, `does not match the secret keys in ${keyFile}`)
  }
  return { keys, created, keyFile, pubFile }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file)
    return true
  } catch (error) {
    if (isNotFound(error)) return false
    throw error
  }
}
