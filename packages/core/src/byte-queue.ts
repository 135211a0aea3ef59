/**
 * The bytes of a stream received so far and not yet consumed, kept as the chunks they arrived in:
 * peeking and taking copy only when a span crosses chunks. What the length-prefixed FrameReader
 * and ZeroMQ's ZMTP reader parse from.
 */
export class ByteQueue {
  private readonly chunks: Buffer[] = []
  private held = 0
  private skipping = 0

  /** Bytes held. */
  get length(): number {
    return this.held
  }

  /** Bytes still to be discarded as they arrive (the rest of an oversized frame). */
  get discarding(): number {
    return this.skipping
  }

  push(chunk: Buffer): void {
    let data = chunk
    if (this.skipping > 0) {
      const skip = Math.min(this.skipping, data.length)
      this.skipping -= skip
      data = data.subarray(skip)
    }
    if (data.length === 0) return
    this.chunks.push(data)
    this.held += data.length
  }

  /** Drops the next n bytes: those held now, and the rest as they arrive, never buffered. */
  discard(n: number): void {
    const now = Math.min(n, this.held)
    this.consume(now)
    this.skipping += n - now
  }

  /** The first n bytes, without consuming them (n <= length). */
  peek(n: number): Buffer {
    const first = this.chunks[0]!
    if (first.length >= n) return first.subarray(0, n)
    const out = Buffer.allocUnsafe(n)
    let offset = 0
    for (const chunk of this.chunks) {
      offset += chunk.copy(out, offset, 0, Math.min(chunk.length, n - offset))
      if (offset === n) break
    }
    return out
  }

  /** Removes and returns the first n bytes (n <= length), copying only when they span chunks. */
  take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0)
    const first = this.chunks[0]!
    if (first.length >= n) {
      const out = first.subarray(0, n)
      this.consume(n)
      return out
    }
    const out = Buffer.allocUnsafe(n)
    let offset = 0
    while (offset < n) {
      const chunk = this.chunks[0]!
      const part = Math.min(chunk.length, n - offset)
      chunk.copy(out, offset, 0, part)
      offset += part
      this.consume(part)
    }
    return out
  }

  /** Drops the first n bytes (n <= length). */
  consume(n: number): void {
    let left = n
    while (left > 0) {
      const first = this.chunks[0]!
      if (first.length <= left) {
        this.chunks.shift()
        left -= first.length
      } else {
        this.chunks[0] = first.subarray(left)
        left = 0
      }
    }
    this.held -= n
  }
}

/**
 * `bytes` in an ArrayBuffer of their own: the same Buffer when it already is one, else a copy. A frame read with
 * others in one socket read is a view into that read's chunk (tens of KiB), and whatever is decoded from it (msgpack
 * bins are views too) keeps the whole chunk alive: a request kept while its handler waits would hold its chunk, so
 * a server's bound on the bytes of requests in flight would bound the few hundred bytes it counts and not the
 * chunk each one holds. Not Buffer.from: a small copy from Node's pool is a view into a shared slab again.
 */
export function ownBytes(bytes: Buffer): Buffer {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes
  const own = new Uint8Array(bytes)
  return Buffer.from(own.buffer, 0, own.byteLength)
}
