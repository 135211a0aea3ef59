import { FRAME_HEADER_BYTES } from './codec.js'
import { FrameTooLargeError } from '../contract/errors.js'
import { DEFAULT_MAX_FRAME_BYTES } from '../contract/types.js'

/** What a framed connection needs of the reader that splits its byte stream into frames. */
export interface StreamReader {
  push(chunk: Buffer): void
  /** Bytes held while waiting for the rest of a frame. */
  readonly pendingBytes: number
  /** True while a frame has begun and not ended (buffered, or an oversized one being skipped). */
  readonly inFrame: boolean
}

export interface FrameReaderHandlers {
  /** A whole frame body. The buffer may be a view into a chunk: copy it to keep it past the call. */
  onFrame(body: Buffer): void
  /** A frame whose declared length exceeds the limit; its body is skipped as it streams past, never buffered. */
  onOversize(error: FrameTooLargeError): void
}

/**
 * Splits a byte stream into length-prefixed frames (4-byte big-endian length, then the body).
 * Memory stays bounded by `maxFrameBytes`: an oversized frame is reported once and its bytes are
 * discarded as they arrive, so the stream stays in step and the connection's other frames survive.
 */
export class FrameReader implements StreamReader {
  private readonly chunks: Buffer[] = []
  private buffered = 0
  private skipping = 0

  constructor(
    private readonly handlers: FrameReaderHandlers,
    private readonly maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES,
    private readonly peer?: string,
  ) {}

  /** Bytes held while waiting for the rest of a frame. */
  get pendingBytes(): number {
    return this.buffered
  }

  get inFrame(): boolean {
    return this.buffered > 0 || this.skipping > 0
  }

  push(chunk: Buffer): void {
    let data = chunk
    if (this.skipping > 0) {
      const skip = Math.min(this.skipping, data.length)
      this.skipping -= skip
      data = data.subarray(skip)
      if (data.length === 0) return
    }
    this.chunks.push(data)
    this.buffered += data.length
    this.drain()
  }

  private drain(): void {
    while (this.buffered >= FRAME_HEADER_BYTES) {
      const head = this.peek(FRAME_HEADER_BYTES)
      const length = head.readUInt32BE(0)
      if (length > this.maxFrameBytes) {
        this.consume(FRAME_HEADER_BYTES)
        const skip = Math.min(length, this.buffered)
        this.consume(skip)
        this.skipping = length - skip
        this.handlers.onOversize(new FrameTooLargeError(length, this.maxFrameBytes, this.peer))
        continue
      }
      if (this.buffered < FRAME_HEADER_BYTES + length) return
      this.consume(FRAME_HEADER_BYTES)
      this.handlers.onFrame(this.take(length))
    }
  }

  /** The first n buffered bytes, without consuming them (n ≤ buffered). */
  private peek(n: number): Buffer {
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

  /** Removes and returns the first n buffered bytes, copying only when they span chunks. */
  private take(n: number): Buffer {
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

  private consume(n: number): void {
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
    this.buffered -= n
  }
}
