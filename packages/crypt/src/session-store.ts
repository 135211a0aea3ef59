import { createHash } from 'node:crypto'
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs'
import { unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { silentLogger, type Logger } from '@brine/core'
import { fromBase64Exact, toBase64 } from './bytes.js'
import { InsecureKeyFileError, SessionFileError } from './errors.js'
import { isNotFound, writeFileAtomic } from './fs-atomic.js'
import { KEY_FILE_MODE, type PublicKeys } from './keys.js'
import { SESSION_KEY_BYTES, SessionKeys, newSessionKey, nextGeneration, type SessionKey } from './session.js'

/**
 * The master's session key kept across its restarts (docs/security.md, "The session key across a restart").
 *
 * A restarted master that made a new key sent every minion back to `_auth` (Salt does the same, at every master
 * start), a herd spread over `random_reauth_delay`. What a new key guaranteed is that a minion whose key was
 * deleted or rejected could read no more publishes; the file keeps that guarantee by naming every minion the key
 * was handed to, with a mark of the public keys it was accepted under: the key is used again only when each of
 * them is still accepted under those keys, the key is younger than `publish_session`, and the master's own keys
 * are those it was made under. A minion is named in the file (written, synced) before its `_auth` reply leaves,
 * so a crash cannot forget one. Anything else — no file, an unreadable, corrupt or insecure one — makes a new key,
 * of the next generation when the old one is known.
 */

/** The file in `pki_dir`, mode 0600 as the master's own secret key. */
export const SESSION_FILE = '.session_key'

const FORMAT = 'brine-session-key'
const VERSION = 1
/** A holder is an id (≤ 237 bytes) and a 24-character mark: even 100,000 holders stay under this. */
const MAX_SESSION_FILE_BYTES = 64 * 1024 * 1024
const MARK_BYTES = 16

/** What the file holds. */
export interface StoredSession {
  session: SessionKey
  /** When the key was made, ms since the epoch in the master's clock. */
  madeAt: number
  /** The fingerprint of the master's public keys the key was made under. */
  master: string
  /** Minion id → {@link holderMark} of the keys it was accepted under when it was handed the key. */
  holders: ReadonlyMap<string, string>
}

/** A short digest of a minion's public keys: what the file records, so a replaced key is told apart. */
export function holderMark(keys: PublicKeys): string {
  return createHash('sha256').update(keys.box).update(keys.sign).digest().subarray(0, MARK_BYTES).toString('base64')
}

export function formatSessionFile(stored: StoredSession): string {
  return `${JSON.stringify({
    format: FORMAT,
    version: VERSION,
    key: toBase64(stored.session.key),
    gen: stored.session.gen,
    made_at: stored.madeAt,
    master: stored.master,
    holders: Object.fromEntries(stored.holders),
  })}\n`
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Parses the file's text; SessionFileError naming `file` and what is wrong. */
export function parseSessionFile(text: string, file: string): StoredSession {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new SessionFileError(file, 'is not JSON (truncated or corrupt)', { cause: error })
  }
  if (!isRecord(parsed) || parsed['format'] !== FORMAT) throw new SessionFileError(file, `is not a ${FORMAT} file`)
  if (parsed['version'] !== VERSION) throw new SessionFileError(file, `has version ${JSON.stringify(parsed['version'])}; this master reads ${VERSION}`)
  const key = typeof parsed['key'] === 'string' ? fromBase64Exact(parsed['key'], SESSION_KEY_BYTES) : undefined
  if (key === undefined) throw new SessionFileError(file, `'key' is not base64 of ${SESSION_KEY_BYTES} bytes`)
  const { gen, made_at: madeAt, master, holders } = parsed
  if (typeof gen !== 'number' || !Number.isSafeInteger(gen) || gen < 1) throw new SessionFileError(file, "'gen' is not a positive integer")
  if (typeof madeAt !== 'number' || !Number.isFinite(madeAt) || madeAt < 0) throw new SessionFileError(file, "'made_at' is not a time")
  if (typeof master !== 'string' || master === '') throw new SessionFileError(file, "'master' is not a fingerprint")
  if (!isRecord(holders)) throw new SessionFileError(file, "'holders' is not a mapping")
  const marks = new Map<string, string>()
  for (const [id, mark] of Object.entries(holders)) {
    if (typeof mark !== 'string' || fromBase64Exact(mark, MARK_BYTES) === undefined)
      throw new SessionFileError(file, `the mark of holder ${JSON.stringify(id.slice(0, 80))} is not valid`)
    marks.set(id, mark)
  }
  return { session: { key, gen }, madeAt, master, holders: marks }
}

/**
 * Reads the file: undefined when there is none; SessionFileError when it is not a regular file, too large or
 * corrupt; InsecureKeyFileError when group or others may read or write it.
 */
export function readSessionFile(file: string): StoredSession | undefined {
  let fd: number
  try {
    // O_NONBLOCK: a FIFO put in its place must not hang the start (fstat then refuses it).
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (error) {
    if (isNotFound(error)) return undefined
    throw new SessionFileError(file, `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, { cause: error })
  }
  try {
    const info = fstatSync(fd)
    if (!info.isFile()) throw new SessionFileError(file, 'is not a regular file')
    if ((info.mode & 0o077) !== 0) throw new InsecureKeyFileError(file, info.mode)
    if (info.size > MAX_SESSION_FILE_BYTES) throw new SessionFileError(file, `is ${info.size} bytes; at most ${MAX_SESSION_FILE_BYTES}`)
    return parseSessionFile(readFileSync(fd, 'utf8'), file)
  } finally {
    closeSync(fd)
  }
}

export interface ReuseCheck {
  /** The master's clock now, ms since the epoch. */
  now: number
  /** `publish_session` in ms; 0: no age limit. */
  publishSessionMs: number
  /** The fingerprint of the master's public keys now. */
  master: string
  /** A minion's accepted public keys, or undefined when it is not accepted (the key store's lookup). */
  acceptedKeys: (id: string) => Promise<PublicKeys | undefined>
}

/** Why the stored key must not be used again (a sentence for the log), or undefined when it may be. */
export async function rotationReason(stored: StoredSession, check: ReuseCheck): Promise<string | undefined> {
  if (stored.master !== check.master) return "it was made under other master keys than this master's"
  if (stored.madeAt > check.now) return `it is dated ${new Date(stored.madeAt).toISOString()}, after the master's clock (set back?)`
  if (check.publishSessionMs > 0 && check.now - stored.madeAt >= check.publishSessionMs) {
    return `it is older than publish_session (${Math.round(check.publishSessionMs / 1000)} s)`
  }
  for (const [id, mark] of stored.holders) {
    let keys: PublicKeys | undefined
    try {
      keys = await check.acceptedKeys(id)
    } catch (error) {
      return `minion ${JSON.stringify(id)}'s key could not be checked (${(error as Error).message})`
    }
    if (keys === undefined) return `minion ${JSON.stringify(id)} held it and is no longer accepted (deleted or rejected while the master was down)`
    if (holderMark(keys) !== mark) return `minion ${JSON.stringify(id)} held it under keys that are no longer the accepted ones`
  }
  return undefined
}

export interface SessionStoreOptions extends Omit<ReuseCheck, 'now'> {
  /** The master's pki_dir: the file is `<pki_dir>/.session_key`. */
  pkiDir: string
  /** The master's clock (default Date.now). */
  now?: () => number
  /** Least time between the starts of two writes of the file, ms (default {@link SESSION_WRITE_SPACING_MS}). */
  writeSpacingMs?: number
  logger?: Logger
}

/**
 * Least time between two writes of the session file. Each write holds every holder, so a fleet authenticating
 * (a launch: a thousand `_auth`s over seconds) rewrote it for nearly every minion, each write formatting the
 * whole list again and syncing it: what arrives within this wait of the last write goes in the next one, and
 * an `_auth` reply waits for it at most this much longer. A lone `_auth` is written at once.
 */
export const SESSION_WRITE_SPACING_MS = 50

/**
 * The master's current session key ({@link SessionKeys}) and its file: opened at start (the key kept or a new
 * one made, and why), written again at every rotation, and before each `_auth` reply that hands the key to a
 * minion not yet named in it. Writes are atomic and run one at a time; whoever waits for one waits for the
 * first write that begins after its change.
 */
export class SessionStore {
  readonly file: string
  readonly keys: SessionKeys
  /** True when the key in use was read back from the file at start. */
  readonly reused: boolean
  readonly #o: SessionStoreOptions
  readonly #now: () => number
  readonly #logger: Logger
  #madeAt: number
  #holders = new Map<string, string>()
  /** Changes made (`#version`) and written (`#written`): a waiter resolves once `#written` reaches its change. */
  #version = 0
  #written = 0
  #writing = false
  readonly #waiters: Array<{ version: number; resolve: () => void }> = []
  readonly #spacingMs: number
  /** When the last write began (performance.now(): a wall clock the master's tests move must not stretch the wait). */
  #lastWriteAt = Number.NEGATIVE_INFINITY
  #writes = 0

  private constructor(options: SessionStoreOptions, keys: SessionKeys, madeAt: number, holders: ReadonlyMap<string, string> | undefined) {
    this.#o = options
    this.#now = options.now ?? Date.now
    this.#logger = options.logger ?? silentLogger
    this.file = join(options.pkiDir, SESSION_FILE)
    this.keys = keys
    this.reused = holders !== undefined
    this.#madeAt = madeAt
    this.#spacingMs = Math.max(0, options.writeSpacingMs ?? SESSION_WRITE_SPACING_MS)
    if (holders !== undefined) this.#holders = new Map(holders)
  }

  /** Writes of the file so far (each names every change made before it began). */
  get writes(): number {
    return this.#writes
  }

  /**
   * Reads the file and keeps its key if nothing forbids it, else makes a new one, written before this resolves. A kept
   * key's file already holds what it would be written with (and was read as valid and 0600): it is not written again,
   * which spared a restarting master a thousand holders formatted and a sync before it listens.
   */
  static async open(options: SessionStoreOptions): Promise<SessionStore> {
    const now = options.now ?? Date.now
    const logger = options.logger ?? silentLogger
    const file = join(options.pkiDir, SESSION_FILE)
    let stored: StoredSession | undefined
    try {
      stored = readSessionFile(file)
    } catch (error) {
      logger.warning(`session key file: ${(error as Error).message}; making a new session key`)
    }
    const reason = stored === undefined ? undefined : await rotationReason(stored, { ...options, now: now() })
    let store: SessionStore
    if (stored !== undefined && reason === undefined) {
      store = new SessionStore(options, new SessionKeys(stored.session), stored.madeAt, stored.holders)
      logger.info(
        `session key generation ${stored.session.gen} kept from ${file} (made ${new Date(stored.madeAt).toISOString()}, held by ${stored.holders.size} minion(s))`,
      )
    } else {
      // The next generation after the stored one, so generations keep increasing across restarts; a random one without it.
      store = new SessionStore(options, new SessionKeys(stored === undefined ? undefined : newSessionKey(nextGeneration(stored.session.gen))), now(), undefined)
      if (stored !== undefined)
        logger.info(`session key generation ${stored.session.gen} in ${file} not kept: ${reason ?? ''}; new generation ${store.keys.current().gen}`)
    }
    if (!store.reused) await store.#persist(store.#changed())
    return store
  }

  /** When the current key was made (ms since the epoch, the master's clock): `publish_session` counts from here. */
  get madeAt(): number {
    return this.#madeAt
  }

  /** The minions the current key was handed to. */
  get holders(): number {
    return this.#holders.size
  }

  /** The ids of the minions the current key was handed to. */
  heldBy(): string[] {
    return [...this.#holders.keys()]
  }

  /** Replaces the key with one of the next generation (nobody holds it yet) and writes the file; returns the new key at once. */
  rotate(): SessionKey {
    const next = this.keys.rotate()
    this.#madeAt = this.#now()
    this.#holders = new Map()
    void this.#persist(this.#changed())
    return next
  }

  /**
   * Records that minion `id` (accepted) is being handed the current key; resolves once the file names it, so the
   * `_auth` reply that carries the key can go. Never rejects: a write that fails removes the file instead (the
   * next start makes a new key), and says so.
   */
  async handedTo(id: string): Promise<void> {
    let keys: PublicKeys | undefined
    try {
      keys = await this.#o.acceptedKeys(id)
    } catch {
      keys = undefined
    }
    // Not accepted (any more): it holds nothing this file must name; a key read that failed is treated the same, and a
    // key removed since rotates the session anyway.
    if (keys === undefined) return
    const mark = holderMark(keys)
    if (this.#holders.get(id) === mark && this.#written === this.#version) return
    if (this.#holders.get(id) !== mark) {
      this.#holders.set(id, mark)
      this.#changed()
    }
    await this.#persist(this.#version)
  }

  /** Resolves once every change made so far is written (or its write failed). */
  flush(): Promise<void> {
    return this.#persist(this.#version)
  }

  #changed(): number {
    return ++this.#version
  }

  #persist(version: number): Promise<void> {
    if (this.#written >= version) return Promise.resolve()
    const done = new Promise<void>((resolve) => this.#waiters.push({ version, resolve }))
    if (!this.#writing) {
      this.#writing = true
      void this.#writeLoop()
    }
    return done
  }

  async #writeLoop(): Promise<void> {
    try {
      while (this.#written < this.#version) {
        const wait = this.#lastWriteAt + this.#spacingMs - performance.now()
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
        this.#lastWriteAt = performance.now()
        this.#writes++
        const version = this.#version
        const text = formatSessionFile({ session: this.keys.current(), madeAt: this.#madeAt, master: this.#o.master, holders: this.#holders })
        try {
          await writeFileAtomic(this.file, text, { mode: KEY_FILE_MODE })
        } catch (error) {
          // An old file left in place could be read back at the next start with a key this run went on from: remove it.
          const removed = await unlink(this.file).then(
            () => true,
            (unlinkError: unknown) => isNotFound(unlinkError),
          )
          this.#logger.error(
            `session key file ${this.file} could not be written (${(error as Error).message}); ${removed ? 'removed it: the next start makes a new session key' : 'nor removed: the next start may not see the latest key changes'}`,
          )
        }
        this.#written = version
        for (let index = this.#waiters.length - 1; index >= 0; index--) {
          const waiter = this.#waiters[index]!
          if (waiter.version <= version) {
            this.#waiters.splice(index, 1)
            waiter.resolve()
          }
        }
      }
    } finally {
      this.#writing = false
    }
  }
}
