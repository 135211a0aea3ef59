import { diffieHellman } from 'node:crypto'
import nacl from 'tweetnacl'
import { decode, LruMap, type DecodeLimits, type WireValue } from '@brine/core'
import { isBytes, randomNonce } from './bytes.js'
import { CryptCache } from './crypt-cache.js'
import { DecryptError, MalformedMessageError, MinionNotAcceptedError, quote } from './errors.js'
import { validateMinionId } from './minion-id.js'
import { privateKeyFromRaw, publicKeyFromRaw } from './raw-keys.js'
import { openBox, sealEncoded } from './secretbox.js'

/** Marker of a message sealed by {@link PeerBox}. */
export const BOX_ENC = 'box'

/** A minion↔master message as it crosses the wire. `id` is always the minion's id (whose key pair seals it). */
export interface SealedMessage {
  enc: typeof BOX_ENC
  id: string
  nonce: Uint8Array
  box: Uint8Array
}

/** Which end of the pair seals; a message must come from the other end (no reflection). */
export type BoxRole = 'minion' | 'master'

export interface PeerBoxOptions {
  /** The minion id this pair belongs to. */
  id: string
  /** This side's role. */
  role: BoxRole
  /** This side's X25519 secret key. */
  secretKey: Uint8Array
  /** The peer's X25519 public key. */
  peerPublicKey: Uint8Array
  /** Imports the secret key and draws nonces through this cache (see {@link CryptCache}). */
  cache?: CryptCache
}

/** A {@link PeerBox} from the shared key {@link boxSharedKey} computed (e.g. on a worker thread). */
export interface SharedPeerBoxOptions {
  id: string
  role: BoxRole
  peerPublicKey: Uint8Array
  sharedKey: Uint8Array
  /** Draws nonces through this cache's pool (see {@link CryptCache}). */
  cache?: CryptCache
}

/** "expand 32-byte k", the HSalsa20 constant of nacl's box.before. */
const SIGMA = new Uint8Array(Buffer.from('expand 32-byte k', 'latin1'))
const ZERO_NONCE = new Uint8Array(16)
/** tweetnacl's low-level HSalsa20 (its typings leave `lowlevel` out). */
const hsalsa20 = (nacl as unknown as { lowlevel: { crypto_core_hsalsa20(out: Uint8Array, input: Uint8Array, key: Uint8Array, constant: Uint8Array): number } })
  .lowlevel.crypto_core_hsalsa20

function agree(peerPublicKey: Uint8Array, secretKey: Uint8Array, cache: CryptCache | undefined): Uint8Array {
  let secret: Buffer
  try {
    const publicKey = cache !== undefined ? cache.agreementKey(peerPublicKey) : publicKeyFromRaw('X25519', peerPublicKey)
    const privateKey = cache !== undefined ? cache.x25519Key(secretKey) : privateKeyFromRaw('X25519', secretKey)
    secret = diffieHellman({ privateKey, publicKey })
  } catch (error) {
    throw new DecryptError('box public key', `cannot agree a key with it (${(error as Error).message}); a low-order point?`)
  }
  const shared = new Uint8Array(nacl.box.sharedKeyLength)
  hsalsa20(shared, ZERO_NONCE, secret, SIGMA)
  return shared
}

/**
 * The shared key of a box pair, exactly `nacl.box.before`: HSalsa20 over the X25519 secret. The
 * X25519 step runs in OpenSSL (about five times tweetnacl's), which matters when a restarted
 * master meets a thousand minions at once; with a `cache`, each pair is agreed once. A peer key
 * of low order (an all-zero secret, which nacl would accept) is refused.
 */
export function boxSharedKey(peerPublicKey: Uint8Array, secretKey: Uint8Array, cache?: CryptCache): Uint8Array {
  if (!isBytes(secretKey, nacl.box.secretKeyLength)) throw new RangeError('box secret key must be 32 bytes')
  if (!isBytes(peerPublicKey, nacl.box.publicKeyLength)) throw new RangeError('box public key must be 32 bytes')
  if (cache === undefined) return agree(peerPublicKey, secretKey, undefined)
  return cache.sharedKey(peerPublicKey, secretKey, () => agree(peerPublicKey, secretKey, cache))
}

