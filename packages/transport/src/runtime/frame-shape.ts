import { FrameLimitError, MalformedFrameError } from '../contract/errors.js'
import {
  DEFAULT_CLIENT_MAX_FRAME_DEPTH,
  DEFAULT_CLIENT_MAX_FRAME_ENTRIES,
  DEFAULT_MAX_FRAME_DEPTH,
  DEFAULT_MAX_FRAME_ENTRIES,
  type EndpointOptions,
} from '../contract/types.js'

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
export function decodeLimitsOf(options: Pick<EndpointOptions, 'maxFrameEntries' | 'maxFrameDepth'>, side: 'server' | 'client'): DecodeLimits {
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
  const stack: number[] = []
  let pos = 0
  let entries = 0
  let remaining = 1
  const malformed = (reason: string): MalformedFrameError => new MalformedFrameError(reason, peer)
  for (;;) {
    if (remaining === 0) {
      const outer = stack.pop()
      if (outer === undefined) break
      remaining = outer
      continue
    }
    if (pos >= end) throw malformed('not a msgpack value (cut short)')
    const type = bytes[pos++]!
    remaining--
    let items: number
    let pairs = false
    if (type <= 0x7f || type >= 0xe0) continue
    if (type <= 0x8f) {
      items = type & 0x0f
      pairs = true
    } else if (type <= 0x9f) {
      items = type & 0x0f
    } else if (type <= 0xbf) {
      pos += type & 0x1f
      continue
    } else {
      switch (type) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          continue
        case 0xc1:
          throw malformed('0xc1 is not a msgpack type')
        case 0xc4: // bin 8
        case 0xd9: // str 8
          if (pos + 1 > end) throw malformed('not a msgpack value (cut short)')
          pos += 1 + bytes[pos]!
          continue
        case 0xc5:
        case 0xda:
          if (pos + 2 > end) throw malformed('not a msgpack value (cut short)')
          pos += 2 + ((bytes[pos]! << 8) | bytes[pos + 1]!)
          continue
        case 0xc6:
        case 0xdb:
          if (pos + 4 > end) throw malformed('not a msgpack value (cut short)')
          pos += 4 + readUint32(bytes, pos)
          continue
        case 0xc7:
        case 0xc8:
        case 0xc9: {
          // ext 8/16/32: length, type, data.
          const width = type === 0xc7 ? 1 : type === 0xc8 ? 2 : 4
          if (pos + width + 1 > end) throw malformed('not a msgpack value (cut short)')
          const length = width === 1 ? bytes[pos]! : width === 2 ? (bytes[pos]! << 8) | bytes[pos + 1]! : readUint32(bytes, pos)
          checkExt(bytes[pos + width]!, peer)
          pos += width + 1 + length
          continue
        }
        case 0xca:
          pos += 4
          continue
        case 0xcb:
          pos += 8
          continue
        case 0xcc:
        case 0xd0:
          pos += 1
          continue
        case 0xcd:
        case 0xd1:
          pos += 2
          continue
        case 0xce:
        case 0xd2:
          pos += 4
          continue
        case 0xcf:
        case 0xd3:
          pos += 8
          continue
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
          // fixext 1/2/4/8/16: type, then 2^(type − 0xd4) bytes.
          if (pos + 1 > end) throw malformed('not a msgpack value (cut short)')
          checkExt(bytes[pos]!, peer)
          pos += 1 + (1 << (type - 0xd4))
          continue
        case 0xdc:
        case 0xde:
          if (pos + 2 > end) throw malformed('not a msgpack value (cut short)')
          items = (bytes[pos]! << 8) | bytes[pos + 1]!
          pos += 2
          pairs = type === 0xde
          break
        default:
          // 0xdd array 32, 0xdf map 32.
          if (pos + 4 > end) throw malformed('not a msgpack value (cut short)')
          items = readUint32(bytes, pos)
          pos += 4
          pairs = type === 0xdf
      }
    }
    // A container: its entries count before anything inside it is read.
    entries += items
    if (entries > limits.maxEntries) {
      throw new FrameLimitError('max_frame_entries', `holds more than ${limits.maxEntries} entries (a container of ${items} at byte ${pos})`, limits.maxEntries, bytes.length, peer)
    }
    if (stack.length + 1 > limits.maxDepth) {
      throw new FrameLimitError('max_frame_depth', `nests containers more than ${limits.maxDepth} deep`, limits.maxDepth, bytes.length, peer)
    }
    const children = pairs ? items * 2 : items
    // Each item takes at least one byte: a header claiming more than remain is a lie, refused at once.
    if (children > end - pos) throw malformed(`a container claims ${items} ${pairs ? 'pairs' : 'items'} but only ${end - pos} bytes follow`)
    if (children === 0) continue
    stack.push(remaining)
    remaining = children
  }
  if (pos > end) throw malformed('not a msgpack value (cut short)')
  if (pos < end) throw malformed(`expected one msgpack value, found ${end - pos} bytes after it`)
}

function readUint32(bytes: Uint8Array, pos: number): number {
  return bytes[pos]! * 0x1000000 + ((bytes[pos + 1]! << 16) | (bytes[pos + 2]! << 8) | bytes[pos + 3]!)
}

function checkExt(extType: number, peer: string | undefined): void {
  if (extType !== TIMESTAMP_EXT && extType !== UNDEFINED_EXT) {
    throw new MalformedFrameError(`msgpack extension type ${(extType << 24) >> 24} is not part of Brine's wire (only the timestamp, -1, and undefined, 0)`, peer)
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
