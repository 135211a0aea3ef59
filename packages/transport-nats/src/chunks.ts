import { admission, type EndpointCore, type PendingHolder } from '@brine/transport'
import { FrameTooLargeError } from '@brine/core'

/**
 * A message larger than the broker's `max_payload` travels as chunks, each
 * `[0xc1][message id u32][total bytes u32][offset u32][bytes]`. 0xc1 is the one byte msgpack never
 * uses, so a whole message (always one msgpack value) can never be mistaken for a chunk.
 */
export const CHUNK_MARK = 0xc1
export const CHUNK_HEADER_BYTES = 13
/** An incomplete message must grow by this much within the idle timeout, as a frame must on a socket. */
const PROGRESS_BYTES = 64 * 1024
/** What an incomplete message costs in the budget at least, so a flood of tiny first chunks is bounded too. */
const MIN_HELD_BYTES = 1024
/** Peers remembered while the rest of a refused message streams past. */
const SKIPPING_LIMIT = 4096

/** Publishes `body` as one message, or as chunks of at most `maxPayload` bytes each. */
export function publishChunked(publish: (data: Uint8Array) => void, body: Buffer, maxPayload: number, messageId: number): void {
  if (body.length <= maxPayload) {
    publish(body)
    return
  }
  const step = maxPayload - CHUNK_HEADER_BYTES
  for (let offset = 0; offset < body.length; offset += step) {
    const part = body.subarray(offset, Math.min(body.length, offset + step))
    const chunk = Buffer.allocUnsafe(CHUNK_HEADER_BYTES + part.length)
    chunk[0] = CHUNK_MARK
    chunk.writeUInt32BE(messageId >>> 0, 1)
    chunk.writeUInt32BE(body.length, 5)
    chunk.writeUInt32BE(offset, 9)
    chunk.set(part, CHUNK_HEADER_BYTES)
    publish(chunk)
  }
}

export interface ReassemblyOptions {
  maxFrameBytes: number
  /** Bytes of incomplete messages held over every endpoint of the process (`max_pending_bytes`). */
  maxPendingBytes: number
  /** ms an incomplete message may go without growing by 64 KiB (`peer_idle_timeout`); 0: no such limit. */
  idleTimeout: number
  /**
   * A server's deadlines, as a socket server's: ms a peer that never completed a message has to complete its
   * first (`handshake_timeout`: on a broker the first whole message is the greeting), and ms a greeted peer's
   * message has from its first chunk (`frame_timeout`), however steadily it trickles. 0 or absent: none.
   */
  handshakeTimeout?: number
  frameTimeout?: number
}

/** Peers remembered as greeted (a whole message received); the oldest is forgotten past this, and must greet again. */
const GREETED_LIMIT = 65_536

/** One peer's message in progress; a PendingHolder, so the process-wide budget can give it up. */
class Partial implements PendingHolder {
  readonly parts: Buffer[] = []
  received = 0
  progressMark = 0
  readonly pendingSince = Date.now()
  timer: NodeJS.Timeout | undefined
  /** The handshake_timeout or frame_timeout deadline, set once when the message begins: progress does not move it. */
  deadline: NodeJS.Timeout | undefined

  constructor(
    readonly owner: Reassembler,
    readonly peer: string,
    readonly messageId: number,
    readonly total: number,
  ) {}

  get pendingBytes(): number {
    return Math.max(this.received, MIN_HELD_BYTES)
  }

  drop(reason: string): void {
    this.owner.giveUp(this, reason)
  }
}

/**
 * Puts chunked messages back together within the same bounds a socket server applies to frames:
 * a declared size over `maxFrameBytes` is refused on its first chunk and the rest skipped unread;
 * incomplete messages count against `max_pending_bytes` over the process (the slowest is given up);
 * one that stops growing is given up after `idleTimeout`. Chunks of one peer arrive in order (NATS
 * keeps a publisher's order), so each peer has at most one message in progress.
 */
export class Reassembler {
  readonly #partials = new Map<string, Partial>()
  readonly #skipping = new Map<string, number>()
  readonly #greeted = new Set<string>()

  constructor(
    private readonly core: EndpointCore,
    private readonly options: ReassemblyOptions,
    private readonly deliver: (body: Buffer, peer: string) => void,
  ) {}

  receive(data: Buffer, peer: string): void {
    if (data.length === 0 || data[0] !== CHUNK_MARK) {
      // Most messages come whole with nothing in progress: no lookup (a fresh subject string hashed) for those.
      const interrupted = this.#partials.size === 0 ? undefined : this.#partials.get(peer)
      if (interrupted !== undefined) this.#discard(interrupted, `its chunked message of ${interrupted.total} bytes was interrupted by another message`)
      this.#greet(peer)
      // The broker's max_payload may be larger than this endpoint's max_frame_bytes.
      if (data.length > this.options.maxFrameBytes)
        this.core.frameDropped(peer, new FrameTooLargeError(data.length, this.options.maxFrameBytes, peer).message, data.length)
      else this.deliver(data, peer)
      return
    }
    if (data.length < CHUNK_HEADER_BYTES) {
      // A whole message, if a malformed one: the peer has greeted, as a socket peer whose first frame is refused has.
      this.#greet(peer)
      this.core.frameDropped(peer, `malformed chunk from ${peer}: ${data.length} bytes, shorter than a chunk header`, data.length)
      return
    }
    this.#chunk(peer, data.readUInt32BE(1), data.readUInt32BE(5), data.readUInt32BE(9), data.subarray(CHUNK_HEADER_BYTES))
  }

