import { ByteQueue } from './byte-queue.js'
import { FRAME_HEADER_BYTES } from './codec.js'
import { FrameTooLargeError } from './errors.js'
import { DEFAULT_MAX_FRAME_BYTES } from './wire.js'

/** What a framed connection needs of the reader that splits its byte stream into frames. */
export interface StreamReader {
  push(chunk: Buffer): void
  /** Bytes held while waiting for the rest of a frame. */
  readonly pendingBytes: number
  /** True while a frame has begun and not ended (buffered, or an oversized one being skipped). */
  readonly inFrame: boolean
  /** Reads nothing more, not even the rest of the chunk being parsed (the connection was dropped). */
  stop(): void
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
  private readonly bytes = new ByteQueue()
  private stopped = false

  constructor(
    private readonly handlers: FrameReaderHandlers,
    private readonly maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES,
    private readonly peer?: string,
  ) {}

  /** Bytes held while waiting for the rest of a frame. */
  get pendingBytes(): number {
    return this.bytes.length
  }

  get inFrame(): boolean {
    return this.bytes.length > 0 || this.bytes.discarding > 0
  }

  stop(): void {
    this.stopped = true
  }

  push(chunk: Buffer): void {
    if (this.stopped) return
    this.bytes.push(chunk)
    this.drain()
  }

  private drain(): void {
    const bytes = this.bytes
    while (!this.stopped && bytes.length >= FRAME_HEADER_BYTES) {
      const length = bytes.peek(FRAME_HEADER_BYTES).readUInt32BE(0)
      if (length > this.maxFrameBytes) {
        bytes.consume(FRAME_HEADER_BYTES)
        bytes.discard(length)
        this.handlers.onOversize(new FrameTooLargeError(length, this.maxFrameBytes, this.peer))
        continue
      }
      if (bytes.length < FRAME_HEADER_BYTES + length) return
      bytes.consume(FRAME_HEADER_BYTES)
      this.handlers.onFrame(bytes.take(length))
    }
  }
}
