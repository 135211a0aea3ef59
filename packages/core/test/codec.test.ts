import { describe, expect, it } from 'vitest'
import {
  decode,
  decodeEnvelope,
  encode,
  encodeEnvelope,
  encodeEnvelopeFrame,
  encodeFrame,
  encodeWithHeadroom,
  EnvelopeKind,
  frame,
  FrameReader,
  FrameTooLargeError,
  MalformedFrameError,
} from '@brine/core'

describe('codec', () => {
  it('round-trips Salt-shaped loads, binary included', () => {
    const load = { cmd: '_return', id: 'web1', jid: '20261122170903123456', return: true, retcode: 0, key: Buffer.from([1, 2, 3]) }
    const back = decode(encode(load)) as typeof load
    expect(back).toEqual(load)
    expect(Buffer.isBuffer(back.key)).toBe(true)
  })

  it('writes plain msgpack maps a foreign decoder can read', () => {
    // fixmap of one entry {"a": 1}: 0x81 0xa1 'a' 0x01
    expect([...encode({ a: 1 })]).toEqual([0x81, 0xa1, 0x61, 0x01])
  })

  it('refuses to encode a body over the limit, naming size and limit', () => {
    const error = (() => {
      try {
        encode('x'.repeat(100), 50)
      } catch (e) {
        return e
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(FrameTooLargeError)
    expect((error as FrameTooLargeError).limit).toBe(50)
    expect((error as FrameTooLargeError).message).toMatch(/exceeds max_frame_bytes \(50\)/)
  })

  it('turns garbage and trailing bytes into MalformedFrameError', () => {
    expect(() => decode(Buffer.from([0xc1]))).toThrow(MalformedFrameError)
    expect(() => decode(Buffer.concat([encode(1), encode(2)]))).toThrow(/expected one msgpack value/)
    expect(() => decode(Buffer.alloc(0))).toThrow(MalformedFrameError)
  })

  it('writes a frame, and leaves headroom, with the same bytes as encoding and copying them', () => {
    const load = { cmd: '_return', jid: '20261122170903123456', return: { stdout: 'é'.repeat(300), retcode: 3 }, key: Buffer.from([1, 2, 3]) }
    expect(encodeFrame(load)).toEqual(frame(encode(load)))
    const envelope = { kind: EnvelopeKind.Request, id: 70_000, body: load } as const
    expect(encodeEnvelopeFrame(envelope)).toEqual(frame(encodeEnvelope(envelope)))
    const roomy = encodeWithHeadroom(load, 32)
    expect(roomy.subarray(32)).toEqual(encode(load))
    expect(() => encodeWithHeadroom(load, 256)).toThrow(RangeError)
    // The bound is on the body: a body of exactly `limit` bytes passes with its headroom, one more is refused.
    const body = encode('x'.repeat(100))
    expect(encodeWithHeadroom('x'.repeat(100), 4, body.length).length).toBe(body.length + 4)
    expect(() => encodeFrame('x'.repeat(100), body.length - 1)).toThrow(FrameTooLargeError)
  })

  it('encodes large values one after another, each whole, with small ones between', () => {
    // Past the size after which the encoder starts over in a buffer of its own: each value must still come out whole.
    const values = [
      { a: 'y'.repeat(3 << 20), b: 'e'.repeat(1 << 20) },
      { small: 1 },
      { c: 'z'.repeat(2 << 20), d: Buffer.alloc(1 << 20, 9) },
      'w'.repeat(5 << 20),
      { small: 2 },
    ]
    const encoded = values.map((value, index) => (index % 2 === 0 ? encode(value) : encodeFrame(value).subarray(4)))
    encoded.forEach((bytes, index) => expect(decode(bytes)).toEqual(values[index]))
  })

  it('checks envelope shapes', () => {
    const request = decodeEnvelope(encodeEnvelope({ kind: EnvelopeKind.Request, id: 7, body: { fun: 'test.ping' } }))
    expect(request).toEqual({ kind: EnvelopeKind.Request, id: 7, body: { fun: 'test.ping' } })
    expect(() => decodeEnvelope(encode({ not: 'an envelope' }))).toThrow(/not a request\/reply envelope/)
    expect(() => decodeEnvelope(encode([9, 1, null]))).toThrow(/unknown envelope kind 9/)
    expect(() => decodeEnvelope(encode([0, -1, null]))).toThrow(/non-negative integer/)
    expect(() => decodeEnvelope(encode([2, 1, 'oops']))).toThrow(/error reply without a message/)
    // The server's notice that a request is still in its hands: an id and nothing else.
    expect(decodeEnvelope(encodeEnvelope({ kind: EnvelopeKind.Pending, id: 70_000, body: null }))).toEqual({
      kind: EnvelopeKind.Pending,
      id: 70_000,
      body: null,
    })
    expect(() => decodeEnvelope(encode([3, 1, 'a body']))).toThrow(/pending notice with a body/)
  })
})

describe('FrameReader', () => {
  const collect = (max?: number) => {
    const frames: Buffer[] = []
    const oversize: FrameTooLargeError[] = []
    const reader = new FrameReader({ onFrame: (b) => frames.push(Buffer.from(b)), onOversize: (e) => oversize.push(e) }, max, '10.0.0.7:51234')
    return { reader, frames, oversize }
  }

  it('reassembles frames split at every byte boundary', () => {
    const bytes = Buffer.concat([frame(encode('hello')), frame(encode({ a: [1, 2, 3] })), frame(Buffer.alloc(0))])
    const { reader, frames } = collect()
    for (const byte of bytes) reader.push(Buffer.from([byte]))
    expect(frames.map((f) => (f.length === 0 ? null : decode(f)))).toEqual(['hello', { a: [1, 2, 3] }, null])
    expect(reader.pendingBytes).toBe(0)
  })

  it('reads many frames from one chunk', () => {
    const { reader, frames } = collect()
    reader.push(Buffer.concat(Array.from({ length: 100 }, (_, i) => frame(encode(i)))))
    expect(frames.map((f) => decode(f))).toEqual(Array.from({ length: 100 }, (_, i) => i))
  })

  it('skips an oversized frame without buffering it and stays in step', () => {
    const { reader, frames, oversize } = collect(16)
    const big = frame(Buffer.alloc(1000, 7))
    reader.push(big.subarray(0, 10))
    reader.push(big.subarray(10, 500))
    expect(reader.pendingBytes).toBe(0)
    reader.push(Buffer.concat([big.subarray(500), frame(encode('after'))]))
    expect(oversize).toHaveLength(1)
    expect(oversize[0]!.message).toBe('frame of 1000 bytes from 10.0.0.7:51234 exceeds max_frame_bytes (16)')
    expect(frames.map((f) => decode(f))).toEqual(['after'])
  })
})
