import { C1, Packr, RESERVE_START_SPACE } from 'msgpackr'
import { FrameTooLargeError, MalformedFrameError, type SerializedError } from './errors.js'
import { DEFAULT_MAX_FRAME_BYTES, type WireValue } from './wire.js'
import { checkFrameShape, type DecodeLimits } from './frame-shape.js'

/**
 * Plain msgpack maps and arrays (no msgpackr records), so any msgpack implementation, Salt's
 * included, reads what we write. Binary data travels as bin and comes back as Buffer.
 */
const packr = new Packr({ useRecords: false, moreTypes: false, mapsAsObjects: true, variableMapSize: true })

/** Length of the big-endian length prefix on every TCP frame. */
export const FRAME_HEADER_BYTES = 4

/** Encoded values at least this long leave msgpackr's buffer behind them (see {@link packWithHeadroom}). */
const LARGE_ENCODING_BYTES = 1 << 20
/** What msgpackr starts with. */
const FRESH_BUFFER_BYTES = 8192
/** Most bytes msgpackr reserves before a value (the low byte of its encode options). */
const MAX_HEADROOM_BYTES = 0xff

/**
 * `value` as msgpack after `headroom` bytes left for the caller (unset). msgpackr encodes each value after the last
 * in one growing buffer, and grows it to three bytes per character before it writes a string; when it grows, it copies
 * everything from the value's start to where the string would end, not to where writing stands. After a 64 MB
 * string, the next large value would thus copy the unused rest of a 200 MB buffer (fresh memory, every page of it
 * touched) before writing a byte: so after a large value it starts over in a small buffer of its own. The value
 * just encoded keeps the large one.
 */
function packWithHeadroom(value: WireValue, headroom: number): Buffer {
  if (!Number.isInteger(headroom) || headroom < 0 || headroom > MAX_HEADROOM_BYTES)
    throw new RangeError(`headroom must be 0 to ${MAX_HEADROOM_BYTES} bytes, got ${headroom}`)
  const encoded = headroom === 0 ? packr.pack(value) : packr.pack(value, RESERVE_START_SPACE | headroom)
  if (encoded.length >= LARGE_ENCODING_BYTES) packr.useBuffer(Buffer.allocUnsafeSlow(FRESH_BUFFER_BYTES))
  return encoded
}

/** Encodes one value; throws FrameTooLargeError when the body would exceed `limit`. */
export function encode(value: WireValue, limit: number = DEFAULT_MAX_FRAME_BYTES, peer?: string): Buffer {
  return encodeWithHeadroom(value, 0, limit, peer)
}

/**
 * {@link encode} with `headroom` bytes (at most 255) left before the body, for the caller to fill in place: a frame's
 * length prefix, or the zero bytes nacl's secretbox works on. Spares the copy of the body into a larger buffer,
 * which for a 64 MB return is a pass over fresh memory. `limit` bounds the body, not the headroom.
 */
export function encodeWithHeadroom(value: WireValue, headroom: number, limit: number = DEFAULT_MAX_FRAME_BYTES, peer?: string): Buffer {
  const encoded = packWithHeadroom(value, headroom)
  const bodyBytes = encoded.length - headroom
  if (bodyBytes > limit) throw new FrameTooLargeError(bodyBytes, limit, peer === undefined ? undefined : `to ${peer}`)
  return encoded
}

/** `value` encoded as one TCP frame, exactly `frame(encode(value, limit, peer))`, written once. */
export function encodeFrame(value: WireValue, limit: number = DEFAULT_MAX_FRAME_BYTES, peer?: string): Buffer {
  const out = encodeWithHeadroom(value, FRAME_HEADER_BYTES, limit, peer)
  out.writeUInt32BE(out.length - FRAME_HEADER_BYTES, 0)
  return out
}

/**
 * Decodes one value; any failure becomes MalformedFrameError. Trailing bytes are malformed too.
 * With `limits` (what a peer sent over the wire), the bytes are first scanned by
 * {@link checkFrameShape}, so a value over the entry or depth bound is refused with
 * FrameLimitError before anything is allocated.
 */
