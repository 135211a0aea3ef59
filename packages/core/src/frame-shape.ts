import { FrameLimitError, MalformedFrameError } from './errors.js'
import { DEFAULT_CLIENT_MAX_FRAME_DEPTH, DEFAULT_CLIENT_MAX_FRAME_ENTRIES, DEFAULT_MAX_FRAME_DEPTH, DEFAULT_MAX_FRAME_ENTRIES } from './wire.js'

/** Structural bounds on one received msgpack value, checked before it is decoded. */
export interface DecodeLimits {
  /** Array elements plus map pairs, over the whole value. */
  maxEntries: number
  /** Containers nested in one another; the top-level array or map is depth 1. */
  maxDepth: number
}

function checkLimit(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`)
  return value
}

/**
 * The decode bounds of an endpoint: a server's (it decodes what unauthenticated peers send) default
 * to {@link DEFAULT_MAX_FRAME_ENTRIES} and {@link DEFAULT_MAX_FRAME_DEPTH}; a client's (it decodes what
 * the master it chose sends, runner output included) to the looser client defaults. RangeError
 * naming a bad value.
 */
export function decodeLimitsOf(options: { maxFrameEntries?: number; maxFrameDepth?: number }, side: 'server' | 'client'): DecodeLimits {
  const server = side === 'server'
  return {
    maxEntries: checkLimit(options.maxFrameEntries ?? (server ? DEFAULT_MAX_FRAME_ENTRIES : DEFAULT_CLIENT_MAX_FRAME_ENTRIES), 'maxFrameEntries'),
    maxDepth: checkLimit(options.maxFrameDepth ?? (server ? DEFAULT_MAX_FRAME_DEPTH : DEFAULT_CLIENT_MAX_FRAME_DEPTH), 'maxFrameDepth'),
  }
}

/** The extensions Brine's encoder writes: msgpack's timestamp (type -1, a Date) and notepack's undefined (type 0). */
const TIMESTAMP_EXT = 0xff
const UNDEFINED_EXT = 0x00

/**
 * Walks the bytes of one msgpack value without decoding it and throws before any allocation when
 * it would cost more than `limits`: {@link FrameLimitError} for too many entries or too deep a
 * nesting; {@link MalformedFrameError} for a value that is cut short, a container claiming more
 * items than bytes remain, the unused byte 0xc1, bytes after the value, or an extension type other
 * than the two Brine writes, timestamp (-1) and undefined (0): msgpackr gives others, such as its
 * record definitions, meanings of its own that this scan cannot bound.
 *
 * The walk is iterative (a stack of the items left in each open container, at most `maxDepth`
 * deep), skips strings and binaries by their length, and stops at the first container header that
 * takes the running count over `maxEntries` — a frame declaring twenty million empty maps is
 * refused after reading five bytes. Its cost is one step per msgpack item, never per byte of a
 * string or binary, so the sealed requests and publishes of normal traffic (a few items around one
 * binary) cost a few dozen steps.
 */
export function checkFrameShape(bytes: Uint8Array, limits: DecodeLimits, peer?: string): void {
  const end = bytes.length
  const stack = WALK_STACK
  // The stack's height: its array is never shortened (`length = 0` would free its storage, to be made again).
  let depth = 0
  const cursor = WALK_CURSOR
  cursor.pos = 0
  cursor.items = 0
  cursor.pairs = false
  let entries = 0
  let remaining = 1
  for (;;) {
    if (remaining === 0) {
      if (depth === 0) break
      remaining = stack[--depth]!
      continue
    }
    if (cursor.pos >= end) throw cutShort(peer)
    const type = bytes[cursor.pos++]!
    remaining--
    if (!readHeader(bytes, type, cursor, peer)) continue
    // A container: its entries count before anything inside it is read.
    const { items, pairs, pos } = cursor
    entries += items
    if (entries > limits.maxEntries) {
      throw new FrameLimitError(
        'max_frame_entries',
        `holds more than ${limits.maxEntries} entries (a container of ${items} at byte ${pos})`,
        limits.maxEntries,
        bytes.length,
        peer,
      )
    }
    if (depth + 1 > limits.maxDepth) {
      throw new FrameLimitError('max_frame_depth', `nests containers more than ${limits.maxDepth} deep`, limits.maxDepth, bytes.length, peer)
    }
    const children = pairs ? items * 2 : items
    // Each item takes at least one byte: a header claiming more than remain is a lie, refused at once.
    if (children > end - pos) throw new MalformedFrameError(`a container claims ${items} ${pairs ? 'pairs' : 'items'} but only ${end - pos} bytes follow`, peer)
    if (children === 0) continue
    stack[depth++] = remaining
    remaining = children
  }
  if (cursor.pos > end) throw cutShort(peer)
  if (cursor.pos < end) throw new MalformedFrameError(`expected one msgpack value, found ${end - cursor.pos} bytes after it`, peer)
}

/** Where the walk is, and the size of the container whose header it read last. */
interface Cursor {
  pos: number
  items: number
  pairs: boolean
}

/** Bytes after the type byte of a fixed-size scalar: float 32/64, uint 8–64, int 8–64. */
const SCALAR_WIDTH: Readonly<Record<number, number>> = { 0xca: 4, 0xcb: 8, 0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8 }
/** Bytes of the length before the body of a bin 8/16/32 or str 8/16/32. */
const LENGTH_WIDTH: Readonly<Record<number, number>> = { 0xc4: 1, 0xc5: 2, 0xc6: 4, 0xd9: 1, 0xda: 2, 0xdb: 4 }
/** Bytes of the length of an ext 8/16/32 (then its type byte, then its data). */
const EXT_LENGTH_WIDTH: Readonly<Record<number, number>> = { 0xc7: 1, 0xc8: 2, 0xc9: 4 }

function cutShort(peer: string | undefined): MalformedFrameError {
  return new MalformedFrameError('not a msgpack value (cut short)', peer)
}

/**
 * One item whose type byte was just read: moves the cursor past a scalar, string, binary or extension
 * and answers false, or past a container's header, leaving its size in the cursor, and answers true.
 */
/**
 * The walk's stack and cursor, one pair for every call: a walk runs to its end (or throws) without calling out, so no
 * two overlap, and each request's frame is checked without making either (a return's frames were checked with three).
 */
const WALK_STACK: number[] = []
const WALK_CURSOR: Cursor = { pos: 0, items: 0, pairs: false }

function readHeader(bytes: Uint8Array, type: number, cursor: Cursor, peer: string | undefined): boolean {
  if (type <= 0x7f || type >= 0xe0) return false
  if (type <= 0x9f) {
    // fixmap, fixarray
    cursor.items = type & 0x0f
    cursor.pairs = type <= 0x8f
    return true
  }
  if (type <= 0xbf) {
    cursor.pos += type & 0x1f
    return false
  }
  const scalar = SCALAR_WIDTH[type]
  if (scalar !== undefined) {
    cursor.pos += scalar
    return false
  }
  const lengthWidth = LENGTH_WIDTH[type]
  if (lengthWidth !== undefined) {
    if (cursor.pos + lengthWidth > bytes.length) throw cutShort(peer)
    cursor.pos += lengthWidth + readUint(bytes, cursor.pos, lengthWidth)
    return false
  }
  return readTypedHeader(bytes, type, cursor, peer)
}

/** The rest of 0xc0–0xdf: nil, booleans, 0xc1, extensions and the 16/32-bit arrays and maps. */
function readTypedHeader(bytes: Uint8Array, type: number, cursor: Cursor, peer: string | undefined): boolean {
  const { pos } = cursor
  const extWidth = EXT_LENGTH_WIDTH[type]
  if (extWidth !== undefined) {
    if (pos + extWidth + 1 > bytes.length) throw cutShort(peer)
    checkExt(bytes[pos + extWidth]!, peer)
    cursor.pos += extWidth + 1 + readUint(bytes, pos, extWidth)
    return false
  }
  if (type >= 0xd4 && type <= 0xd8) {
    // fixext 1/2/4/8/16: type, then 2^(type − 0xd4) bytes.
    if (pos + 1 > bytes.length) throw cutShort(peer)
    checkExt(bytes[pos]!, peer)
    cursor.pos += 1 + (1 << (type - 0xd4))
    return false
  }
  if (type === 0xc0 || type === 0xc2 || type === 0xc3) return false
  if (type === 0xc1) throw new MalformedFrameError('0xc1 is not a msgpack type', peer)
  // 0xdc array 16, 0xdd array 32, 0xde map 16, 0xdf map 32.
  const width = type === 0xdc || type === 0xde ? 2 : 4
  if (pos + width > bytes.length) throw cutShort(peer)
  cursor.items = readUint(bytes, pos, width)
  cursor.pairs = type === 0xde || type === 0xdf
  cursor.pos += width
  return true
}

/** A big-endian unsigned integer of 1, 2 or 4 bytes. */
function readUint(bytes: Uint8Array, pos: number, width: number): number {
  if (width === 1) return bytes[pos]!
  if (width === 2) return (bytes[pos]! << 8) | bytes[pos + 1]!
  return bytes[pos]! * 0x1000000 + ((bytes[pos + 1]! << 16) | (bytes[pos + 2]! << 8) | bytes[pos + 3]!)
}

function checkExt(extType: number, peer: string | undefined): void {
  if (extType !== TIMESTAMP_EXT && extType !== UNDEFINED_EXT) {
    throw new MalformedFrameError(
      `msgpack extension type ${(extType << 24) >> 24} is not part of Brine's wire (only the timestamp, -1, and undefined, 0)`,
      peer,
    )
  }
}

