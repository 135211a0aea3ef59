import { randomBytes } from 'node:crypto'
import nacl from 'tweetnacl'
import { describe, expect, it } from 'vitest'
import { CryptCache, signDetached, verifyDetached, verifyDetachedCached } from '../src/index.js'

describe('Ed25519 through node:crypto', () => {
  const seed = new Uint8Array(randomBytes(32))
  const pair = nacl.sign.keyPair.fromSeed(seed)
  const data = new Uint8Array(randomBytes(200))

  it('produces exactly the signature nacl produces, from the 64-byte nacl key or the 32-byte seed', () => {
    const expected = nacl.sign.detached(data, pair.secretKey)
    expect(signDetached(data, pair.secretKey)).toEqual(expected)
    expect(signDetached(data, seed)).toEqual(expected)
  })

  it('native signatures verify with nacl.sign.detached.verify', () => {
    expect(nacl.sign.detached.verify(data, signDetached(data, pair.secretKey), pair.publicKey)).toBe(true)
  })

  it('nacl signatures verify natively', () => {
    expect(verifyDetached(nacl.sign.detached(data, pair.secretKey), data, pair.publicKey)).toBe(true)
  })

  it('refuses a changed message, a changed signature, another key, and malformed input', () => {
    const sig = signDetached(data, pair.secretKey)
    const changed = data.slice()
    changed[0]! ^= 1
    expect(verifyDetached(sig, changed, pair.publicKey)).toBe(false)
    const badSig = sig.slice()
    badSig[10]! ^= 0x80
    expect(verifyDetached(badSig, data, pair.publicKey)).toBe(false)
    expect(verifyDetached(sig, data, nacl.sign.keyPair().publicKey)).toBe(false)
    expect(verifyDetached(sig.subarray(0, 63), data, pair.publicKey)).toBe(false)
    expect(verifyDetached(sig, data, pair.publicKey.subarray(0, 31))).toBe(false)
    expect(verifyDetached('sig', data, pair.publicKey)).toBe(false)
  })

  it('signs and verifies alike through a cache, which remembers successes only', () => {
    const cache = new CryptCache()
    const expected = nacl.sign.detached(data, pair.secretKey)
    expect(signDetached(data, pair.secretKey, cache)).toEqual(expected)
    expect(signDetached(data, pair.secretKey, cache)).toEqual(expected)
    expect(verifyDetached(expected, data, pair.publicKey, cache)).toBe(true)
    expect(verifyDetachedCached(expected, data, pair.publicKey, cache)).toBe(true)
    expect(verifyDetachedCached(expected, data, pair.publicKey, cache)).toBe(true)
    const changed = data.slice()
    changed[1]! ^= 1
    expect(verifyDetachedCached(expected, changed, pair.publicKey, cache)).toBe(false)
    expect(verifyDetachedCached(expected, changed, pair.publicKey, cache)).toBe(false)
    expect(cache.stats()).toEqual({ nativeVerifies: 4, cachedVerifies: 1, reusedPublishes: 0 })
  })
})
