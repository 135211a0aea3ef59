import { closeSync, constants, fstatSync, openSync, readdirSync, readFileSync, statSync, unlinkSync } from 'node:fs'
import { mkdir, readdir, readFile, rename, unlink } from 'node:fs/promises'
import { join } from 'node:path'
import { LogLimiter, silentLogger, type Logger } from '@brine/core'
import { isBytes } from './bytes.js'
import { KeyFileError, MalformedMessageError, PendingKeyLimitError } from './errors.js'
import { isNotFound, writeFileAtomic } from './fs-atomic.js'
import { matchIds } from './glob.js'
import {
  ensurePkiDir,
  fingerprint,
  formatPublicKeys,
  KEY_FILE_MODE,
  parsePublicKeys,
  PKI_DIR_MODE,
  publicKeysEqual,
  readKeyText,
  type PublicKeys,
} from './keys.js'
import { isValidMinionId, validateMinionId } from './minion-id.js'

/** A minion key's state, as `salt-key -L` shows it. */
export type KeyState = 'pending' | 'accepted' | 'rejected' | 'denied'

/** Salt's directory for each state, under pki_dir. */
export const KEY_STATE_DIRS = {
  pending: 'minions_pre',
  accepted: 'minions',
  rejected: 'minions_rejected',
  denied: 'minions_denied',
} as const satisfies Record<KeyState, string>

export type KeyStateDir = (typeof KEY_STATE_DIRS)[KeyState]

/** `salt-key -L`: ids per state directory, sorted. */
export type KeyListing = Record<KeyStateDir, string[]>

/** `act` as in Salt's `salt/key` and `salt/auth` event data; `deny` records a key-mismatch attempt. */
export type KeyAct = 'pend' | 'accept' | 'reject' | 'delete' | 'deny'

export interface KeyChange {
  id: string
  act: KeyAct
  /** State the key left (absent for a new key). */
  from?: KeyState
  /** State the key entered (absent for a delete). */
  to?: KeyState
}

export interface KeyOperationResult {
  /** What changed, for `salt/key` events. Empty when nothing matched. */
  changes: KeyChange[]
  /** True when an accepted key left (or was replaced): the caller must rotate the session key. */
  rotateSession: boolean
}

export interface SubmitOptions {
  /** Salt's `auto_accept`: new (and pending, matching) keys are accepted at once. */
  autoAccept?: boolean
  /** Salt's `open_mode`: every key is accepted, replacing whatever was there. Insecure; for recovery. */
  openMode?: boolean
  /**
   * When the attempt was signed (its `_auth` timestamp, in the master's clock as the minion knows it).
   * After `brine-key -d`, `autoAccept` applies only to attempts signed after the deletion: an older one is a
   * recording replayed, and lands in pending like any new key. Absent: treated as older than any deletion.
   */
  signedAt?: number
}

export interface SubmitResult extends KeyOperationResult {
  /** The state the authenticating minion ends in; `denied` means its key did not match the one on file. */
  state: KeyState
  keyMismatch: boolean
}

export interface KeyRecord {
  id: string
  state: KeyState
  keys: PublicKeys
  /** A different key that tried to authenticate under this id (Salt's minions_denied), if any. */
  denied?: PublicKeys
}

export interface KeyFinger {
  id: string
  state: KeyState
  fingerprint: string
}

export interface AcceptOptions {
  /** Also accept rejected keys (`salt-key --include-rejected`). */
  includeRejected?: boolean
  /** Also accept denied keys, replacing the accepted one (`--include-denied`). */
  includeDenied?: boolean
}

export interface RejectOptions {
  /** Also reject accepted keys (`salt-key --include-accepted`). */
  includeAccepted?: boolean
  /** Also reject denied keys (`--include-denied`). */
  includeDenied?: boolean
}

export interface PkiStoreOptions {
  logger?: Logger
  /**
   * How long a looked-up accepted key is trusted before its file is checked again, ms (default
   * {@link DEFAULT_KEY_RECHECK_MS}). Changes made through this store are seen at once; this bounds
   * how late a change made by another process (a key file removed by hand) is noticed. 0 checks
   * the file on every lookup.
   */
  recheckMs?: number
  /** Clock for the recheck window and the time a deletion is recorded at (ms since the epoch; tests inject one). */
  now?: () => number
  /**
   * Keys `minions_pre` may hold (`max_pending_keys`, default {@link DEFAULT_MAX_PENDING_KEYS}): a new id's
   * attempt beyond it throws PendingKeyLimitError and writes nothing. Keys already pending, accepted ones
   * and `auto_accept`/`open_mode` acceptances are not held back.
   */
  maxPending?: number
}

