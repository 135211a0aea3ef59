/**
 * Big returns are cut to fit a frame instead of being lost. A return travels sealed in one request
 * frame of at most `max_frame_bytes`; one that does not fit used to fail the send and the spool
 * alike ("could not be spooled; it is lost") and the user saw "Minion did not return". Here the
 * longest strings of the return (a `cmd.run` output, `cmd.run_all`'s stdout) are cut, each ending
 * with a marker that says how long it was and why it was cut; retcode and success are untouched.
 */
import type { ReturnLoad } from '@brine/protocol'
import { encode, type WireValue } from '@brine/core'

/**
 * Bytes kept free below `max_frame_bytes` for what wraps a return on its way: the seal (role, id,
 * timestamp, nonce, MAC: under 1 KiB with a 237-byte id), the request envelope, and on the master
 * the bus event's tag and stamp or a `jobs.lookup_jid` reply's keys around that one return.
 */
export const RETURN_FRAME_RESERVE_BYTES = 16 * 1024

/** Strings shorter than this are left whole: cutting them saves little and loses meaning. */
const SHORTEST_CUT_BYTES = 256
/** Rounds of cutting before the whole return is replaced (each round re-measures the encoded load). */
const MAX_ROUNDS = 4
/** Deepest nesting searched for strings; returns deeper than this are replaced whole. */
const MAX_DEPTH = 64
const NO_LIMIT = Number.MAX_SAFE_INTEGER
/** A marker Brine put at the end of a string before (`[brine: output truncated at N bytes]` from cmd.*). */
const EARLIER_MARKER = /\n\[brine: [^\n\]]*\]$/

/** The marker that ends a cut string. */
export function truncationMarker(originalBytes: number, keptBytes: number, maxFrameBytes: number): string {
  return `\n[brine: truncated by the minion: ${originalBytes} bytes, the first ${keptBytes} kept, to fit max_frame_bytes (${maxFrameBytes})]`
}

/** Strings at least this long are measured by their UTF-8 length rather than encoded (see {@link encodedBytes}). */
const MEASURED_STRING_CHARS = 1024

/** Bytes of a msgpack str header for a string of `bytes` UTF-8 bytes (msgpackr picks it by the encoded length). */
function stringHeaderBytes(bytes: number): number {
  if (bytes < 0x20) return 1
  if (bytes < 0x100) return 2
  return bytes < 0x10000 ? 3 : 5
}

/**
 * `value` with its long strings (in arrays and plain objects, at most MAX_DEPTH deep) replaced by '' (one byte of
 * msgpack), and what those strings take on the wire beyond that byte, added to `measured.bytes`.
 */
function withoutLongStrings(value: unknown, measured: { bytes: number }, depth = 0): unknown {
  if (typeof value === 'string') {
    if (value.length < MEASURED_STRING_CHARS) return value
    const bytes = Buffer.byteLength(value, 'utf8')
    measured.bytes += stringHeaderBytes(bytes) + bytes - 1
    return ''
  }
  if (depth >= MAX_DEPTH || typeof value !== 'object' || value === null || value instanceof Uint8Array) return value
  if (Array.isArray(value)) return value.map((item) => withoutLongStrings(item, measured, depth + 1))
  const prototype = Object.getPrototypeOf(value) as unknown
  if (prototype !== Object.prototype && prototype !== null) return value
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) out[key] = withoutLongStrings(item, measured, depth + 1)
  return out
}

/**
 * Bytes `value` takes on the wire, as msgpack: exactly its encoded length, found by encoding it with its long
 * strings left out and adding their lengths. Encoding a 64 MB output only to measure it cost as much as sealing
 * it, and a cut return was measured twice before it was sealed.
 */
export function encodedBytes(value: unknown): number {
  const measured = { bytes: 0 }
  const rest = withoutLongStrings(value, measured)
  return encode(rest as WireValue, NO_LIMIT).length + measured.bytes
}

/**
 * An upper bound of {@link encodedBytes}(value), found without encoding it (a return is walked once on
 * every send, where encoding it only to measure it cost as much as sealing it); undefined once the bound
 * passes `limit`, or for a value it cannot bound (deeper than MAX_DEPTH, or a class instance).
 */
