import { describe, expect, it } from 'vitest'
import { checkFrameShape, decode, decodeLimitsOf, encode, FrameLimitError, MalformedFrameError } from '@brine/core'

const LIMITS = { maxEntries: 1000, maxDepth: 8 }

/** What checkFrameShape threw for `bytes`, or undefined when it accepted them. */
function refusal(bytes: Uint8Array, limits = LIMITS): Error | undefined {
  try {
    checkFrameShape(bytes, limits, '10.0.0.7:51234')
    return undefined
  } catch (error) {
    return error as Error
  }
}

describe('checkFrameShape', () => {
  it('accepts every msgpack type Brine writes, and decoding with limits gives what decoding without them gives', () => {
    const values = [
      null,
      true,
      false,
      0,
      127,
      -32,
      -33,
      255,
      65_535,
      2 ** 32 + 5,
      -(2 ** 40),
      1.5,
      'x'.repeat(31),
      'y'.repeat(300),
      'z'.repeat(70_000),
      Buffer.alloc(10),
      Buffer.alloc(300),
      Buffer.alloc(70_000),
      [],
      {},
      Array.from({ length: 20 }, (_, i) => i),
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
      { cmd: '_return', id: 'web1', jid: '20261122170903123456', return: { nested: [1, { deep: [true] }] }, gone: undefined },
      new Date('2026-11-22T17:09:03.123Z'),
    ]
    for (const value of values) {
      const bytes = encode(value)
      expect(refusal(bytes), JSON.stringify(value)?.slice(0, 40)).toBeUndefined()
      expect(decode(bytes, undefined, LIMITS)).toEqual(decode(bytes))
    }
  })

  it('counts array elements and map pairs over the whole value, the limit itself allowed', () => {
    expect(refusal(encode(Array.from({ length: 1000 }, () => 0)))).toBeUndefined()
    const over = refusal(encode([Array.from({ length: 999 }, () => 0), 1]))
    expect(over).toBeInstanceOf(FrameLimitError)
    expect(over).toMatchObject({ key: 'max_frame_entries', limit: 1000 })
    expect(refusal(encode(Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [String(i), null]))))).toBeUndefined()
    expect(refusal(encode({ a: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [String(i), null])) }))).toBeInstanceOf(FrameLimitError)
  })

  it('refuses a container declaring twenty million entries from its five-byte header, naming size, peer and limit', () => {
    const header = Buffer.from([0xdd, 0x01, 0x31, 0x2d, 0x00]) // array 32 of 20,000,000
    const bytes = Buffer.concat([header, Buffer.alloc(64)])
    const error = refusal(bytes, { maxEntries: 262_144, maxDepth: 64 }) as FrameLimitError
    expect(error).toBeInstanceOf(FrameLimitError)
    expect(error.message).toBe(
      'frame of 69 bytes from 10.0.0.7:51234 holds more than 262144 entries (a container of 20000000 at byte 5), over max_frame_entries (262144); refused before decoding',
    )
    expect(error.context).toEqual({ key: 'max_frame_entries', limit: 262_144, size: 69, peer: '10.0.0.7:51234' })
  })

  it('refuses nesting deeper than max_frame_depth, empty containers included, without recursion', () => {
    const nest = (depth: number, inner: number[]): Buffer => Buffer.from([...Array.from({ length: depth - 1 }, () => 0x91), ...inner])
    expect(refusal(nest(8, [0x90]))).toBeUndefined()
    expect(refusal(nest(9, [0x90]))).toMatchObject({ key: 'max_frame_depth', limit: 8 })
    expect(refusal(nest(8, [0x81, 0x01, 0x80]))).toMatchObject({ key: 'max_frame_depth' })
    // 100,000 levels: refused at level 9, no stack overflow.
    expect(refusal(nest(100_000, [0xc0]))).toMatchObject({ key: 'max_frame_depth' })
  })

  it('refuses malformed bytes: cut short, a container claiming more items than bytes, 0xc1, trailing values, foreign ext types', () => {
    const cases: Array<[number[], RegExp]> = [
      [[0x92, 0x01], /claims 2 items but only 1 bytes follow/],
      [[0xcd, 0x01], /cut short/],
      [[0xdd, 0x00, 0x00, 0x03, 0xe8, 0x01], /claims 1000 items but only 1 bytes follow/],
      [[0xdf, 0x00, 0x00, 0x00, 0x02, 0x01, 0x02, 0x03], /claims 2 pairs but only 3 bytes follow/],
      [[0x91, 0xc1], /0xc1 is not a msgpack type/],
      [[0x01, 0x02], /found 1 bytes after it/],
      [[0xd9, 0x05, 0x61], /cut short/],
      [[0xd4, 0x72, 0x40], /extension type 114 is not part of Brine's wire/],
      [[0xc7, 0x01, 0x05, 0x00], /extension type 5/],
    ]
    for (const [bytes, reason] of cases) {
      const error = refusal(Uint8Array.from(bytes))
      expect(error, Buffer.from(bytes).toString('hex')).toBeInstanceOf(MalformedFrameError)
      expect(error?.message).toMatch(reason)
    }
  })

  it('is what decode() runs with limits, so an over-limit value is never decoded', () => {
    expect(() => decode(encode([[1, 2], 3]), 'peer', { maxEntries: 2, maxDepth: 8 })).toThrow(FrameLimitError)
    expect(() => decode(Uint8Array.from([0x01, 0x02]), 'peer', LIMITS)).toThrow(MalformedFrameError)
  })
})

describe('decodeLimitsOf', () => {
  it('gives servers tight defaults and clients looser ones, and checks what it is given', () => {
    expect(decodeLimitsOf({}, 'server')).toEqual({ maxEntries: 262_144, maxDepth: 64 })
    expect(decodeLimitsOf({}, 'client')).toEqual({ maxEntries: 4_194_304, maxDepth: 256 })
    expect(decodeLimitsOf({ maxFrameEntries: 10, maxFrameDepth: 2 }, 'server')).toEqual({ maxEntries: 10, maxDepth: 2 })
    expect(() => decodeLimitsOf({ maxFrameEntries: 0 }, 'server')).toThrow(new RangeError('maxFrameEntries must be a positive integer, got 0'))
    expect(() => decodeLimitsOf({ maxFrameDepth: 1.5 }, 'client')).toThrow(RangeError)
  })
})
