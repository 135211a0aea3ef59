import { createHash } from 'node:crypto'
import { access, readFile } from 'node:fs/promises'
import md5crypt from 'apache-md5'
import { constantTimeEqual } from '@brine/crypt'
import { LoginBusyError } from '@brine/common'
import { ConfigError } from '@brine/config'
import { silentLogger, type Logger } from '@brine/core'
import { inlineHasher, type PasswordHasher } from './hash-pool.js'

/** Salt's `file` backend settings: the `^`-prefixed keys of `external_auth: file:`. */
export interface FileBackendSettings {
  filename: string
  filetype: 'text' | 'htpasswd' | 'htdigest'
  /** text files: `plaintext` or a digest (hex) of the password. */
  hashtype: TextHashType
  fieldSeparator: string
  /** 1-based. */
  usernameField: number
  passwordField: number
  /** htdigest files: the realm of the entries that count. */
  realm?: string
}

const TEXT_HASH_TYPES = ['plaintext', 'md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512'] as const
type TextHashType = (typeof TEXT_HASH_TYPES)[number]
const FILETYPES = ['text', 'htpasswd', 'htdigest'] as const
const KNOWN_SETTINGS = new Set(['^filename', '^filetype', '^hashtype', '^field_separator', '^username_field', '^password_field', '^realm'])

/**
 * Reads and checks the `^` settings of `external_auth: file:` (Salt's `_get_file_auth_config`): `^filename`
 * is required and must exist; `^filetype` text (default), htpasswd or htdigest; `^realm` for htdigest;
 * `^hashtype`, `^field_separator`, `^username_field`, `^password_field` for text files. A problem is a
 * ConfigError naming the key, so the master refuses to start instead of refusing every login.
 */
