import { createHash, sign as nativeSign, verify as nativeVerify, type KeyObject } from 'node:crypto'
import { LruMap } from '@brine/transport'
import { isBytes } from './bytes.js'
import { privateKeyFromRaw, publicKeyFromRaw } from './raw-keys.js'

/**
 * Ed25519 on the hot path through node:crypto (OpenSSL): tweetnacl's pure-JS verify costs about
 * 15 ms, the native one about 0.13 ms. The keys and signatures are the same bytes nacl uses, so
 * either side may sign with one and verify with the other.
 */

/** Signature length in bytes. */
export const SIGNATURE_BYTES = 64

/** Minions' public keys are many; keep the most recent ones imported and drop the oldest beyond this. */
const publicCache = new LruMap<string, KeyObject>(16_384)
// Secret keys are few (one per process); keyed by the array object so no secret becomes a map key string.
const secretCache = new WeakMap<Uint8Array, KeyObject>()

/** The seed of a 32-byte seed or a 64-byte nacl secret key (seed ‖ public key). */
function seedOf(secretKey: Uint8Array): Uint8Array {
  if (secretKey.length === 32) return secretKey
  if (secretKey.length === 64) return secretKey.subarray(0, 32)
  throw new RangeError(`an Ed25519 secret key is 32 (seed) or 64 (nacl) bytes, not ${secretKey.length}`)
}

/** The native private key for a 32-byte seed or 64-byte nacl secret key, imported once. */
export function signingKeyObject(secretKey: Uint8Array): KeyObject {
  let key = secretCache.get(secretKey)
  if (key === undefined) {
    key = privateKeyFromRaw('Ed25519', seedOf(secretKey))
    secretCache.set(secretKey, key)
  }
  return key
}

/** The native public key for 32 raw bytes, imported once and cached. */
export function verifyingKeyObject(publicKey: Uint8Array): KeyObject {
  if (publicKey.length !== 32) throw new RangeError(`an Ed25519 public key is 32 bytes, not ${publicKey.length}`)
  const id = Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('base64')
  let key = publicCache.get(id)
  if (key === undefined) {
    key = publicKeyFromRaw('Ed25519', publicKey)
    publicCache.set(id, key)
  }
  return key
}

/** Detached Ed25519 signature (64 bytes) of `data`, same bytes as `nacl.sign.detached`. */
export function signDetached(data: Uint8Array, secretKey: Uint8Array): Uint8Array {
  return new Uint8Array(nativeSign(null, data, signingKeyObject(secretKey)))
}

/**
 * True when `signature` is `publicKey`'s signature of `data`. Anything malformed (wrong lengths,
 * a public key OpenSSL refuses) is simply false: the caller's answer is the same, refuse.
 */
export function verifyDetached(signature: unknown, data: Uint8Array, publicKey: unknown): boolean {
  if (!isBytes(signature, SIGNATURE_BYTES) || !isBytes(publicKey, 32)) return false
  try {
    verifyCounters.native++
    return nativeVerify(null, data, verifyingKeyObject(publicKey), signature)
  } catch {
    return false
  }
}

/** Verifications done, for tests and benchmarks: `native` ran OpenSSL, `cached` were answered by {@link verifyDetachedCached}. */
export const verifyCounters = { native: 0, cached: 0 }

/** Successful verifications remembered, least recently used first. */
const verified = new LruMap<string, true>(256)

/**
 * {@link verifyDetached} that remembers successes process-wide, for bytes many verifiers in one
 * process check alike (every minion of a swarm verifies the same publish). The key is sha256 over
 * public key ‖ signature ‖ data; key and signature have fixed lengths, so the concatenation is
 * unambiguous and a hit is only possible for the very same three. Failures are never cached:
 * they are rare, and caching them would let garbage fill the cache.
 */
export function verifyDetachedCached(signature: unknown, data: Uint8Array, publicKey: unknown): boolean {
  if (!isBytes(signature, SIGNATURE_BYTES) || !isBytes(publicKey, 32)) return false
  const id = createHash('sha256').update(publicKey).update(signature).update(data).digest('base64')
  if (verified.get(id) === true) {
    verifyCounters.cached++
    return true
  }
  if (!verifyDetached(signature, data, publicKey)) return false
  verified.set(id, true)
  return true
}