export function decode(body: Uint8Array, peer?: string, limits?: DecodeLimits): WireValue {
  if (limits !== undefined) {
    checkFrameShape(body, limits, peer)
    try {
      return packr.unpack(body) as WireValue
    } catch (error) {
      throw new MalformedFrameError(`not a msgpack value (${(error as Error).message})`, peer, { cause: error })
    }
  }
  try {
    const values = packr.unpackMultiple(body) as WireValue[] | undefined
    if (values === undefined || values.length !== 1) {
      throw new Error(`expected one msgpack value, found ${values?.length ?? 0}`)
    }
    // msgpackr decodes the never-used byte 0xc1 to a marker object instead of failing.
    if (values[0] === C1) throw new Error('0xc1 is not a msgpack type')
    return values[0]
  } catch (error) {
    throw new MalformedFrameError(`not a msgpack value (${(error as Error).message})`, peer, { cause: error })
  }
}

/** 4-byte big-endian length, then the body: one TCP frame. */
export function frame(body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + body.length)
  out.writeUInt32BE(body.length, 0)
  out.set(body, FRAME_HEADER_BYTES)
  return out
}

/**
 * Request/reply envelopes, the same bytes on every transport:
 *   request `[0, id, body]`, ok reply `[1, id, body]`, error reply `[2, id, {name, message, context}]`, and the
 *   server's notice `[3, id, nil]` that a try came again while the request is still in its hands (waiting or running):
 *   not an answer, but word that the answer is coming, which a patient client waits for instead of giving up.
 * The id lets one connection multiplex many requests; an array keeps the envelope to 3–9 bytes.
 */
export const EnvelopeKind = { Request: 0, Reply: 1, ErrorReply: 2, Pending: 3 } as const

export type Envelope =
  | { kind: typeof EnvelopeKind.Request; id: number; body: WireValue }
  | { kind: typeof EnvelopeKind.Reply; id: number; body: WireValue }
  | { kind: typeof EnvelopeKind.ErrorReply; id: number; body: SerializedError }
  | { kind: typeof EnvelopeKind.Pending; id: number; body: null }

export function encodeEnvelope(envelope: Envelope, limit?: number, peer?: string): Buffer {
  return encode([envelope.kind, envelope.id, envelope.body], limit, peer)
}

/** An envelope as one TCP frame, exactly `frame(encodeEnvelope(envelope, limit, peer))`, written once. */
export function encodeEnvelopeFrame(envelope: Envelope, limit?: number, peer?: string): Buffer {
  return encodeFrame([envelope.kind, envelope.id, envelope.body], limit, peer)
}

/**
 * The id of a request envelope `[0, id, …]` read from its first bytes alone, or undefined when the
 * frame does not start like one: how a server answers a request whose body it refused to decode.
 */
export function requestIdOf(body: Uint8Array): number | undefined {
  if (body.length < 3 || body[0] !== 0x93 || body[1] !== EnvelopeKind.Request) return undefined
  const type = body[2]!
  if (type <= 0x7f) return type
  const width = type === 0xcc ? 1 : type === 0xcd ? 2 : type === 0xce ? 4 : 0
  if (width === 0 || body.length < 3 + width) return undefined
  let id = 0
  for (let index = 0; index < width; index++) id = id * 256 + body[3 + index]!
  return id
}

/**
 * Decodes and checks an envelope's shape; anything else is a MalformedFrameError (FrameLimitError
 * when `limits` are given and the frame is over them).
 */
export function decodeEnvelope(body: Uint8Array, peer?: string, limits?: DecodeLimits): Envelope {
  const value = decode(body, peer, limits)
  if (!Array.isArray(value) || value.length !== 3) throw new MalformedFrameError('not a request/reply envelope', peer)
  const [kind, id, payload] = value as [unknown, unknown, unknown]
  if (payload === C1) throw new MalformedFrameError('envelope body is not a msgpack value', peer)
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) {
    throw new MalformedFrameError('envelope id is not a non-negative integer', peer)
  }
  switch (kind) {
    case EnvelopeKind.Request:
      return { kind, id, body: payload }
    case EnvelopeKind.Reply:
      return { kind, id, body: payload }
    case EnvelopeKind.ErrorReply:
      if (typeof payload !== 'object' || payload === null || typeof (payload as SerializedError).message !== 'string') {
        throw new MalformedFrameError('error reply without a message', peer)
      }
      return { kind, id, body: payload as SerializedError }
    case EnvelopeKind.Pending:
      if (payload !== null) throw new MalformedFrameError('pending notice with a body', peer)
      return { kind, id, body: null }
    default:
      throw new MalformedFrameError(`unknown envelope kind ${String(kind)}`, peer)
  }
}