export async function fileBackendSettings(block: Readonly<Record<string, unknown>>, logger: Logger = silentLogger): Promise<FileBackendSettings> {
  const key = (name: string): string => `external_auth.file.${name}`
  const fail = (name: string, problem: string): never => {
    throw new ConfigError(`${key(name)} ${problem}`, { key: key(name) })
  }
  for (const name of Object.keys(block)) {
    if (name.startsWith('^') && !KNOWN_SETTINGS.has(name))
      logger.warning(`${key(name)}: unknown setting of the file eauth backend; ignored (known: ${[...KNOWN_SETTINGS].join(', ')})`)
  }
  const filename = block['^filename']
  if (typeof filename !== 'string' || filename === '') fail('^filename', 'is required: the path of the password file (Salt: external_auth:file:^filename)')
  try {
    await access(filename as string)
  } catch (error) {
    fail('^filename', `names ${String(filename)}, which cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
  const filetype = block['^filetype'] ?? 'text'
  if (typeof filetype !== 'string' || !(FILETYPES as readonly string[]).includes(filetype.toLowerCase()))
    fail('^filetype', `must be one of ${FILETYPES.join(', ')}, got ${JSON.stringify(filetype)}`)
  const hashtype = block['^hashtype'] ?? 'plaintext'
  if (typeof hashtype !== 'string' || !(TEXT_HASH_TYPES as readonly string[]).includes(hashtype))
    fail('^hashtype', `must be one of ${TEXT_HASH_TYPES.join(', ')}, got ${JSON.stringify(hashtype)}`)
  const separator = block['^field_separator'] ?? ':'
  if (typeof separator !== 'string' || separator === '') fail('^field_separator', 'must be a non-empty string')
  const field = (name: string, fallback: number): number => {
    const value = Number(block[name] ?? fallback)
    if (!Number.isInteger(value) || value < 1) fail(name, `must be a field number counted from 1, got ${JSON.stringify(block[name])}`)
    return value
  }
  const settings: FileBackendSettings = {
    filename: filename as string,
    filetype: (filetype as string).toLowerCase() as FileBackendSettings['filetype'],
    hashtype: hashtype as TextHashType,
    fieldSeparator: separator as string,
    usernameField: field('^username_field', 1),
    passwordField: field('^password_field', 2),
  }
  if (settings.filetype === 'htdigest') {
    const realm = block['^realm']
    if (typeof realm !== 'string' || realm === '') fail('^realm', 'is required for ^filetype htdigest')
    settings.realm = realm as string
  }
  return settings
}

/**
 * A bcrypt hash (of random bytes nobody kept) every unknown user is checked against, so a missing user
 * costs what a wrong password does. A literal, not hashed at load: a bcrypt hash is slow on purpose, and
 * every process that imports the master (the CLI's too) would pay for it at start.
 */
const DUMMY_BCRYPT = '$2b$10$jaR/yBVKR5PJ.Mqd8RWXVeEy/1CHLBFpx2fa5q7Z5qruGIbFlGGdO'
const BCRYPT_ENTRY = /^[^:]*:\$2[abxy]\$(\d\d)\$/

/**
 * The dummy at the cost of the file's first bcrypt entry (the literal's cost, 10, when it has none): a
 * dummy cheaper than the real entries would tell a missing user from a wrong password by the time, a
 * dearer one would make guessing names cost more than guessing passwords. bcrypt reads the cost from
 * the hash, so the literal's salt and digest serve at any cost and still match no password.
 */
export function dummyBcryptFor(lines: readonly string[]): string {
  for (const line of lines) {
    const cost = BCRYPT_ENTRY.exec(line.trim())?.[1]
    if (cost !== undefined) return `$2b$${cost}$${DUMMY_BCRYPT.slice(7)}`
  }
  return DUMMY_BCRYPT
}

const digest = (algorithm: string, text: string, encoding: 'hex' | 'base64' = 'hex'): string => createHash(algorithm).update(text, 'utf8').digest(encoding)

/**
 * Checks `password` against one htpasswd entry: bcrypt (`$2y$`, `$2a$`, `$2b$`, through bcryptjs),
 * Apache MD5 (`$apr1$`) and MD5-crypt (`$1$`, through apache-md5), and `{SHA}` (base64 SHA-1). Other
 * schemes (DES and SHA-2 crypt, plaintext) are refused: `undefined` says which entry could not be checked.
 * bcrypt, the costly one, runs on `hasher` (the master's hashing threads).
 */
export async function verifyHtpasswd(password: string, hash: string, hasher: PasswordHasher = inlineHasher): Promise<boolean | undefined> {
  if (/^\$2[abxy]\$/.test(hash)) return hasher.compareBcrypt(password, `$2b$${hash.slice(4)}`)
  if (hash.startsWith('$apr1$') || hash.startsWith('$1$')) return constantTimeEqual(md5crypt(password, hash), hash)
  if (hash.startsWith('{SHA}')) return constantTimeEqual(`{SHA}${digest('sha1', password, 'base64')}`, hash)
  return undefined
}

/**
 * Salt's `file` eauth backend (salt/auth/file.py): users and passwords in a local file, read at each
 * login (so edits apply without a restart). `text` files hold `user:password` (or a digest of it, with
 * `^hashtype`), htpasswd files Apache's hashes, htdigest files `user:realm:md5(user:realm:password)`.
 */
export class FileAuthBackend {
  readonly name = 'file'
  readonly #settings: FileBackendSettings
  readonly #logger: Logger
  readonly #hasher: PasswordHasher

  constructor(settings: FileBackendSettings, logger: Logger = silentLogger, hasher: PasswordHasher = inlineHasher) {
    this.#settings = settings
    this.#logger = logger
    this.#hasher = hasher
  }

  /** True when `username` and `password` match an entry of the file; throws only LoginBusyError (no hashing thread free). */
  async authenticate(username: string, password: string): Promise<boolean> {
    const s = this.#settings
    let text: string
    try {
      text = await readFile(s.filename, 'utf8')
    } catch (error) {
      this.#logger.error(`eauth file: cannot read ${s.filename}: ${(error as Error).message}`)
      return false
    }
    const lines = text.split(/\r?\n/).filter((line) => line.trim() !== '' && !line.trimStart().startsWith('#'))
    try {
      if (s.filetype === 'text') return this.#text(lines, username, password)
      if (s.filetype === 'htdigest') return this.#htdigest(lines, username, password)
      return await this.#htpasswd(lines, username, password)
    } catch (error) {
      if (error instanceof LoginBusyError) throw error
      this.#logger.error(`eauth file: checking ${JSON.stringify(username)} against ${s.filename} failed: ${(error as Error).message}`)
      return false
    }
  }

  #text(lines: readonly string[], username: string, password: string): boolean {
    const s = this.#settings
    for (const line of lines) {
      const fields = line.trim().split(s.fieldSeparator)
      const user = fields[s.usernameField - 1]
      const stored = fields[s.passwordField - 1]
      if (user === undefined || stored === undefined) {
        this.#logger.error(
          `eauth file: ${s.filename} has a line without field ${user === undefined ? s.usernameField : s.passwordField} (^username_field/^password_field)`,
        )
        return false
      }
      if (user !== username) continue
      const offered = s.hashtype === 'plaintext' ? password : digest(s.hashtype, password)
      // Salt stops at the first line naming the user.
      return constantTimeEqual(offered, s.hashtype === 'plaintext' ? stored : stored.toLowerCase())
    }
    return false
  }

  async #htpasswd(lines: readonly string[], username: string, password: string): Promise<boolean> {
    for (const line of lines) {
      const colon = line.indexOf(':')
      if (colon < 0 || line.slice(0, colon) !== username) continue
      const hash = line.slice(colon + 1).trim()
      const verdict = await verifyHtpasswd(password, hash, this.#hasher)
      if (verdict === undefined) {
        this.#logger.warning(
          `eauth file: ${this.#settings.filename}: the entry of ${JSON.stringify(username)} uses a hash scheme Brine does not check (use bcrypt, $apr1$ or {SHA}: htpasswd -B)`,
        )
        return false
      }
      return verdict
    }
    await this.#hasher.compareBcrypt(password, dummyBcryptFor(lines))
    return false
  }

  #htdigest(lines: readonly string[], username: string, password: string): boolean {
    const realm = this.#settings.realm as string
    for (const line of lines) {
      const [user, entryRealm, hash] = line.trim().split(':')
      if (user !== username || entryRealm !== realm || hash === undefined) continue
      return constantTimeEqual(digest('md5', `${username}:${realm}:${password}`), hash.toLowerCase())
    }
    return false
  }
}
