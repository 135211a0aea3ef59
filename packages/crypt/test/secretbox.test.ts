import nacl from 'tweetnacl'
import { describe, expect, it } from 'vitest'
import { encode, FrameTooLargeError } from '@brine/core'
import { openBox, sealEncoded } from '../src/secretbox.js'

const key = nacl.randomBytes(nacl.secretbox.keyLength)
const nonce = nacl.randomBytes(nacl.secretbox.nonceLength)
/** Values whose encodings span the cipher's 64-byte blocks and their edges, and hundreds of KiB. */
const values = [
  null,
  'a',
  'x'.repeat(31),
  'x'.repeat(32),
  'x'.repeat(61),
  'é'.repeat(200),
  // Boxes of 4,096 and 4,097 bytes: the first opened in one pass over a copy, the second checked before deciphering.
  'x'.repeat(4077),
  'x'.repeat(4078),
  { return: 'y'.repeat(200_000), retcode: 3 },
  Buffer.alloc(70_000, 7),
]

/** `box` placed `before` bytes into a larger buffer full of other bytes, as a box decoded from a frame is. */
function inside(box: Uint8Array, before: number): Uint8Array {
  const holder = Buffer.alloc(before + box.length + 9, 0xa5)
  holder.set(box, before)
  return holder.subarray(before, before + box.length)
}

describe('secretbox without copies', () => {
  it('seals exactly what nacl.secretbox seals of the encoded value', () => {
    for (const value of values) {
      const sealed = sealEncoded(value, nonce, key)
      expect(Buffer.from(sealed)).toEqual(Buffer.from(nacl.secretbox(encode(value), nonce, key)))
      // The 16 bytes before the box in its buffer held half the one-time MAC key: zeroed, as nacl zeroes them.
      expect(Buffer.from(sealed.buffer, sealed.byteOffset - 16, 16)).toEqual(Buffer.alloc(16))
    }
  })

  it('opens what nacl.secretbox sealed, wherever the box lies in its buffer, and leaves the box as it was', () => {
    for (const value of values) {
      const sealed = nacl.secretbox(encode(value), nonce, key)
      for (const before of [0, 5, 16, 40]) {
        const box = inside(sealed, before)
        const copy = Buffer.from(box)
        expect(Buffer.from(openBox(box, nonce, key)!)).toEqual(encode(value))
        expect(Buffer.from(box)).toEqual(copy)
      }
    }
  })

  it('refuses a box changed anywhere, one too short for its MAC, and the wrong key or nonce, as nacl does', () => {
    const sealed = sealEncoded({ return: 'z'.repeat(1000) }, nonce, key)
    for (const at of [0, 15, 16, 17, sealed.length - 1]) {
      const changed = Buffer.from(sealed)
      changed[at]! ^= 1
      expect(openBox(inside(changed, 20), nonce, key)).toBeNull()
      expect(nacl.secretbox.open(changed, nonce, key)).toBeNull()
    }
    // A large box (checked before it is deciphered) changed in its MAC or its last byte.
    const large = sealEncoded({ return: 'z'.repeat(10_000) }, nonce, key)
    for (const at of [0, large.length - 1]) {
      const changed = Buffer.from(large)
      changed[at]! ^= 1
      expect(openBox(inside(changed, 20), nonce, key)).toBeNull()
    }
    expect(openBox(sealed.subarray(0, 15), nonce, key)).toBeNull()
    expect(openBox(sealed, nonce, nacl.randomBytes(32))).toBeNull()
    expect(openBox(sealed, nacl.randomBytes(24), key)).toBeNull()
    // A box of nothing but its MAC opens to no bytes.
    expect(openBox(inside(nacl.secretbox(new Uint8Array(0), nonce, key), 3), nonce, key)?.length).toBe(0)
  })

  it('bounds the encoded value as encode does, and refuses keys and nonces of the wrong size', () => {
    expect(() => sealEncoded('x'.repeat(100), nonce, key, 50)).toThrow(FrameTooLargeError)
    expect(Buffer.from(sealEncoded('x'.repeat(40), nonce, key, 42))).toEqual(Buffer.from(nacl.secretbox(encode('x'.repeat(40)), nonce, key)))
    expect(() => sealEncoded('x', nonce, key.subarray(1))).toThrow('bad key size')
    expect(() => openBox(new Uint8Array(40), nonce.subarray(1), key)).toThrow('bad nonce size')
  })
})
