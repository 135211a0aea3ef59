import { randomFillSync, type KeyObject } from 'node:crypto'
import { LruMap, type WireValue } from '@brine/core'
import { privateKeyFromRaw, publicKeyFromRaw } from './raw-keys.js'

/**
 * What `@brine/crypt` may remember between calls, owned by whoever needs it and passed in: a
 * master's request crypto holds one, a minion holds one, a swarm of minions in one process shares
 * one (so 500 minions verify, decrypt and decode the same publish once). The package itself holds
 * no process-wide mutable state: every function that can use a cache takes one as its last,
 * optional argument and works (more slowly) without.
 *
 * Importing a private key into OpenSSL costs 0.5–0.7 ms on this project's 2-core machine, more
 * than the signature it is used for; a public key about 10 µs; an X25519 agreement about 45 µs;
 * a verification about 120 µs; one CSPRNG call per nonce about 3.5 µs against 0.25 µs from a pool.
 */
export interface CryptCacheOptions {
  /** Public keys imported, least recently used dropped beyond this (default 16384: a master's minions). */
  publicKeys?: number
  /** Shared box keys agreed, per secret key (default 16384). */
  sharedKeys?: number
  /**
   * Peers' X25519 public keys imported for agreeing box keys, least recently used dropped beyond this (default 64): a
   * swarm's minions all agree with one master's key, which is imported once instead of once per minion.
   */
  agreementKeys?: number
  /** Successful signature verifications remembered for {@link verifyDetachedCached} (default 256). */
  verifiedSignatures?: number
  /** Publishes opened (verified, decrypted, decoded), remembered by signature (default 64). */
  openedPublishes?: number
}

/** What a cache saved, for tests and benchmarks. */
export interface CryptCacheStats {
  /** Signature verifications that ran in OpenSSL. */
  nativeVerifies: number
  /** Verifications answered from memory. */
  cachedVerifies: number
  /** Publishes answered from memory, without verifying, decrypting or decoding again. */
  reusedPublishes: number
}

/** A publish opened through a cache: everything it was opened from, and what came out. */
export interface OpenedPublish {
  readonly masterSignPublic: Uint8Array
  readonly sessionKey: Uint8Array
  readonly gen: number
  readonly nonce: Uint8Array
  readonly ciphertext: Uint8Array
  readonly load: WireValue
}

/** Random bytes are drawn from the CSPRNG a page at a time: one call per nonce costs more than the cipher. */
const NONCE_POOL_BYTES = 4096

const latin1 = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')

export class CryptCache {
  /** Secret keys are few (one or two per owner); keyed by the array object so no secret becomes a map key string. */
  readonly #signingKeys = new WeakMap<Uint8Array, KeyObject>()
  readonly #x25519Keys = new WeakMap<Uint8Array, KeyObject>()
  readonly #publicKeys: LruMap<string, KeyObject>
  readonly #agreementKeys: LruMap<string, KeyObject>
  readonly #sharedKeys = new WeakMap<Uint8Array, LruMap<string, Uint8Array>>()
  readonly #sharedKeyLimit: number
  readonly #verified: LruMap<string, true>
  readonly #opened: LruMap<string, OpenedPublish>
  readonly #derived = new WeakMap<object, Map<string, unknown>>()
  readonly #stats: CryptCacheStats = { nativeVerifies: 0, cachedVerifies: 0, reusedPublishes: 0 }
  #importedPrivateKeys = 0
  #noncePool = Buffer.alloc(0)
  #noncePoolOffset = 0

  constructor(options: CryptCacheOptions = {}) {
    this.#publicKeys = new LruMap(options.publicKeys ?? 16_384)
    this.#agreementKeys = new LruMap(options.agreementKeys ?? 64)
    this.#sharedKeyLimit = options.sharedKeys ?? 16_384
    this.#verified = new LruMap(options.verifiedSignatures ?? 256)
    this.#opened = new LruMap(options.openedPublishes ?? 64)
  }

  /** Private keys imported from their raw bytes so far (those a key pair was made or loaded with are adopted, not counted). */
  get importedPrivateKeys(): number {
    return this.#importedPrivateKeys
  }

