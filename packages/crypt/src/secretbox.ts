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
  crypto_core_hsalsa20(out: Uint8Array, input: Uint8Array, key: Uint8Array, constant: Uint8Array): number
  crypto_stream(c: Uint8Array, cpos: number, d: number, n: Uint8Array, k: Uint8Array): number
  crypto_stream_xor(c: Uint8Array, cpos: number, m: Uint8Array, mpos: number, d: number, n: Uint8Array, k: Uint8Array): number
  crypto_stream_salsa20_xor(c: Uint8Array, cpos: number, m: Uint8Array, mpos: number, b: number, n: Uint8Array, k: Uint8Array): number
  crypto_onetimeauth(out: Uint8Array, outpos: number, m: Uint8Array, mpos: number, n: number, k: Uint8Array): number
  crypto_onetimeauth_verify(h: Uint8Array, hpos: number, m: Uint8Array, mpos: number, n: number, k: Uint8Array): number
}
const lowlevel = (nacl as unknown as { lowlevel: NaclLowLevel }).lowlevel

/** "expand 32-byte k", Salsa20's constant (HSalsa20 takes it too). */
const SIGMA = new Uint8Array(Buffer.from('expand 32-byte k', 'latin1'))
/**
 * XSalsa20's subkey and the nonce's last 8 bytes, written by {@link xsalsaSubkey} and read at once by the same
 * synchronous call: one pair per module (per thread). tweetnacl's `crypto_stream_xor` allocates both for every
 * message, and its `secretbox.open` derives the subkey twice (once for the MAC key, once for the message).
 */
const SUBKEY = new Uint8Array(32)
const SUBNONCE = new Uint8Array(8)

/** XSalsa20 under (`nonce`, `key`) is Salsa20 under (SUBNONCE, SUBKEY): HSalsa20 of the nonce's first 16 bytes. */
function xsalsaSubkey(nonce: Uint8Array, key: Uint8Array): void {
  lowlevel.crypto_core_hsalsa20(SUBKEY, nonce, key, SIGMA)
  for (let i = 0; i < 8; i++) SUBNONCE[i] = nonce[16 + i]!
}

/**
 * Boxes up to this long open in one pass of the cipher over a copy (below); longer ones are checked before a byte is
 * deciphered, so a forged large box costs the MAC's pass alone and nothing is copied.
 */
const ONE_PASS_MAX_BYTES = 4096

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
  // nacl's crypto_secretbox, its subkey in place: enciphered where it lies (the cipher reads each byte before it
  // writes it), the first 32 bytes becoming the MAC key; the MAC over the ciphertext goes in front of it.
  xsalsaSubkey(plain(nonce), plain(key))
  lowlevel.crypto_stream_salsa20_xor(message, 0, message, 0, message.length, SUBNONCE, SUBKEY)
  lowlevel.crypto_onetimeauth(message, BOX_ZERO_BYTES, message, ZERO_BYTES, message.length - ZERO_BYTES, message)
  // The rest of the one-time MAC key, beside the box in its buffer: zeroed, as nacl does.
  message.fill(0, 0, BOX_ZERO_BYTES)
  return message.subarray(BOX_ZERO_BYTES)
}

/**
 * Opens a box: exactly `nacl.secretbox.open(box, nonce, key)` (null unless it authenticates), reading `box` where it
 * lies (it is not modified) and writing the plaintext once.
 */
export function openBox(sealed: Uint8Array, nonceBytes: Uint8Array, keyBytes: Uint8Array): Uint8Array | null {
  checkKeyAndNonce(nonceBytes, keyBytes)
  const box = plain(sealed)
  if (box.length < MAC_BYTES) return null
  return box.length <= ONE_PASS_MAX_BYTES ? openSmall(box, plain(nonceBytes), plain(keyBytes)) : openLarge(box, plain(nonceBytes), plain(keyBytes))
}

/**
 * A small box (a return's acknowledgement, a ping's return): its ciphertext copied behind 32 zero bytes in the buffer
 * the plaintext needs anyway and deciphered there in one pass, whose first 32 bytes are then the MAC key it is checked
 * with. Nothing deciphered leaves unless the MAC holds. tweetnacl's way runs the cipher's first block and the subkey
 * twice and makes a dozen small arrays per message, which every return paid on both sides.
 */
function openSmall(box: Uint8Array, nonce: Uint8Array, key: Uint8Array): Uint8Array | null {
  const length = box.length + BOX_ZERO_BYTES
  const out = Buffer.allocUnsafeSlow(length)
  const work = plain(out)
  work.fill(0, 0, ZERO_BYTES)
  work.set(box.subarray(MAC_BYTES), ZERO_BYTES)
  xsalsaSubkey(nonce, key)
  lowlevel.crypto_stream_salsa20_xor(work, 0, work, 0, length, SUBNONCE, SUBKEY)
  if (lowlevel.crypto_onetimeauth_verify(box, 0, box, MAC_BYTES, box.length - MAC_BYTES, work) !== 0) return null
  out.fill(0, 0, ZERO_BYTES)
  return out.subarray(ZERO_BYTES)
}

/** A large box: checked where it lies, then deciphered straight into the one buffer its plaintext needs. */
function openLarge(box: Uint8Array, nonce: Uint8Array, key: Uint8Array): Uint8Array | null {
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