export interface OpenOptions {
  /** Refuse messages sealed more than this many ms ago (or as far in the future); default: no limit. */
  maxAgeMs?: number
  now?: number
  /**
   * Entry and depth bounds on the opened content (the request port's `max_frame_entries` and
   * `max_frame_depth`): a sealed frame under the size limit must not carry more than a clear one may.
   * Over them, FrameLimitError naming the bound; default: no bound (what the master itself sent).
   */
  limits?: DecodeLimits
}

export interface OpenedMessage {
  load: WireValue
  /** When the sender sealed it (its clock, ms since the epoch). */
  timestamp: number
}

const otherRole = (role: BoxRole): BoxRole => (role === 'minion' ? 'master' : 'minion')

/**
 * Authenticated encryption between one minion and the master (nacl `box`). The shared key is
 * computed once (`nacl.box.before`) and reused. Inside the box travel the sender's role, the
 * minion id and a timestamp, so a message cannot be reflected back to its sender or re-labelled
 * with another id, and a receiver may bound its age.
 */
export class PeerBox {
  readonly id: string
  readonly role: BoxRole
  readonly peerPublicKey: Uint8Array
  readonly #shared: Uint8Array
  readonly #cache: CryptCache | undefined
  /** How messages and errors name the peer and what was opened. */
  readonly #peerName: string
  readonly #what: string

  constructor(options: PeerBoxOptions | SharedPeerBoxOptions) {
    validateMinionId(options.id)
    if (!isBytes(options.peerPublicKey, nacl.box.publicKeyLength)) throw new RangeError('box public key must be 32 bytes')
    this.id = options.id
    this.role = options.role
    this.peerPublicKey = options.peerPublicKey
    this.#cache = options.cache
    // Made once per box, not per message: the master opens every request of a minion with its one box.
    this.#peerName = `minion ${quote(this.id)}`
    this.#what = `sealed message from ${this.role === 'master' ? this.#peerName : 'the master'}`
    if ('sharedKey' in options) {
      if (!isBytes(options.sharedKey, nacl.box.sharedKeyLength)) throw new RangeError('box shared key must be 32 bytes')
      this.#shared = options.sharedKey
    } else {
      this.#shared = boxSharedKey(options.peerPublicKey, options.secretKey, options.cache)
    }
  }