/** `max_pending_keys`: a fleet bringing up thousands of minions at once fits; an id-inventing client is stopped. */
export const DEFAULT_MAX_PENDING_KEYS = 5000
/** How long a count of `minions_pre` is trusted before the directory is read again (brine-key changes it from outside). */
const PENDING_RECOUNT_MS = 1000

/** A second: the file check is a stat per sealed request otherwise, the master's largest cost per return. */
export const DEFAULT_KEY_RECHECK_MS = 1000

const STATES: readonly KeyState[] = ['pending', 'accepted', 'rejected', 'denied']
// Order a minion's state is resolved in, as Salt's _auth checks: rejected first, then accepted, then pending.
const PRIMARY_ORDER: readonly KeyState[] = ['rejected', 'accepted', 'pending', 'denied']
/** Temporary files live here, outside the state dirs, so a listing never shows a half-written key. */
const STAGING_DIR = '.pki-tmp'
/**
 * `<id>` here holds when that id's key was last deleted (ms since the epoch): an `_auth` signed before
 * it is not auto-accepted. Removed once the id is accepted again.
 */
const DELETED_DIR = '.pki-deleted'
/**
 * `<id>` here marks an accepted key as a syndic's (docs/security.md): it holds that key's fingerprint, so
 * the mark follows the key, not the id: a key replaced under the id (open_mode, --include-denied) is no
 * syndic until an operator says so again. Only a syndic may send `_syndic_return` and `_syndic_event`.
 */
export const SYNDICS_DIR = 'syndics'

/**
 * A read of `minions/`, kept while the directory is unchanged: its inode and mtime before the read, and when
 * the read began (wall clock, as file times are).
 */
interface AcceptedListing {
  ids: Promise<readonly string[]>
  ino: bigint
  mtimeNs: bigint
  readAt: number
}

/**
 * How long after a directory's mtime a read of it is taken to have seen every change stamped with that mtime.
 * A file system stamps times from a coarse clock (a kernel tick, or a whole second on some), so a change right
 * after a read may leave the mtime as it was; a read this long after the mtime cannot have been followed by one.
 */
const SETTLED_DIR_MS = 2000

interface CachedKeys {
  keys: PublicKeys
  /** The key file's path, made from the id once it was validated. */
  file: string
  ino: bigint
  mtimeNs: bigint
  size: bigint
  /** When the file was last found unchanged (options.now). */
  checkedAt: number
}

/**
 * A deletion marker's text, read synchronously: a few bytes on a local disk, looked up (and mostly not found) at every
 * new key's `_auth` under `auto_accept`, where the promise API's hand-offs cost the main thread more than the read.
 * O_NONBLOCK, so a FIFO put in its place cannot hang the thread (it is refused as not a regular file).
 */
