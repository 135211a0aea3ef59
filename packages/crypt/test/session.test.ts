import { describe, expect, it } from 'vitest'
import {
  CryptCache,
  DecryptError,
  generateKeys,
  MalformedMessageError,
  openPublish,
  sealPublish,
  SessionKeys,
  SignatureError,
  StaleSessionKeyError,
} from '../src/index.js'
import { decode, encode } from '@brine/core'

const master = generateKeys()
const load = { fun: 'test.ping', arg: [], tgt: '*', tgt_type: 'glob', jid: '20261122170903123456', ret: '', user: 'root' }

const catchError = (fn: () => unknown): unknown => {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected an error')
}

describe('publish envelopes', () => {
  it('round-trips through the msgpack codec', () => {
    const session = new SessionKeys()
    const envelope = sealPublish(load, session.current(), master.sign.secretKey)
    expect(envelope.enc).toBe('nacl')
    expect(envelope.gen).toBe(session.current().gen)
    const onWire = decode(encode(envelope))
    expect(openPublish(onWire, session.current(), master.sign.publicKey)).toEqual(load)
  })

  it('refuses a tampered ciphertext or signature, and a forger without the master key', () => {
    const session = new SessionKeys().current()
    const envelope = sealPublish(load, session, master.sign.secretKey)
    const tamperedText = { ...envelope, ciphertext: envelope.ciphertext.slice() }
    tamperedText.ciphertext[5]! ^= 1
    expect(catchError(() => openPublish(tamperedText, session, master.sign.publicKey))).toBeInstanceOf(SignatureError)
    const tamperedSig = { ...envelope, sig: envelope.sig.slice() }
    tamperedSig.sig[0]! ^= 1
    expect(catchError(() => openPublish(tamperedSig, session, master.sign.publicKey))).toBeInstanceOf(SignatureError)
    // Someone holding the session key (every minion does) cannot publish as the master.
    const forged = sealPublish({ fun: 'cmd.run', arg: ['rm -rf /'] }, session, generateKeys().sign.secretKey)
    expect(catchError(() => openPublish(forged, session, master.sign.publicKey))).toBeInstanceOf(SignatureError)
    // A re-labelled generation breaks the signature rather than passing as stale.
    expect(catchError(() => openPublish({ ...envelope, gen: envelope.gen + 1 }, session, master.sign.publicKey))).toBeInstanceOf(SignatureError)
  })

  it('signals a stale generation so the minion re-authenticates', () => {
    const keys = new SessionKeys()
    const old = keys.current()
    const fresh = keys.rotate()
    expect(fresh.gen).toBe(old.gen + 1)
    const error = catchError(() => openPublish(sealPublish(load, fresh, master.sign.secretKey), old, master.sign.publicKey))
    expect(error).toBeInstanceOf(StaleSessionKeyError)
    expect(error).toMatchObject({ gen: fresh.gen, expected: old.gen })
  })

  it('makes the old session key useless after rotation', () => {
    const keys = new SessionKeys()
    const old = keys.current()
    const fresh = keys.rotate()
    expect(Buffer.compare(fresh.key, old.key)).not.toBe(0)
    const envelope = sealPublish(load, fresh, master.sign.secretKey)
    // Even a minion that pretends to hold the current generation cannot read it with the old key.
    const error = catchError(() => openPublish(envelope, { key: old.key, gen: fresh.gen }, master.sign.publicKey))
    expect(error).toBeInstanceOf(DecryptError)
  })

  it('refuses malformed envelopes', () => {
    const session = new SessionKeys().current()
    for (const bad of [null, 'x', { enc: 'aes' }, { enc: 'nacl', gen: 1, nonce: new Uint8Array(3), ciphertext: new Uint8Array(), sig: new Uint8Array(64) }]) {
      expect(catchError(() => openPublish(bad, session, master.sign.publicKey))).toBeInstanceOf(MalformedMessageError)
    }
  })

  it('opens a publish it opened before from memory, never a tampered copy or another key', () => {
    const session = new SessionKeys().current()
    const envelope = sealPublish(load, session, master.sign.secretKey)
    const cache = new CryptCache()
    const first = openPublish(envelope, session, master.sign.publicKey, cache)
    expect(first).toEqual(load)
    expect(Object.isFrozen(first)).toBe(true)
    expect(cache.stats().nativeVerifies).toBe(1)
    // A second minion sharing the cache, opening the same bytes (decoded afresh), gets the same load, no verify.
    expect(openPublish(decode(encode(envelope)), session, master.sign.publicKey, cache)).toBe(first)
    expect(cache.stats()).toMatchObject({ nativeVerifies: 1, reusedPublishes: 1 })
    // Another holder of a different session key of the same generation does not get it.
    expect(catchError(() => openPublish(envelope, { key: new SessionKeys().current().key, gen: session.gen }, master.sign.publicKey, cache))).toBeInstanceOf(
      DecryptError,
    )
    // The verification cache still answers the signature for it.
    expect(cache.stats()).toMatchObject({ nativeVerifies: 1, cachedVerifies: 1 })

    const tampered = { ...envelope, ciphertext: envelope.ciphertext.slice() }
    tampered.ciphertext[3]! ^= 1
    expect(catchError(() => openPublish(tampered, session, master.sign.publicKey, cache))).toBeInstanceOf(SignatureError)
    const otherSig = { ...envelope, sig: envelope.sig.slice() }
    otherSig.sig[10]! ^= 1
    expect(catchError(() => openPublish(otherSig, session, master.sign.publicKey, cache))).toBeInstanceOf(SignatureError)
    const otherGen = { ...envelope, gen: envelope.gen + 1 }
    expect(catchError(() => openPublish(otherGen, session, master.sign.publicKey, cache))).toBeInstanceOf(SignatureError)
    expect(catchError(() => openPublish(envelope, session, generateKeys().sign.publicKey, cache))).toBeInstanceOf(SignatureError)
    // Each refusal went to OpenSSL (failures are not cached) and none was answered from the cache.
    expect(cache.stats()).toMatchObject({ nativeVerifies: 5, cachedVerifies: 1 })
    expect(catchError(() => openPublish(tampered, session, master.sign.publicKey, cache))).toBeInstanceOf(SignatureError)
    expect(cache.stats().nativeVerifies).toBe(6)
  })

  it('remembers nothing between callers that do not share a cache', () => {
    const session = new SessionKeys().current()
    const envelope = sealPublish(load, session, master.sign.secretKey)
    const mine = new CryptCache()
    const theirs = new CryptCache()
    const opened = openPublish(envelope, session, master.sign.publicKey, mine)
    const again = openPublish(envelope, session, master.sign.publicKey, theirs)
    expect(again).toEqual(opened)
    expect(again).not.toBe(opened)
    expect(mine.stats()).toEqual({ nativeVerifies: 1, cachedVerifies: 0, reusedPublishes: 0 })
    expect(theirs.stats()).toEqual({ nativeVerifies: 1, cachedVerifies: 0, reusedPublishes: 0 })
    // Without a cache every call verifies, decrypts and decodes afresh, and still hands back a frozen load.
    const uncached = openPublish(envelope, session, master.sign.publicKey)
    expect(uncached).toEqual(opened)
    expect(uncached).not.toBe(opened)
    expect(Object.isFrozen(uncached)).toBe(true)
    expect(mine.stats().nativeVerifies).toBe(1)
  })

  it('opens a publish carrying byte arrays (they cannot be frozen, and are not)', () => {
    const session = new SessionKeys().current()
    const withBytes = { ...load, arg: [new Uint8Array([1, 2, 3]), { blob: new Uint8Array([4]) }] }
    const opened = openPublish(decode(encode(sealPublish(withBytes, session, master.sign.secretKey))), session, master.sign.publicKey, new CryptCache()) as {
      arg: [Uint8Array, { blob: Uint8Array }]
    }
    expect(Object.isFrozen(opened.arg)).toBe(true)
    expect([...opened.arg[0]]).toEqual([1, 2, 3])
    expect([...opened.arg[1].blob]).toEqual([4])
  })

  it('computes a value derived from an opened load once for every holder of the cache, and never remembers a failure', () => {
    const session = new SessionKeys().current()
    const cache = new CryptCache()
    const envelope = sealPublish(load, session, master.sign.secretKey)
    const opened = openPublish(envelope, session, master.sign.publicKey, cache) as object
    let computed = 0
    const derive = (): string => `job ${++computed}`
    expect(cache.derived(opened, 'job', derive)).toBe('job 1')
    expect(cache.derived(openPublish(decode(encode(envelope)), session, master.sign.publicKey, cache) as object, 'job', derive)).toBe('job 1')
    expect(cache.derived(opened, 'other', derive)).toBe('job 2')
    expect(new CryptCache().derived(opened, 'job', derive)).toBe('job 3')
    const failing = (): never => {
      computed++
      throw new Error('invalid')
    }
    expect(() => cache.derived({}, 'job', failing)).toThrow('invalid')
    const bad = {}
    expect(() => cache.derived(bad, 'job', failing)).toThrow('invalid')
    expect(() => cache.derived(bad, 'job', failing)).toThrow('invalid')
    expect(computed).toBe(6)
  })
})