  seal(load: WireValue, now: number = Date.now()): SealedMessage {
    const nonce = randomNonce(nacl.box.nonceLength, this.#cache)
    const box = sealEncoded([this.role, this.id, now, load], nonce, this.#shared)
    return { enc: BOX_ENC, id: this.id, nonce, box }
  }

  /** Opens a message from the peer; DecryptError unless it was sealed by the holder of the peer's secret key. */
  open(message: unknown, options: OpenOptions = {}): WireValue {
    return this.openDetailed(message, options).load
  }

  openDetailed(message: unknown, options: OpenOptions = {}): OpenedMessage {
    const sealed = checkSealed(message)
    if (sealed.id !== this.id) throw new DecryptError(`message for minion ${quote(sealed.id)}`, `this box belongs to ${quote(this.id)}`)
    const what = this.#what
    const plain = openBox(sealed.box, sealed.nonce, this.#shared)
    if (plain === null) throw new DecryptError(what, "was not sealed with the sender's key")
    let inner: unknown
    // The [role, id, timestamp, load] wrapper is one level more than the load a clear request carries.
    const limits = options.limits === undefined ? undefined : { maxEntries: options.limits.maxEntries, maxDepth: options.limits.maxDepth + 1 }
    try {
      inner = decode(plain, this.#peerName, limits)
    } catch (error) {
      if ((error as Error).name === 'FrameLimitError') throw error
      throw new MalformedMessageError(what, 'content is not msgpack', { cause: error })
    }
    if (!Array.isArray(inner) || inner.length !== 4) throw new MalformedMessageError(what, 'content is not [role, id, timestamp, load]')
    const [role, id, timestamp, load] = inner as [unknown, unknown, unknown, WireValue]
    if (role !== otherRole(this.role)) throw new DecryptError(what, `was sealed by the ${String(role)} side, not the peer (reflected?)`)
    if (id !== this.id) throw new DecryptError(what, 'names another minion inside the box')
    if (typeof timestamp !== 'number') throw new MalformedMessageError(what, 'timestamp is not a number')
    if (options.maxAgeMs !== undefined && Math.abs((options.now ?? Date.now()) - timestamp) > options.maxAgeMs) {
      throw new DecryptError(what, `sealed at ${new Date(timestamp).toISOString()}, outside the ${options.maxAgeMs} ms window`)
    }
    return { load, timestamp }
  }
}

function checkSealed(message: unknown): SealedMessage {
  if (typeof message !== 'object' || message === null) throw new MalformedMessageError('sealed message', 'not a map')
  const { enc, id, nonce, box } = message as Partial<SealedMessage>
  if (enc !== BOX_ENC) throw new MalformedMessageError('sealed message', `enc is not '${BOX_ENC}'`)
  if (typeof id !== 'string') throw new MalformedMessageError('sealed message', 'id is not a string')
  if (!isBytes(nonce, nacl.box.nonceLength)) throw new MalformedMessageError('sealed message', `nonce is not ${nacl.box.nonceLength} bytes`)
  if (!isBytes(box)) throw new MalformedMessageError('sealed message', 'box is not bytes')
  return { enc, id, nonce, box }
}

/** Looks up a minion's accepted X25519 public key; e.g. `(id) => store.acceptedKeys(id).then((k) => k?.box)`. */
export type AcceptedBoxKeyLookup = (id: string) => Promise<Uint8Array | undefined>

/** Computes a minion's shared key from its public key, e.g. on a worker thread; default: {@link boxSharedKey} inline. */
export type SharedKeyDerivation = (id: string, peerPublicKey: Uint8Array) => Promise<Uint8Array>

export interface MinionBoxesOptions {
  /** Most minions whose shared key is kept; the least recently used are dropped beyond it (default 16384). */
  maxEntries?: number
  /**
   * A minion's accepted X25519 public key when it can be told without waiting (e.g. `(id) => store.acceptedKeysNow(id)?.box`),
   * else undefined; without it {@link MinionBoxes.openNow} opens nothing.
   */
  lookupNow?: (id: string) => Uint8Array | undefined
  deriveSharedKey?: SharedKeyDerivation
  /** Key objects, agreed keys and nonces (default: a cache of this instance's own). */
  cache?: CryptCache
}

/** A minion's request opened by {@link MinionBoxes.open}. */
export interface OpenedRequest extends OpenedMessage {
  id: string
  nonce: Uint8Array
  /** The box it opened with: the reply is sealed with it (the key that sealed the request). */
  box: PeerBox
}

/**
 * The master's side of every minion's box. The claimed id in a message selects that minion's
 * *accepted* public key, so a message opens only if its sender holds that minion's secret key:
 * one minion cannot forge another's return. Shared keys are cached per minion and recomputed
 * when the accepted key changes.
 */
export class MinionBoxes {
  readonly #secretKey: Uint8Array
  readonly #lookup: AcceptedBoxKeyLookup
  readonly #lookupNow: ((id: string) => Uint8Array | undefined) | undefined
  readonly #derive: SharedKeyDerivation
  readonly #boxes: LruMap<string, PeerBox>
  readonly #cache: CryptCache
  /** Shared keys being derived ahead of a minion's request ({@link hold}), by minion id. */
  readonly #held = new Map<string, { peerPublicKey: Uint8Array; sharedKey: Promise<Uint8Array | undefined> }>()

  constructor(masterBoxSecret: Uint8Array, lookup: AcceptedBoxKeyLookup, options: MinionBoxesOptions = {}) {
    this.#secretKey = masterBoxSecret
    this.#lookup = lookup
    this.#lookupNow = options.lookupNow
    this.#boxes = new LruMap(options.maxEntries ?? 16_384)
    this.#cache = options.cache ?? new CryptCache({ sharedKeys: 1 }) // the boxes below keep the shared keys
    this.#derive = options.deriveSharedKey ?? (async (_id, peerPublicKey) => boxSharedKey(peerPublicKey, this.#secretKey, this.#cache))
  }

  async #box(id: string): Promise<PeerBox> {
    const known = this.#boxes.get(id)
    // Only ids that passed are kept, so a known one (every request after a minion's first) is not checked again.
    if (known === undefined) validateMinionId(id)
    const publicKey = await this.#lookup(id)
    if (publicKey === undefined) {
      this.#boxes.delete(id)
      throw new MinionNotAcceptedError(id)
    }
    // The box may have been made while the key was looked up (a key derived ahead came in).
    const kept = known ?? this.#boxes.get(id)
    if (kept !== undefined && Buffer.compare(kept.peerPublicKey, publicKey) === 0) return kept
    const held = this.#held.get(id)
    // A key derived ahead for this very public key (the one accepted now) is used; anything else is derived here.
    const ahead = held !== undefined && Buffer.compare(held.peerPublicKey, publicKey) === 0 ? await held.sharedKey : undefined
    const box = new PeerBox({ id, role: 'master', peerPublicKey: publicKey, sharedKey: ahead ?? (await this.#derive(id, publicKey)), cache: this.#cache })
    this.#boxes.set(id, box)
    return box
  }

  /**
   * Takes a shared key derived ahead of minion `id`'s next request for `peerPublicKey` (a restarted master derives
   * its fleet's in a few batches as it starts): that request waits for it instead of deriving its own. It is used
   * only while `peerPublicKey` is the key accepted for `id` when the request comes; undefined (a failed
   * derivation) leaves the request to derive as before.
   */
  hold(id: string, peerPublicKey: Uint8Array, sharedKey: Promise<Uint8Array | undefined>): void {
    if (this.#boxes.has(id)) return
    const entry = { peerPublicKey, sharedKey: sharedKey.catch(() => undefined) }
    this.#held.set(id, entry)
    void entry.sharedKey.then((key) => {
      if (this.#held.get(id) !== entry) return
      this.#held.delete(id)
      if (key === undefined || this.#boxes.has(id)) return
      // Kept as any box is: each request still looks the accepted key up and derives anew if it changed.
      try {
        this.#boxes.set(id, new PeerBox({ id, role: 'master', peerPublicKey, sharedKey: key, cache: this.#cache }))
      } catch {
        // An id or key the box refuses: the minion's own request derives (and refuses) as before.
      }
    })
  }

  /**
   * Opens a minion's sealed request; returns the authenticated minion id with the load, the time it was
   * sealed and its nonce (which the box authenticates: with the time, it names the request for a
   * {@link ReplayGuard}).
   */
  async open(message: unknown, options: OpenOptions = {}): Promise<OpenedRequest> {
    const sealed = checkSealed(message)
    const box = await this.#box(sealed.id)
    const { load, timestamp } = box.openDetailed(sealed, options)
    return { id: sealed.id, nonce: sealed.nonce, load, timestamp, box }
  }

  /**
   * {@link open} without waiting: for a minion whose box is held and whose accepted key `lookupNow` tells now, the
   * box made for that very key opens the message, with the same checks (a DecryptError or a MalformedMessageError
   * is thrown as `open` rejects). Undefined, having opened nothing, when the box is not held, the key cannot be told
   * now or is another: {@link open} then looks the key up, derives and refuses as always. Every return of a minion
   * the master has heard from takes this path: a fleet's returns are opened without a promise each for the lookup.
   */
  openNow(message: unknown, options: OpenOptions = {}): OpenedRequest | undefined {
    if (this.#lookupNow === undefined) return undefined
    const sealed = checkSealed(message)
    const box = this.#boxes.get(sealed.id)
    if (box === undefined) return undefined
    const publicKey = this.#lookupNow(sealed.id)
    if (publicKey === undefined || Buffer.compare(box.peerPublicKey, publicKey) !== 0) return undefined
    const { load, timestamp } = box.openDetailed(sealed, options)
    return { id: sealed.id, nonce: sealed.nonce, load, timestamp, box }
  }

  /** True when `id`'s box is held: its id passed validation when it was made. */
  knows(id: string): boolean {
    return this.#boxes.has(id)
  }

  /** Seals a reply to minion `id` (its key must be accepted), stamped `now` (the master's clock). */
  async seal(id: string, load: WireValue, now: number = Date.now()): Promise<SealedMessage> {
    return (await this.#box(id)).seal(load, now)
  }

  /** Drops the cached shared key of `id` (after its key was deleted or rejected). */
  forget(id: string): void {
    this.#boxes.delete(id)
    this.#held.delete(id)
  }
}