/**
 * The same bounds as {@link checkFrameShape}, on a value not yet encoded (a REST body, say): throws
 * FrameLimitError naming `max_frame_entries` or `max_frame_depth` at the first container over them.
 * Iterative, so a value nested deeper than the call stack is refused instead of overflowing it; `size`
 * in the error is 0 (there are no bytes yet).
 */
export function checkValueShape(value: unknown, limits: DecodeLimits, what = 'value'): void {
  const over = (key: string, found: string, limit: number): FrameLimitError => {
    const error = new FrameLimitError(key, found, limit, 0)
    error.message = `${what} ${found}, over ${key} (${limit})`
    return error
  }
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }]
  let entries = 0
  while (pending.length > 0) {
    const { value: next, depth } = pending.pop()!
    if (typeof next !== 'object' || next === null || ArrayBuffer.isView(next) || next instanceof Date) continue
    const children = Array.isArray(next) ? (next as unknown[]) : Object.values(next as Record<string, unknown>)
    entries += children.length
    if (entries > limits.maxEntries) throw over('max_frame_entries', `holds more than ${limits.maxEntries} entries`, limits.maxEntries)
    if (depth > limits.maxDepth) throw over('max_frame_depth', `nests containers more than ${limits.maxDepth} deep`, limits.maxDepth)
    for (const child of children) pending.push({ value: child, depth: depth + 1 })
  }
}