  /** A copy of the counters. */
  stats(): CryptCacheStats {
    return { ...this.#stats }
  }

  /** The Ed25519 private key object for a 32-byte seed, imported once per seed array. */
  signingKey(seedArray: Uint8Array, seed: Uint8Array): KeyObject {
    let key = this.#signingKeys.get(seedArray)
    if (key === undefined) {
      key = privateKeyFromRaw('Ed25519', seed)
      this.#importedPrivateKeys++
      this.#signingKeys.set(seedArray, key)
    }
    return key
  }

  /** The X25519 private key object for a 32-byte secret, imported once per secret array. */
  x25519Key(secretKey: Uint8Array): KeyObject {
    let key = this.#x25519Keys.get(secretKey)
    if (key === undefined) {
      key = privateKeyFromRaw('X25519', secretKey)
      this.#importedPrivateKeys++
      this.#x25519Keys.set(secretKey, key)
    }
    return key
  }

  /**
   * Keeps the private key objects a key pair was just made or loaded from, for signing with `signSecretKey` and
   * agreeing boxes with `boxSecretKey` (the arrays of that {@link KeyPair}): they need not be imported again.
   */
  adoptPrivateKeys(boxSecretKey: Uint8Array, box: KeyObject, signSecretKey: Uint8Array, sign: KeyObject): void {
    if (box.asymmetricKeyType !== 'x25519' || sign.asymmetricKeyType !== 'ed25519')
      throw new RangeError('adoptPrivateKeys takes an X25519 and an Ed25519 private key')
    this.#x25519Keys.set(boxSecretKey, box)
    this.#signingKeys.set(signSecretKey, sign)
  }

  /** The Ed25519 public key object for 32 raw bytes, imported once and kept while recently used. */
  verifyingKey(publicKey: Uint8Array): KeyObject {
    return importedOnce(this.#publicKeys, 'Ed25519', publicKey)
  }

  /** The X25519 public key object for a peer's 32 raw bytes, imported once and kept while recently used. */
  agreementKey(publicKey: Uint8Array): KeyObject {
    return importedOnce(this.#agreementKeys, 'X25519', publicKey)
  }

  /** The shared key `secretKey` agreed with `peerPublicKey`, computing it with `agree` once. */
  sharedKey(peerPublicKey: Uint8Array, secretKey: Uint8Array, agree: () => Uint8Array): Uint8Array {
    let known = this.#sharedKeys.get(secretKey)
    if (known === undefined) this.#sharedKeys.set(secretKey, (known = new LruMap(this.#sharedKeyLimit)))
    const peer = latin1(peerPublicKey)
    let shared = known.get(peer)
    if (shared === undefined) {
      shared = agree()
      known.set(peer, shared)
    }
    return shared
  }

  /** `length` fresh random bytes (a nonce) from this cache's pool, each byte handed out once. */
  nonce(length: number): Uint8Array {
    if (length > NONCE_POOL_BYTES) return new Uint8Array(randomFillSync(Buffer.alloc(length)))
    if (this.#noncePoolOffset + length > this.#noncePool.length) {
      this.#noncePool = randomFillSync(Buffer.allocUnsafeSlow(NONCE_POOL_BYTES))
      this.#noncePoolOffset = 0
    }
    const nonce = new Uint8Array(this.#noncePool.subarray(this.#noncePoolOffset, this.#noncePoolOffset + length)) // a copy
    this.#noncePoolOffset += length
    return nonce
  }

  /** Whether the verification `id` (a digest of key, signature and data) succeeded before. */
  hasVerified(id: string): boolean {
    return this.#verified.get(id) === true
  }

  rememberVerified(id: string): void {
    this.#verified.set(id, true)
  }

  countVerify(cached: boolean): void {
    if (cached) this.#stats.cachedVerifies++
    else this.#stats.nativeVerifies++
  }

  /** A publish opened before under this signature, if any (the caller compares every other input). */
  openedPublish(signature: Uint8Array): OpenedPublish | undefined {
    return this.#opened.get(latin1(signature))
  }

  rememberOpenedPublish(signature: Uint8Array, opened: OpenedPublish): void {
    this.#opened.set(latin1(signature), opened)
  }

  countReusedPublish(): void {
    this.#stats.reusedPublishes++
  }

  /**
   * A value computed from an opened load once for every holder of this cache (a minion swarm
   * validates each job load once): remembered by the load object, so it lives as long as the
   * load does. A `compute` that throws is not remembered.
   */
  derived<T>(load: object, name: string, compute: () => T): T {
    let values = this.#derived.get(load)
    if (values?.has(name) === true) return values.get(name) as T
    const value = compute()
    if (values === undefined) this.#derived.set(load, (values = new Map()))
    values.set(name, value)
    return value
  }
}

/** The public key object of `type` for raw `publicKey`, from `imported` or imported now and kept there. */
function importedOnce(imported: LruMap<string, KeyObject>, type: 'Ed25519' | 'X25519', publicKey: Uint8Array): KeyObject {
  const id = latin1(publicKey)
  let key = imported.get(id)
  if (key === undefined) {
    key = publicKeyFromRaw(type, publicKey)
    imported.set(id, key)
  }
  return key
}
