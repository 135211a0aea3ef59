import { randomFillSync, timingSafeEqual } from 'node:crypto'
import type { CryptCache } from './crypt-cache.js'

/** `length` fresh random bytes (a nonce): from the cache's pool when one is given, else straight from the CSPRNG. */
export function randomNonce(length: number, cache?: CryptCache): Uint8Array {
  return cache !== undefined ? cache.nonce(length) : new Uint8Array(randomFillSync(Buffer.alloc(length)))
}

/** Small byte helpers shared by the other modules (internal; not exported from the package). */

export const toBase64 = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')

/**
 * Decodes canonical base64 of exactly `length` bytes, or returns undefined. Node's decoder skips
 * garbage silently, so the result is re-encoded and compared: a flipped or missing character fails.
 */
export function fromBase64Exact(text: string, length: number): Uint8Array | undefined {
  const bytes = Buffer.from(text, 'base64')
  if (bytes.length !== length || bytes.toString('base64') !== text) return undefined
  return new Uint8Array(bytes)
}

export const isBytes = (value: unknown, length?: number): value is Uint8Array =>
  value instanceof Uint8Array && (length === undefined || value.length === length)

/** Constant-time equality of two byte strings of any length (the length itself is not secret). */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * The exact bytes a signature covers: a domain tag, then each part tagged with its type and
 * length. Length prefixes make the encoding unambiguous ("ab"+"c" never equals "a"+"bc"), and the
 * tag keeps a signature made for one purpose from being replayed as another.
 */
export function transcript(tag: string, ...parts: ReadonlyArray<Uint8Array | string | number>): Uint8Array {
  const chunks: Uint8Array[] = []
  const push = (type: number, body: Uint8Array): void => {
    const head = new Uint8Array(5)
    head[0] = type
    new DataView(head.buffer).setUint32(1, body.length)
    chunks.push(head, body)
  }
  push(0x54, Buffer.from(tag, 'utf8'))
  for (const part of parts) {
    if (typeof part === 'string') push(0x73, Buffer.from(part, 'utf8'))
    else if (typeof part === 'number') push(0x6e, Buffer.from(String(part), 'utf8'))
    else push(0x62, part)
  }
  return Buffer.concat(chunks)
}