function readMarkerSync(file: string): string {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    if (!fstatSync(fd).isFile()) throw new KeyFileError(file, 'is not a regular file')
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/** A {@link PkiStore.submit} waiting for its batch. */
interface Submission {
  id: string
  keys: PublicKeys
  options: SubmitOptions
  resolve: (result: SubmitResult) => void
  reject: (error: unknown) => void
}

/** A submission decided, with the key file its batch writes for it. */
interface Decided {
  submission: Submission
  result: SubmitResult
  write?: KeyState
}

/**
 * The master's minion key store: Salt's state directories under pki_dir, one file per minion id
 * holding its public keys. Every id is validated before a path is built. Writes are atomic
 * (temporary file, then rename) and files are 0600. Operations in one process are serialised;
 * each returns what changed so the caller can fire `salt/key` events and rotate the session key.
 */
export class PkiStore {
  readonly pkiDir: string
  readonly #logger: Logger
  /** A peer can send `_auth` with someone else's id as often as it likes: 10 lines a minute, then a count. */
  readonly #takeoverLog = new LogLimiter()
  readonly #accepted = new Map<string, CachedKeys>()
  readonly #recheckMs: number
  #acceptedListing: AcceptedListing | undefined
  /** Bumped by every change to an accepted key made through this store. */
  #acceptedGeneration = 0
  readonly #now: () => number
  #queue: Promise<unknown> = Promise.resolve()
  /** Submissions waiting for their batch to run ({@link submit}); undefined once it started or another mutation was queued. */
  #openBatch: Submission[] | undefined
  /** Keys a running batch decided to make pending whose files are not written yet: counted toward `max_pending_keys`. */
  #pendingUnwritten = 0
  #keyFileBatches = 0
  readonly #maxPending: number
  /** `minions_pre`'s size when last read, plus what this store wrote since; undefined after any other change. */
  #pending: { count: number; at: number } | undefined
  /** A client inventing ids is a peer's doing: one line per minute, then a count of the rest. */
  readonly #pendingLimitLog = new LogLimiter({ burst: 1 })
  #pendingRefused = 0

  private constructor(pkiDir: string, logger: Logger, options: PkiStoreOptions) {
    this.pkiDir = pkiDir
    this.#logger = logger
    this.#recheckMs = options.recheckMs ?? DEFAULT_KEY_RECHECK_MS
    this.#now = options.now ?? Date.now
    this.#maxPending = options.maxPending ?? DEFAULT_MAX_PENDING_KEYS
  }

  /** Batches of key files {@link submit} wrote (each file synced, the batch's syncs at once), since this store was opened. */
  get keyFileBatches(): number {
    return this.#keyFileBatches
  }

  /** `_auth` attempts of new ids refused at `max_pending_keys`, since this store was opened. */
  get pendingRefused(): number {
    return this.#pendingRefused
  }

  /** Throws PendingKeyLimitError (counted, logged once per interval) when `minions_pre` is full. */
  async #admitPending(id: string): Promise<void> {
    const now = this.#now()
    if (this.#pending === undefined || now - this.#pending.at >= PENDING_RECOUNT_MS) {
      this.#pending = { count: (await this.#countState('pending')) + this.#pendingUnwritten, at: now }
    }
    if (this.#pending.count < this.#maxPending) {
      this.#pending.count++
      return
    }
    this.#pendingRefused++
    const error = new PendingKeyLimitError(id, this.#maxPending)
    this.#pendingLimitLog.warning(this.#logger, `${error.message} (${this.#pendingRefused} refused since start)`, 'refusals at max_pending_keys')
    throw error
  }

  async #countState(state: KeyState): Promise<number> {
    try {
      return (await readdir(join(this.pkiDir, KEY_STATE_DIRS[state]))).length
    } catch (error) {
      if (isNotFound(error)) return 0
      throw error
    }
  }

  /** Opens (creating 0700 directories as needed) the store under `pkiDir`. */
  static async open(pkiDir: string, options: PkiStoreOptions = {}): Promise<PkiStore> {
    const logger = options.logger ?? silentLogger
    await ensurePkiDir(pkiDir, logger)
    for (const dir of [...Object.values(KEY_STATE_DIRS), SYNDICS_DIR, STAGING_DIR, DELETED_DIR]) {
      await mkdir(join(pkiDir, dir), { recursive: true, mode: PKI_DIR_MODE })
    }
    return new PkiStore(pkiDir, logger, options)
  }

  /** Path of `id`'s file in `state`; the id is validated first, so nothing unchecked reaches a path. */
  #path(state: KeyState, id: string): string {
    validateMinionId(id)
    return join(this.pkiDir, KEY_STATE_DIRS[state], id)
  }

  async #read(state: KeyState, id: string): Promise<PublicKeys | undefined> {
    const file = this.#path(state, id)
    try {
      return parsePublicKeys(await readKeyText(file, false), file)
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
  }

  async #write(state: KeyState, id: string, keys: PublicKeys): Promise<void> {
    if (state === 'accepted') this.#forgetAccepted(id)
    await writeFileAtomic(this.#path(state, id), formatPublicKeys(keys), { mode: KEY_FILE_MODE, tempDir: join(this.pkiDir, STAGING_DIR) })
    if (state === 'accepted') await this.#clearDeleted(id)
  }

  #deletedPath(id: string): string {
    validateMinionId(id)
    return join(this.pkiDir, DELETED_DIR, id)
  }

  /** When `id`'s key was last deleted through this store's directory, if it has not been accepted since. */
  async deletedAt(id: string): Promise<number | undefined> {
    let text: string
    try {
      text = readMarkerSync(this.#deletedPath(id))
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw error
    }
    const at = Number(text.trim())
    // An unreadable marker still marks a deletion: no replay gets through because a file was damaged.
    return Number.isFinite(at) ? at : Number.POSITIVE_INFINITY
  }

  async #markDeleted(id: string): Promise<void> {
    await writeFileAtomic(this.#deletedPath(id), `${this.#now()}\n`, { mode: KEY_FILE_MODE, tempDir: join(this.pkiDir, STAGING_DIR) })
  }

  async #clearDeleted(id: string): Promise<void> {
    try {
      // Synchronous, as the marker's read is: at every new key's acceptance, and there is mostly none to remove.
      unlinkSync(this.#deletedPath(id))
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
  }

  /** `autoAccept` unless `id` was deleted after (or without proof of when) this attempt was signed. */
  async #mayAutoAccept(id: string, options: SubmitOptions, alreadyPending: boolean): Promise<boolean> {
    if (options.autoAccept !== true) return false
    const deleted = await this.deletedAt(id)
    if (deleted === undefined) return true
    if (options.signedAt !== undefined && options.signedAt > deleted) return true
    // Said once, when the key becomes pending; replays of the same request after that change nothing.
    const log = alreadyPending ? this.#logger.debug.bind(this.#logger) : this.#logger.warning.bind(this.#logger)
    log(
      `not auto-accepting minion ${JSON.stringify(id)}: its _auth was signed ${options.signedAt === undefined ? 'at an unknown time' : `at ${new Date(options.signedAt).toISOString()}`}, ` +
        `not after its key was deleted (${Number.isFinite(deleted) ? new Date(deleted).toISOString() : 'unknown time'}); a replayed request? The key is pending (brine-key -a ${id} accepts it)`,
    )
    return false
  }

  async #remove(state: KeyState, id: string): Promise<boolean> {
    if (state === 'accepted') {
      this.#forgetAccepted(id)
      await this.#unmarkSyndic(id)
    }
    try {
      await unlink(this.#path(state, id))
      return true
    } catch (error) {
      if (isNotFound(error)) return false
      throw error
    }
  }

  async #move(from: KeyState, to: KeyState, id: string): Promise<void> {
    if (from === 'accepted' || to === 'accepted') this.#forgetAccepted(id)
    if (from === 'accepted') await this.#unmarkSyndic(id)
    await rename(this.#path(from, id), this.#path(to, id))
    if (to === 'accepted') await this.#clearDeleted(id)
  }

  #exists(state: KeyState, id: string): boolean {
    return statSync(this.#path(state, id), { throwIfNoEntry: false }) !== undefined
  }

  #forgetAccepted(id: string): void {
    this.#acceptedGeneration++
    this.#accepted.delete(id)
  }

  /** Runs `task` after every earlier mutation of this store has finished. */
  #exclusive<T>(task: () => Promise<T>): Promise<T> {
    this.#openBatch = undefined
    const run = this.#queue.then(task, task)
    this.#queue = run.catch(() => {})
    return run
  }

  #listState(state: KeyState): Promise<string[]> {
    return this.#listDir(KEY_STATE_DIRS[state])
  }

  async #listDir(name: string): Promise<string[]> {
    const dir = join(this.pkiDir, name)
    let names: string[]
    try {
      names = await readdir(dir)
    } catch (error) {
      if (isNotFound(error)) return []
      throw error
    }
    return this.#validIds(dir, names)
  }

  /**
   * The accepted ids, read on this thread: the publish path waits for this listing, and a read handed to the
   * thread pool would put two thread wake-ups on every job's way out while the directory is re-read (for
   * {@link SETTLED_DIR_MS} after each key change). A directory listing from the kernel's cache is cheaper than
   * the hop.
   */
  #listAcceptedNow(): string[] {
    const dir = join(this.pkiDir, KEY_STATE_DIRS.accepted)
    let names: string[]
    try {
      names = readdirSync(dir)
    } catch (error) {
      if (isNotFound(error)) return []
      throw error
    }
    return this.#validIds(dir, names)
  }

  #validIds(dir: string, names: readonly string[]): string[] {
    const ids = names.filter((name) => {
      if (isValidMinionId(name)) return true
      this.#logger.warning(`ignoring ${JSON.stringify(name)} in ${dir}: not a valid minion id`)
      return false
    })
    return ids.sort()
  }

  /** Every id in any state: a pattern naming one of them matches it literally (see matchIds). */
  async #allIds(): Promise<Set<string>> {
    const listing = await this.list()
    return new Set(Object.values(listing).flat())
  }

  /** `salt-key -L`. */
  async list(): Promise<KeyListing> {
    const [pending, accepted, rejected, denied] = await Promise.all(STATES.map((state) => this.#listState(state)))
    return { minions_pre: pending!, minions: accepted!, minions_rejected: rejected!, minions_denied: denied! }
  }

  /**
   * The accepted ids, sorted (what `list().minions` holds): the publish path's listing, read once per change
   * of `minions/` instead of four directories per job. A stat of the directory (its inode and mtime) tells
   * whether the last read still holds, whoever changed it (this store, or `brine-key` in another process);
   * a read that began less than {@link SETTLED_DIR_MS} after that mtime is not trusted (a change within
   * the same clock tick leaves the mtime as it was), so a change is never missed, only re-read for.
   */
  acceptedIds(): Promise<readonly string[]> {
    const info = statSync(join(this.pkiDir, KEY_STATE_DIRS.accepted), { bigint: true, throwIfNoEntry: false })
    if (info === undefined) return Promise.resolve(this.#listAcceptedNow())
    const cached = this.#acceptedListing
    if (
      cached !== undefined &&
      cached.ino === info.ino &&
      cached.mtimeNs === info.mtimeNs &&
      cached.readAt - Number(info.mtimeNs / 1_000_000n) >= SETTLED_DIR_MS
    )
      return cached.ids
    // Stat, clock, then read: a change between them gives the directory another mtime, and the next call reads again.
    const readAt = Date.now()
    let ids: Promise<readonly string[]>
    try {
      ids = Promise.resolve(Object.freeze(this.#listAcceptedNow()))
    } catch (error) {
      ids = Promise.reject(error as Error)
    }
    const listing: AcceptedListing = { ids, ino: info.ino, mtimeNs: info.mtimeNs, readAt }
    this.#acceptedListing = listing
    listing.ids.catch(() => {
      if (this.#acceptedListing === listing) this.#acceptedListing = undefined
    })
    return listing.ids
  }

  /** The state `id` is in (rejected, accepted, pending, then denied, as Salt resolves it), or undefined. */
  async state(id: string): Promise<KeyState | undefined> {
    return (await this.get(id))?.state
  }

  /** `id`'s public keys and state; `denied` holds a mismatching key that tried to use this id. */
  async get(id: string): Promise<KeyRecord | undefined> {
    validateMinionId(id)
    const found = await Promise.all(PRIMARY_ORDER.map(async (state) => [state, await this.#read(state, id)] as const))
    const primary = found.find(([, keys]) => keys !== undefined)
    if (primary === undefined) return undefined
    const [state, keys] = primary as readonly [KeyState, PublicKeys]
    const denied = state === 'denied' ? undefined : found.find(([s]) => s === 'denied')?.[1]
    return denied === undefined ? { id, state, keys } : { id, state, keys, denied }
  }

  /**
   * `id`'s accepted public keys when this store holds them and they are still current, without waiting: checked
   * within `recheckMs`, or found unchanged by a stat now (as {@link acceptedKeys} checks them). Undefined when they
   * are not held or the file changed or went: {@link acceptedKeys} then reads or refuses. A sealed request whose
   * minion's keys are held is opened without a promise and a turn of the microtask queue for the lookup.
   */
  acceptedKeysNow(id: string): PublicKeys | undefined {
    const cached = this.#accepted.get(id)
    if (cached === undefined) return undefined
    const now = this.#now()
    if (now - cached.checkedAt < this.#recheckMs) return cached.keys
    // Synchronous on purpose: a local stat takes ~2 µs, the promise version costs the main thread
    // many times that in hand-offs (measured), and this runs once per minion per window.
    const info = statSync(cached.file, { bigint: true, throwIfNoEntry: false })
    if (info === undefined || cached.ino !== info.ino || cached.mtimeNs !== info.mtimeNs || cached.size !== info.size) return undefined
    cached.checkedAt = now
    return cached.keys
  }

  /**
   * `id`'s accepted public keys, or undefined. The hot path of every sealed request: a cached copy
   * is trusted for `recheckMs`, then reused while the file's inode, mtime and size are unchanged
   * (any write renames a new inode in). Changes made through this store drop the copy at once;
   * another process running `brine-key -d` on the files is seen within `recheckMs`.
   */
  async acceptedKeys(id: string): Promise<PublicKeys | undefined> {
    // Held and current (within the window, or its file unchanged): no read.
    const held = this.acceptedKeysNow(id)
    if (held !== undefined) return held
    const cached = this.#accepted.get(id)
    const now = this.#now()
    // Only a validated id is ever cached, so a cached one is not validated again.
    const file = cached?.file ?? this.#path('accepted', id)
    // One check per window: lookups that arrive while this one reads the file use the copy meanwhile.
    if (cached !== undefined) cached.checkedAt = now
    // A mutation while this lookup is in flight must not be overwritten by what the lookup read before it.
    const generation = this.#acceptedGeneration
    const info = statSync(file, { bigint: true, throwIfNoEntry: false })
    if (info === undefined) {
      this.#accepted.delete(id)
      return undefined
    }
    const keys = await this.#read('accepted', id)
    if (keys === undefined || generation !== this.#acceptedGeneration) this.#accepted.delete(id)
    else this.#accepted.set(id, { keys, file, ino: info.ino, mtimeNs: info.mtimeNs, size: info.size, checkedAt: now })
    return keys
  }

  /**
   * Records an authentication attempt, as Salt's master `_auth` does: an unknown id becomes
   * pending (accepted under `autoAccept`/`openMode`); a known id with the same keys keeps its
   * state; a known id with different keys is a possible impersonation, so the new key goes to
   * minions_denied and the state is `denied` (the key on file is untouched).
   */
  async submit(id: string, keys: PublicKeys, options: SubmitOptions = {}): Promise<SubmitResult> {
    validateMinionId(id)
    if (!isBytes(keys.box, 32) || !isBytes(keys.sign, 32)) {
      throw new MalformedMessageError('public keys', 'box and sign must be 32 bytes each')
    }
    // The common case, an accepted minion coming back with its own key, changes nothing: answer it
    // without queueing behind every other submission (a restarted master meets all its minions at
    // once). Rejected still wins over accepted, as Salt resolves it.
    const known = await this.acceptedKeys(id)
    if (known !== undefined && publicKeysEqual(known, keys) && (options.openMode === true || !this.#exists('rejected', id))) {
      return { state: 'accepted', changes: [], rotateSession: false, keyMismatch: false }
    }
    return new Promise((resolve, reject) => this.#joinBatch({ id, keys, options, resolve, reject }))
  }

  /**
   * Queues a submission for the next batch: the submissions that arrive while the store is busy are decided one by
   * one as before, and the key files they write are then written together, their syncs under way at once (a fleet
   * authenticating at once needs one disk flush per batch, not one per minion, each waiting for the last). Each
   * submission still resolves only once its file is synced in place.
   */
  #joinBatch(submission: Submission): void {
    let batch = this.#openBatch
    if (batch === undefined) {
      const opened: Submission[] = []
      // #exclusive closes any open batch: a submission arriving after another mutation is queued runs after it.
      void this.#exclusive(() => this.#runBatch(opened))
      this.#openBatch = batch = opened
    }
    batch.push(submission)
  }

  async #runBatch(batch: Submission[]): Promise<void> {
    if (this.#openBatch === batch) this.#openBatch = undefined
    let decided: Decided[] = []
    const ids = new Set<string>()
    for (const submission of batch) {
      // A second attempt of one id must see what the first wrote: the files decided so far go to disk first.
      if (ids.has(submission.id)) {
        await this.#commit(decided)
        decided = []
        ids.clear()
      }
      ids.add(submission.id)
      try {
        decided.push({ submission, ...(await this.#decide(submission.id, submission.keys, submission.options)) })
      } catch (error) {
        submission.reject(error)
      }
    }
    await this.#commit(decided)
  }

  /** Writes the decided submissions' key files at once and answers each once its own file is in place. */
  async #commit(decided: readonly Decided[]): Promise<void> {
    if (decided.some(({ write }) => write !== undefined)) this.#keyFileBatches++
    const written = await Promise.allSettled(
      decided.map(async ({ submission, write }) => {
        if (write === undefined) return
        try {
          await this.#write(write, submission.id, submission.keys)
        } finally {
          if (write === 'pending') this.#pendingUnwritten--
        }
      }),
    )
    written.forEach((outcome, index) => {
      const { submission, result } = decided[index]!
      if (outcome.status === 'fulfilled') submission.resolve(result)
      else submission.reject(outcome.reason)
    })
  }

  /**
   * Salt's rules for one attempt, against the files as they are: the result, and the key file it leaves to write
   * (a new pending or accepted key, a denied one), which the batch writes. Every other change is made here.
   */
  async #decide(id: string, keys: PublicKeys, options: SubmitOptions): Promise<{ result: SubmitResult; write?: KeyState }> {
    const done = (state: KeyState, changes: KeyChange[] = [], rotateSession = false, keyMismatch = false): { result: SubmitResult } => ({
      result: { state, changes, rotateSession, keyMismatch },
    })
    const accepted = await this.#read('accepted', id)
    if (options.openMode === true) {
      if (accepted !== undefined && publicKeysEqual(accepted, keys)) return done('accepted')
      const from = accepted !== undefined ? 'accepted' : await this.state(id)
      await this.#write('accepted', id, keys)
      await this.#remove('pending', id)
      await this.#remove('rejected', id)
      const change: KeyChange = from === undefined ? { id, act: 'accept', to: 'accepted' } : { id, act: 'accept', from, to: 'accepted' }
      return done('accepted', [change], accepted !== undefined)
    }
    if ((await this.#read('rejected', id)) !== undefined) return done('rejected')
    const deny = (): { result: SubmitResult; write: KeyState } => {
      this.#takeoverLog.log(
        this.#logger,
        'error',
        `authentication attempt from minion ${JSON.stringify(id.slice(0, 80))} with a key that does not match the one on file; key stored in minions_denied`,
        'key-mismatch errors',
      )
      return { ...done('denied', [{ id, act: 'deny', to: 'denied' }], false, true), write: 'denied' }
    }
    if (accepted !== undefined) return publicKeysEqual(accepted, keys) ? done('accepted') : deny()
    const pending = await this.#read('pending', id)
    const autoAccept = await this.#mayAutoAccept(id, options, pending !== undefined)
    if (pending !== undefined) {
      if (!publicKeysEqual(pending, keys)) return deny()
      if (!autoAccept) return done('pending')
      await this.#move('pending', 'accepted', id)
      return done('accepted', [{ id, act: 'accept', from: 'pending', to: 'accepted' }])
    }
    if (autoAccept) return { ...done('accepted', [{ id, act: 'accept', to: 'accepted' }]), write: 'accepted' }
    await this.#admitPending(id)
    this.#pendingUnwritten++
    return { ...done('pending', [{ id, act: 'pend', to: 'pending' }]), write: 'pending' }
  }

  /** Moves every key in `sources` whose id matches `match` (globs or ids) to `target`. */
  #transition(match: string | readonly string[], sources: readonly KeyState[], target: KeyState, act: KeyAct): Promise<KeyOperationResult> {
    return this.#exclusive(async () => {
      this.#pending = undefined
      const changes: KeyChange[] = []
      let rotateSession = false
      const known = await this.#allIds()
      for (const from of sources) {
        for (const id of matchIds(await this.#listState(from), match, known)) {
          const replacesAccepted = target === 'accepted' && from === 'denied' && (await this.#read('accepted', id)) !== undefined
          try {
            await this.#move(from, target, id)
          } catch (error) {
            if (isNotFound(error)) continue // another process (brine-key) moved it first
            throw error
          }
          if (replacesAccepted) rotateSession = true
          if (from === 'accepted') rotateSession = true
          changes.push({ id, act, from, to: target })
        }
      }
      return { changes, rotateSession }
    })
  }

  /** `salt-key -a`: accepts matching pending keys (and rejected/denied ones when asked). */
  accept(match: string | readonly string[], options: AcceptOptions = {}): Promise<KeyOperationResult> {
    const sources: KeyState[] = ['pending']
    if (options.includeRejected === true) sources.push('rejected')
    if (options.includeDenied === true) sources.push('denied')
    return this.#transition(match, sources, 'accepted', 'accept')
  }

  /** `salt-key -r`: rejects matching pending keys (and accepted/denied ones when asked). */
  reject(match: string | readonly string[], options: RejectOptions = {}): Promise<KeyOperationResult> {
    const sources: KeyState[] = ['pending']
    if (options.includeAccepted === true) sources.push('accepted')
    if (options.includeDenied === true) sources.push('denied')
    return this.#transition(match, sources, 'rejected', 'reject')
  }

  /**
   * `salt-key -d`: deletes matching keys in every state, and records when: from then on `autoAccept`
   * takes only an `_auth` signed after the deletion (see {@link SubmitOptions.signedAt}).
   */
  delete(match: string | readonly string[]): Promise<KeyOperationResult> {
    return this.#exclusive(async () => {
      this.#pending = undefined
      const changes: KeyChange[] = []
      let rotateSession = false
      const known = await this.#allIds()
      for (const from of STATES) {
        for (const id of matchIds(await this.#listState(from), match, known)) {
          // The marker first: a key is never gone without its deletion recorded.
          await this.#markDeleted(id)
          if (!(await this.#remove(from, id))) continue
          if (from === 'accepted') rotateSession = true
          changes.push({ id, act: 'delete', from })
        }
      }
      return { changes, rotateSession }
    })
  }

  /**
   * `brine-key --accept-syndic`: accepts the matching pending keys and marks them, and the matching
   * accepted ones, as syndics' keys. Returns the key changes (pending to accepted) and the ids marked.
   */
  acceptSyndic(match: string | readonly string[]): Promise<KeyOperationResult & { syndics: string[] }> {
    return this.#exclusive(async () => {
      this.#pending = undefined
      const changes: KeyChange[] = []
      const syndics: string[] = []
      const known = await this.#allIds()
      for (const from of ['pending', 'accepted'] as const) {
        for (const id of matchIds(await this.#listState(from), match, known)) {
          if (from === 'pending') {
            if (this.#exists('accepted', id)) continue // a pending key beside an accepted one is a second key: not this
            await this.#move('pending', 'accepted', id)
            changes.push({ id, act: 'accept', from, to: 'accepted' })
          }
          const keys = await this.#read('accepted', id)
          if (keys === undefined) continue
          await writeFileAtomic(this.#syndicPath(id), `${fingerprint(keys)}\n`, { mode: KEY_FILE_MODE, tempDir: join(this.pkiDir, STAGING_DIR) })
          syndics.push(id)
        }
      }
      return { changes, rotateSession: false, syndics: [...new Set(syndics)].sort() }
    })
  }

  /** True when `id`'s accepted key is the one an operator marked as a syndic's. */
  async isSyndic(id: string): Promise<boolean> {
    let marked: string
    try {
      marked = (await readFile(this.#syndicPath(id), 'utf8')).trim()
    } catch (error) {
      if (isNotFound(error)) return false
      throw error
    }
    const keys = await this.acceptedKeys(id)
    return keys !== undefined && fingerprint(keys) === marked
  }

  /** The ids whose accepted key is marked as a syndic's, sorted. */
  async syndics(): Promise<string[]> {
    const marked = await this.#listDir(SYNDICS_DIR)
    const out: string[] = []
    for (const id of marked) if (await this.isSyndic(id)) out.push(id)
    return out
  }

  #syndicPath(id: string): string {
    validateMinionId(id)
    return join(this.pkiDir, SYNDICS_DIR, id)
  }

  async #unmarkSyndic(id: string): Promise<void> {
    try {
      await unlink(this.#syndicPath(id))
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
  }

  /** `salt-key -A`: accepts every pending key. */
  acceptAll(options: AcceptOptions = {}): Promise<KeyOperationResult> {
    return this.accept('*', options)
  }

  /** `salt-key -R`: rejects every pending key. */
  rejectAll(options: RejectOptions = {}): Promise<KeyOperationResult> {
    return this.reject('*', options)
  }

  /** `salt-key -D`: deletes every key. */
  deleteAll(): Promise<KeyOperationResult> {
    return this.delete('*')
  }

  /** `salt-key -f`: fingerprints of matching keys in every state. */
  async finger(match: string | readonly string[]): Promise<KeyFinger[]> {
    const out: KeyFinger[] = []
    const known = await this.#allIds()
    for (const state of STATES) {
      for (const id of matchIds(await this.#listState(state), match, known)) {
        const keys = await this.#read(state, id)
        if (keys !== undefined) out.push({ id, state, fingerprint: fingerprint(keys) })
      }
    }
    return out
  }
}
