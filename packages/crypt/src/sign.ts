import { createHash, sign as nativeSign, verify as nativeVerify, type KeyObject } from 'node:crypto'
import { isBytes } from './bytes.js'
import type { CryptCache } from './crypt-cache.js'
import { privateKeyFromRaw, publicKeyFromRaw } from './raw-keys.js'

/**
 * Ed25519 on the hot path through node:crypto (OpenSSL): tweetnacl's pure-JS verify costs about
 * 15 ms, the native one about 0.13 ms. The keys and signatures are the same bytes nacl uses, so
 * either side may sign with one and verify with the other. Key objects are imported once per
 * {@link CryptCache} given, or on every call without one.
 */

/** Signature length in bytes. */
export const SIGNATURE_BYTES = 64

/** The seed of a 32-byte seed or a 64-byte nacl secret key (seed ‖ public key). */
function seedOf(secretKey: Uint8Array): Uint8Array {
  if (secretKey.length === 32) return secretKey
  if (secretKey.length === 64) return secretKey.subarray(0, 32)
  throw new RangeError(`an Ed25519 secret key is 32 (seed) or 64 (nacl) bytes, not ${secretKey.length}`)
}

function signingKeyObject(secretKey: Uint8Array, cache: CryptCache | undefined): KeyObject {
  const seed = seedOf(secretKey)
  return cache !== undefined ? cache.signingKey(secretKey, seed) : privateKeyFromRaw('Ed25519', seed)
}

function verifyingKeyObject(publicKey: Uint8Array, cache: CryptCache | undefined): KeyObject {
  return cache !== undefined ? cache.verifyingKey(publicKey) : publicKeyFromRaw('Ed25519', publicKey)
}

/** Detached Ed25519 signature (64 bytes) of `data`, same bytes as `nacl.sign.detached`. */
export function signDetached(data: Uint8Array, secretKey: Uint8Array, cache?: CryptCache): Uint8Array {
  return new Uint8Array(nativeSign(null, data, signingKeyObject(secretKey, cache)))
}

/**
 * True when `signature` is `publicKey`'s signature of `data`. Anything malformed (wrong lengths,
 * a public key OpenSSL refuses) is simply false: the caller's answer is the same, refuse.
 */
export function verifyDetached(signature: unknown, data: Uint8Array, publicKey: unknown, cache?: CryptCache): boolean {
  if (!isBytes(signature, SIGNATURE_BYTES) || !isBytes(publicKey, 32)) return false
  try {
    cache?.countVerify(false)
    return nativeVerify(null, data, verifyingKeyObject(publicKey, cache), signature)
  } catch {
    return false
  }
}

/**
 * {@link verifyDetached} that remembers successes in `cache`, for bytes many verifiers sharing
 * that cache check alike (every minion of a swarm verifies the same publish). The key is sha256
 * over public key ‖ signature ‖ data; key and signature have fixed lengths, so the concatenation
 * is unambiguous and a hit is only possible for the very same three. Failures are never cached:
 * they are rare, and caching them would let garbage fill the cache.
 */
export function verifyDetachedCached(signature: unknown, data: Uint8Array, publicKey: unknown, cache: CryptCache): boolean {
  if (!isBytes(signature, SIGNATURE_BYTES) || !isBytes(publicKey, 32)) return false
  const id = createHash('sha256').update(publicKey).update(signature).update(data).digest('base64')
  if (cache.hasVerified(id)) {
    cache.countVerify(true)
    return true
  }
  if (!verifyDetached(signature, data, publicKey, cache)) return false
  cache.rememberVerified(id)
  return true
}