  #chunk(peer: string, messageId: number, total: number, offset: number, bytes: Buffer): void {
    if (this.#skipping.get(peer) === messageId) {
      if (offset + bytes.length >= total) this.#skipping.delete(peer)
      return
    }
    let partial = this.#partials.get(peer)
    if (partial !== undefined && partial.messageId !== messageId) {
      this.#discard(partial, `its chunked message of ${partial.total} bytes was interrupted by another message`)
      partial = undefined
    }
    if (partial === undefined) {
      if (offset !== 0) {
        this.core.frameDropped(peer, `malformed chunk from ${peer}: offset ${offset} of a message not begun`, bytes.length + CHUNK_HEADER_BYTES)
        return
      }
      if (total > this.options.maxFrameBytes) {
        this.core.frameDropped(peer, new FrameTooLargeError(total, this.options.maxFrameBytes, peer).message, total)
        this.#skip(peer, messageId, offset + bytes.length < total)
        return
      }
      partial = new Partial(this, peer, messageId, total)
      this.#partials.set(peer, partial)
      this.#armTimer(partial)
      this.#armDeadline(partial)
    }
    if (offset !== partial.received || offset + bytes.length > total) {
      this.#discard(partial, `malformed chunk from ${peer}: bytes ${offset}..${offset + bytes.length} do not follow ${partial.received} of ${total}`)
      return
    }
    partial.parts.push(bytes)
    partial.received += bytes.length
    if (partial.received === total) {
      this.#forget(partial)
      this.#greet(peer)
      this.deliver(Buffer.concat(partial.parts, total), peer)
      return
    }
    if (partial.received - partial.progressMark >= PROGRESS_BYTES) {
      partial.progressMark = partial.received
      this.#armTimer(partial)
    }
    admission.hold(partial, partial.pendingBytes, this.options.maxPendingBytes)
  }

  #skip(peer: string, messageId: number, more: boolean): void {
    if (!more) return
    if (this.#skipping.size >= SKIPPING_LIMIT) this.#skipping.delete(this.#skipping.keys().next().value as string)
    this.#skipping.set(peer, messageId)
  }

  /** A whole message arrived from `peer`: it has greeted (remembered within a bound). */
  #greet(peer: string): void {
    // Only a server's reassembler has the deadlines that ask whether a peer greeted; a client's remembers nobody.
    if (!((this.options.handshakeTimeout ?? 0) > 0 || (this.options.frameTimeout ?? 0) > 0)) return
    if (this.#greeted.has(peer)) return
    if (this.#greeted.size >= GREETED_LIMIT) this.#greeted.delete(this.#greeted.values().next().value as string)
    this.#greeted.add(peer)
  }

  #armTimer(partial: Partial): void {
    clearTimeout(partial.timer)
    const ms = this.options.idleTimeout
    if (ms <= 0) return
    partial.timer = setTimeout(() => {
      partial.drop(
        partial.received === 0
          ? `declared a message and sent nothing for ${ms} ms (peer_idle_timeout)`
          : `sent no more of its message within ${ms} ms (peer_idle_timeout; ${partial.received} bytes of it held)`,
      )
    }, ms)
    partial.timer.unref()
  }

  /**
   * The socket servers' two deadlines that trickling cannot stretch: a peer's first message is its greeting
   * (handshake_timeout); a greeted peer's later message must be whole within frame_timeout of its first chunk.
   */
  #armDeadline(partial: Partial): void {
    const greeted = this.#greeted.has(partial.peer)
    const ms = (greeted ? this.options.frameTimeout : this.options.handshakeTimeout) ?? 0
    if (ms <= 0) return
    partial.deadline = setTimeout(() => {
      partial.drop(
        greeted
          ? `did not complete its frame within ${ms} ms of its first byte (frame_timeout; ${partial.received} bytes of it held)`
          : `did not complete its greeting within ${ms} ms (handshake_timeout; ${partial.received} bytes received)`,
      )
    }, ms)
    partial.deadline.unref()
  }

  /** @internal The budget or the idle timer gave up `partial`: a `peer-drop`, and the rest of it is skipped. */
  giveUp(partial: Partial, reason: string): void {
    if (this.#partials.get(partial.peer) !== partial) return
    this.#forget(partial)
    this.#skip(partial.peer, partial.messageId, true)
    this.core.peerDropped(partial.peer, reason)
  }

  #discard(partial: Partial, reason: string): void {
    this.#forget(partial)
    this.core.frameDropped(partial.peer, reason, partial.received)
  }

  #forget(partial: Partial): void {
    clearTimeout(partial.timer)
    clearTimeout(partial.deadline)
    this.#partials.delete(partial.peer)
    admission.release(partial)
  }

  /** Bytes of incomplete messages this reassembler holds. */
  get pending(): number {
    let bytes = 0
    for (const partial of this.#partials.values()) bytes += partial.received
    return bytes
  }

  close(): void {
    for (const partial of [...this.#partials.values()]) this.#forget(partial)
    this.#skipping.clear()
    this.#greeted.clear()
  }
}
