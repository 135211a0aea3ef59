/**
 * nacl's secretbox (XSalsa20-Poly1305), the same bytes as `nacl.secretbox` and `nacl.secretbox.open`, built on
 * tweetnacl's own low-level functions without their copies. tweetnacl copies a message byte by byte, in
 * JavaScript, into a buffer with 32 zero bytes in front, and writes the result into a second fresh buffer: for a
 * 64 MB return, two passes over fresh memory and a loop of 64 million steps beside the cipher's own pass. Here the
 * message is encoded after 32 bytes of headroom and sealed where it lies; a box is checked where it lies and
 * deciphered straight into the one buffer the plaintext needs.
 */
import nacl from 'tweetnacl'
import { encodeWithHeadroom, type WireValue } from '@brine/core'

/** tweetnacl's low-level functions (its typings leave `lowlevel` out); each takes arrays with offsets. */
interface NaclLowLevel {
  crypto_secretbox(c: Uint8Array, m: Uint8Array, d: number, n: Uint8Array, k: Uint8Array): number
  crypto_stream(c: Uint8Array, cpos: number, d: number, n: Uint8Array, k: Uint8Array): number
  crypto_stream_xor(c: Uint8Array, cpos: number, m: Uint8Array, mpos: number, d: number, n: Uint8Array, k: Uint8Array): number
  crypto_onetimeauth_verify(h: Uint8Array, hpos: number, m: Uint8Array, mpos: number, n: number, k: Uint8Array): number
}
const lowlevel = (nacl as unknown as { lowlevel: NaclLowLevel }).lowlevel

/** Zero bytes in front of a message as secretbox works on it (crypto_secretbox_ZEROBYTES). */
const ZERO_BYTES = 32
/** Of those, the ones still in front of the box once sealed (crypto_secretbox_BOXZEROBYTES); the MAC follows them. */
const BOX_ZERO_BYTES = 16
const MAC_BYTES = ZERO_BYTES - BOX_ZERO_BYTES

/**
 * `bytes` as a plain Uint8Array over the same memory. tweetnacl's functions index their arrays byte by byte: given
 * Buffers here and Uint8Arrays elsewhere (its own calls, the key), each access site sees two kinds of array and the
 * compiled cipher runs several times slower.
 */
const plain = (bytes: Uint8Array): Uint8Array =>
  Object.getPrototypeOf(bytes) === Uint8Array.prototype ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)

function checkKeyAndNonce(nonce: Uint8Array, key: Uint8Array): void {
  if (key.length !== nacl.secretbox.keyLength) throw new Error('bad key size')
  if (nonce.length !== nacl.secretbox.nonceLength) throw new Error('bad nonce size')
}

/**
 * `value` encoded as msgpack (bounded by `limit`, FrameTooLargeError over it, as `encode` does) and sealed:
 * exactly `nacl.secretbox(encode(value, limit), nonce, key)`, without copying the encoded bytes.
 */
export function sealEncoded(value: WireValue, nonce: Uint8Array, key: Uint8Array, limit?: number): Uint8Array {
  checkKeyAndNonce(nonce, key)
  const message = plain(encodeWithHeadroom(value, ZERO_BYTES, limit))
  message.fill(0, 0, ZERO_BYTES)
  // In place: the cipher reads each byte before it writes it, and the MAC is computed over the result.
  lowlevel.crypto_secretbox(message, message, message.length, plain(nonce), plain(key))
  return message.subarray(BOX_ZERO_BYTES)
}

/**
 * Opens a box: exactly `nacl.secretbox.open(box, nonce, key)` (null unless it authenticates), reading `box` where it
 * lies (it is not modified) and writing the plaintext once.
 */
export function openBox(sealed: Uint8Array, nonceBytes: Uint8Array, keyBytes: Uint8Array): Uint8Array | null {
  checkKeyAndNonce(nonceBytes, keyBytes)
  const [box, nonce, key] = [plain(sealed), plain(nonceBytes), plain(keyBytes)]
  if (box.length < MAC_BYTES) return null
  const polyKey = new Uint8Array(ZERO_BYTES)
  lowlevel.crypto_stream(polyKey, 0, ZERO_BYTES, nonce, key)
  if (lowlevel.crypto_onetimeauth_verify(box, 0, box, MAC_BYTES, box.length - MAC_BYTES, polyKey) !== 0) return null
  // The stream's first 32 bytes are the MAC key; the ciphertext is enciphered from byte 32 on. The cipher runs from
  // byte 0, so it is given the ciphertext with 32 bytes in front (what they hold is enciphered into bytes of the
  // output that are dropped): the 16 of the MAC and 16 before the box when its buffer has them (a box decoded from a
  // frame does), else the box copied behind 16 bytes of room.
  const length = box.length + BOX_ZERO_BYTES
  const input = box.byteOffset >= BOX_ZERO_BYTES ? new Uint8Array(box.buffer, box.byteOffset - BOX_ZERO_BYTES, length) : withRoomInFront(box)
  // A Buffer of its own (not a view into Node's shared pool; the decoded bins are Buffers), its dropped bytes zeroed as tweetnacl's are.
  const out = Buffer.allocUnsafeSlow(length)
  lowlevel.crypto_stream_xor(plain(out), 0, input, 0, length, nonce, key)
  out.fill(0, 0, ZERO_BYTES)
  return out.subarray(ZERO_BYTES)
}

/** `box` behind 16 bytes of room. */
function withRoomInFront(box: Uint8Array): Uint8Array {
  const copy = new Uint8Array(BOX_ZERO_BYTES + box.length)
  copy.set(box, BOX_ZERO_BYTES)
  return copy
}