function encodedBytesBound(value: unknown, limit: number): number | undefined {
  let total = 0
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }]
  while (stack.length > 0) {
    const { value: item, depth } = stack.pop()!
    switch (typeof item) {
      case 'string':
        // A UTF-16 unit is at most 3 bytes of UTF-8; 5 bytes of str32 header.
        total += 5 + 3 * item.length
        break
      case 'number':
      case 'bigint':
        total += 9
        break
      case 'boolean':
      case 'undefined':
        total += 1
        break
      case 'object': {
        if (item === null) {
          total += 1
          break
        }
        if (depth >= MAX_DEPTH) return undefined
        if (item instanceof Uint8Array) {
          total += 5 + item.byteLength
          break
        }
        total += 5
        if (Array.isArray(item)) {
          for (const element of item) stack.push({ value: element, depth: depth + 1 })
          break
        }
        const prototype = Object.getPrototypeOf(item) as unknown
        if (prototype !== Object.prototype && prototype !== null) return undefined
        for (const key in item) {
          if (!Object.hasOwn(item, key)) continue
          total += 5 + 3 * key.length
          stack.push({ value: (item as Record<string, unknown>)[key], depth: depth + 1 })
        }
        break
      }
      default:
        return undefined
    }
    if (total > limit) return undefined
  }
  return total
}

/**
 * False when `load` surely fits `maxFrameBytes` with `reserveBytes` to spare, shown by a bound
 * rather than by encoding it; true when {@link fitReturn} has to measure it.
 */
export function mayNeedFitting(load: ReturnLoad, maxFrameBytes: number, reserveBytes = RETURN_FRAME_RESERVE_BYTES): boolean {
  return encodedBytesBound(load, Math.max(1024, maxFrameBytes - reserveBytes)) === undefined
}

export interface FittedReturn {
  load: ReturnLoad
  /** Encoded size of the load as the job produced it. */
  originalBytes: number
  /** Encoded size of the load that will be sent. */
  bytes: number
  /** True when something was cut or replaced. */
  truncated: boolean
}

/** A place in the return that holds a string. */
interface StringSlot {
  get(): string
  set(value: string): void
}

/** Every string in `root` (reachable through arrays and plain objects, at most MAX_DEPTH deep), with a setter. */
function stringSlots(root: { value: unknown }): { slots: StringSlot[]; complete: boolean } {
  const slots: StringSlot[] = []
  let complete = true
  const stack: Array<{ holder: Record<string | number, unknown>; key: string | number; depth: number }> = [
    { holder: root as Record<string, unknown>, key: 'value', depth: 0 },
  ]
  while (stack.length > 0) {
    const { holder, key, depth } = stack.pop()!
    const value = holder[key]
    if (typeof value === 'string') {
      slots.push({ get: () => holder[key] as string, set: (text) => (holder[key] = text) })
    } else if (typeof value === 'object' && value !== null && !(value instanceof Uint8Array)) {
      if (depth >= MAX_DEPTH) {
        complete = false
        continue
      }
      const entries: Array<[string | number, unknown]> = Array.isArray(value) ? value.map((item, index) => [index, item]) : Object.entries(value)
      for (const [childKey] of entries) stack.push({ holder: value as Record<string | number, unknown>, key: childKey, depth: depth + 1 })
    }
  }
  return { slots, complete }
}

/** Copies arrays and plain objects (not strings or bytes), so cutting never touches the caller's value. */
function copyTree(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH || typeof value !== 'object' || value === null || value instanceof Uint8Array) return value
  if (Array.isArray(value)) return value.map((item) => copyTree(item, depth + 1))
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) out[key] = copyTree(item, depth + 1)
  return out
}

/** The first `bytes` bytes of `text` (`textBytes` long in UTF-8) in UTF-8, never splitting a character. */
function utf8Prefix(text: string, bytes: number, textBytes: number): string {
  // As many bytes as characters: ASCII, where a byte is a character (no copy of a 64 MB output to UTF-8 and back).
  if (textBytes === text.length) return text.slice(0, Math.max(0, bytes))
  const buffer = Buffer.from(text, 'utf8')
  if (bytes >= buffer.length) return text
  let end = Math.max(0, bytes)
  while (end > 0 && ((buffer[end] ?? 0) & 0xc0) === 0x80) end--
  return buffer.subarray(0, end).toString('utf8')
}

