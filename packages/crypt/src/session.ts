import { randomBytes, randomInt } from 'node:crypto'
import nacl from 'tweetnacl'
import { decode, encode, type WireValue } from '@brine/core'
import { isBytes, randomNonce, transcript } from './bytes.js'
import { DecryptError, MalformedMessageError, SignatureError, StaleSessionKeyError } from './errors.js'
import type { CryptCache } from './crypt-cache.js'
import { SIGNATURE_BYTES, signDetached, verifyDetached, verifyDetachedCached } from './sign.js'

/** The key every publish is sealed under (secretbox), and its generation. */
export interface SessionKey {
  /** 32 random bytes. */
  readonly key: Uint8Array
  /** Changes on every rotation; a publish under another generation tells a minion to re-authenticate. */
  readonly gen: number
}

export const SESSION_KEY_BYTES = nacl.secretbox.keyLength
/** Marker of a publish sealed by {@link sealPublish}, where Salt's says `aes`. */
export const PUBLISH_ENC = 'nacl'

/** A fresh random key of generation `gen`. */
export function newSessionKey(gen: number): SessionKey {
  return { key: new Uint8Array(randomBytes(SESSION_KEY_BYTES)), gen }
}

/** The generation after `gen` (back to 1 past the largest safe integer). */
export const nextGeneration = (gen: number): number => (gen >= Number.MAX_SAFE_INTEGER ? 1 : gen + 1)

/**
 * The master's current session key. Without a key to go on from, generations start at a random value,
 * so a master that lost its session key file never reuses a generation a minion still holds from
 * before; the minion then sees a stale generation and re-authenticates instead of failing to decrypt.
 * With one (the key kept across a restart, or the one a restart rotated from: {@link SessionStore}),
 * generations keep increasing.
 */
export class SessionKeys {
  #current: SessionKey

  constructor(initial?: SessionKey) {
    if (initial !== undefined && !isBytes(initial.key, SESSION_KEY_BYTES)) {
      throw new RangeError(`a session key is ${SESSION_KEY_BYTES} bytes`)
    }
    this.#current = initial ?? newSessionKey(randomInt(1, 2 ** 31))
  }

  current(): SessionKey {
    return this.#current
  }

  /** Replaces the key with a fresh one of the next generation and returns it. */
  rotate(): SessionKey {
    this.#current = newSessionKey(nextGeneration(this.#current.gen))
    return this.#current
  }
}

/** A publish as it crosses the wire: sealed with secretbox under the session key, signed by the master. */
export interface PublishEnvelope {
  enc: typeof PUBLISH_ENC
  gen: number
  nonce: Uint8Array
  ciphertext: Uint8Array
  /** Master's Ed25519 signature over (gen, nonce, ciphertext). */
  sig: Uint8Array
}

const PUBLISH_TAG = 'brine/publish/v1'

/**
 * Seals a publish load (msgpack) under the session key and signs the result with the master's
 * sign key. The signature covers the ciphertext, so a minion verifies before it decrypts.
 */
export function sealPublish(load: WireValue, session: SessionKey, masterSignSecret: Uint8Array, cache?: CryptCache): PublishEnvelope {
  return sealEncodedPublish(encode(load), session, masterSignSecret, cache)
}

/** {@link sealPublish} of a load its caller has already encoded (msgpack), to decide by its size where to seal it. */
export function sealEncodedPublish(encoded: Uint8Array, session: SessionKey, masterSignSecret: Uint8Array, cache?: CryptCache): PublishEnvelope {
  const nonce = randomNonce(nacl.secretbox.nonceLength, cache)
  const ciphertext = nacl.secretbox(encoded, nonce, session.key)
  const sig = signDetached(transcript(PUBLISH_TAG, session.gen, nonce, ciphertext), masterSignSecret, cache)
  return { enc: PUBLISH_ENC, gen: session.gen, nonce, ciphertext, sig }
}

export const isPublishEnvelope = (value: unknown): value is PublishEnvelope =>
  typeof value === 'object' && value !== null && (value as { enc?: unknown }).enc === PUBLISH_ENC

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && Buffer.compare(a, b) === 0

/**
 * Freezes a decoded load through and through: one copy may be shared by every opener holding the
 * same cache. Byte arrays stay as they are (an array view with elements cannot be frozen).
 */
function deepFreeze(value: WireValue): WireValue {
  if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value) && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const item of Object.values(value)) deepFreeze(item as WireValue)
  }
  return value
}

/**
 * Opens a publish: checks the shape, verifies the master's signature (SignatureError), then the
 * generation (StaleSessionKeyError: re-authenticate), then decrypts (DecryptError). The signature
 * comes first so a forged envelope can neither make a minion re-authenticate nor reach the cipher.
 *
 * The load comes back deeply frozen. With a `cache` it is also remembered: in a swarm, hundreds
 * of minions in one process share one cache and open the very same publish, and a later call
 * with byte-identical master key, session key, generation, nonce, ciphertext and signature gets
 * the same load without verifying, decrypting or decoding again. A caller that hands parts of it
 * to code that may change them copies those parts first.
 */
export function openPublish(envelope: unknown, session: SessionKey, masterSignPublic: Uint8Array, cache?: CryptCache): WireValue {
  if (!isPublishEnvelope(envelope)) throw new MalformedMessageError('publish', `enc is not '${PUBLISH_ENC}'`)
  const { gen, nonce, ciphertext, sig } = envelope
  if (typeof gen !== 'number' || !Number.isSafeInteger(gen)) throw new MalformedMessageError('publish', 'gen is not an integer')
  if (!isBytes(nonce, nacl.secretbox.nonceLength)) throw new MalformedMessageError('publish', `nonce is not ${nacl.secretbox.nonceLength} bytes`)
  if (!isBytes(ciphertext)) throw new MalformedMessageError('publish', 'ciphertext is not bytes')
  if (!isBytes(sig, SIGNATURE_BYTES)) throw new MalformedMessageError('publish', `sig is not ${SIGNATURE_BYTES} bytes`)
  const seen = cache?.openedPublish(sig)
  if (
    seen !== undefined &&
    seen.gen === gen &&
    gen === session.gen &&
    sameBytes(seen.nonce, nonce) &&
    sameBytes(seen.ciphertext, ciphertext) &&
    sameBytes(seen.sessionKey, session.key) &&
    sameBytes(seen.masterSignPublic, masterSignPublic)
  ) {
    cache?.countReusedPublish()
    return seen.load
  }
  const signed = transcript(PUBLISH_TAG, gen, nonce, ciphertext)
  const verified = cache !== undefined ? verifyDetachedCached(sig, signed, masterSignPublic, cache) : verifyDetached(sig, signed, masterSignPublic)
  if (!verified) throw new SignatureError('publish', "signature does not verify with the master's key")
  if (gen !== session.gen) throw new StaleSessionKeyError(gen, session.gen)
  const plain = nacl.secretbox.open(ciphertext, nonce, session.key)
  if (plain === null) throw new DecryptError('publish', 'does not decrypt with the session key')
  let load: WireValue
  try {
    load = deepFreeze(decode(plain))
  } catch (error) {
    throw new MalformedMessageError('publish', 'decrypted load is not msgpack', { cause: error })
  }
  // Copies: the envelope's byte arrays may be views into a receive buffer that gets reused.
  cache?.rememberOpenedPublish(sig, {
    masterSignPublic: Uint8Array.from(masterSignPublic),
    sessionKey: Uint8Array.from(session.key),
    gen,
    nonce: Uint8Array.from(nonce),
    ciphertext: Uint8Array.from(ciphertext),
    load,
  })
  return load
}