/** Cuts the longest strings of `root.value` until `excess` bytes are saved (or nothing long is left). */
function cutStrings(root: { value: unknown }, excess: number, maxFrameBytes: number): boolean {
  const { slots } = stringSlots(root)
  const sized = slots.map((slot) => ({ slot, bytes: Buffer.byteLength(slot.get(), 'utf8') })).filter((entry) => entry.bytes >= SHORTEST_CUT_BYTES)
  sized.sort((a, b) => b.bytes - a.bytes)
  let cut = false
  for (const { slot, bytes: total } of sized) {
    if (excess <= 0) break
    // A string already cut once (cmd.*'s per-stream cap) keeps that marker; the new cut is made before it.
    const text = slot.get()
    const earlier = EARLIER_MARKER.exec(text)?.[0] ?? ''
    const content = earlier === '' ? text : text.slice(0, -earlier.length)
    const bytes = total - Buffer.byteLength(earlier, 'utf8')
    const markerBytes = Buffer.byteLength(truncationMarker(bytes, bytes, maxFrameBytes), 'utf8')
    // Save the excess plus the marker; a little more for msgpack's length headers.
    const keep = Math.max(0, bytes - excess - markerBytes - 16)
    const kept = utf8Prefix(content, keep, bytes)
    const keptBytes = Buffer.byteLength(kept, 'utf8')
    slot.set(`${kept}${earlier}${truncationMarker(bytes, keptBytes, maxFrameBytes)}`)
    excess -= bytes - keptBytes - markerBytes
    cut = true
  }
  return cut
}

/**
 * `load` as it can be sent within `maxFrameBytes`: unchanged when it fits; otherwise a copy whose
 * longest strings in `return` are cut (each ending with {@link truncationMarker}); when that is not
 * enough (a huge list of small items), `return` becomes the start of its JSON text, cut the same
 * way; then `fun_args` likewise. `retcode`, `success` and the other fields are kept as they are.
 * `reserveBytes`: what is kept free below `maxFrameBytes` for what wraps the load (default
 * {@link RETURN_FRAME_RESERVE_BYTES}; a syndic's batch wraps a return in more).
 */
export function fitReturn(load: ReturnLoad, maxFrameBytes: number, reserveBytes = RETURN_FRAME_RESERVE_BYTES): FittedReturn {
  const budget = Math.max(1024, maxFrameBytes - reserveBytes)
  const originalBytes = encodedBytes(load)
  if (originalBytes <= budget) return { load, originalBytes, bytes: originalBytes, truncated: false }
  const fitted: ReturnLoad = { ...load, return: copyTree(load.return), fun_args: copyTree(load.fun_args) as unknown[] }
  let bytes = originalBytes
  const shrink = (field: 'return' | 'fun_args'): void => {
    const root = {
      get value(): unknown {
        return fitted[field]
      },
      set value(value: unknown) {
        ;(fitted as unknown as Record<string, unknown>)[field] = value
      },
    }
    for (let round = 0; round < MAX_ROUNDS && bytes > budget; round++) {
      if (!cutStrings(root, bytes - budget, maxFrameBytes)) break
      bytes = encodedBytes(fitted)
    }
    if (bytes <= budget) return
    // Too many small pieces to cut: keep the start of the value's JSON text instead.
    let text: string
    try {
      text = JSON.stringify(fitted[field]) ?? String(fitted[field])
    } catch {
      text = String(fitted[field])
    }
    root.value = text
    bytes = encodedBytes(fitted)
    if (bytes > budget) cutStrings(root, bytes - budget, maxFrameBytes)
    if (field === 'fun_args' && !Array.isArray(fitted.fun_args)) fitted.fun_args = [fitted.fun_args]
    bytes = encodedBytes(fitted)
  }
  shrink('return')
  if (bytes > budget) shrink('fun_args')
  return { load: fitted, originalBytes, bytes, truncated: true }
}
