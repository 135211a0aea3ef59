import { type FramedConnection } from '@brine/transport'
import { ByteQueue, type StreamReader } from '@brine/core'

/**
 * ZMTP 3.0 (rfc.zeromq.org/spec/23) with the NULL mechanism, both sides: the wire libzmq's Router,
 * XPublisher, Dealer and Subscriber speak. Brine's ZeroMQ servers speak it themselves, over the runtime's
 * Listener, rather than through libzmq's Router and XPublisher: libzmq keeps every subscription a
 * peer sends (200,000 junk topics cost a publisher about 390 MiB, in manual mode as well) and has no
 * way to close one peer's connection, so it could bound neither subscriptions nor connections. The
 * clients speak it too (zmtp-client.ts), so no libzmq I/O thread stands between the kernel and the
 * main thread. Announcing version 3.0 makes libzmq 4.3 send subscriptions as messages (`\x01topic`),
 * not 3.1's SUBSCRIBE commands, and take them so from us.
 */

export const GREETING_BYTES = 64
const FLAG_MORE = 0x01
const FLAG_LONG = 0x02
const FLAG_COMMAND = 0x04
/** Parts one message may have; Brine's messages have one (requests, subscriptions). */
export const MAX_MESSAGE_PARTS = 16

/** Our greeting: signature, version 3.0, mechanism NULL, not as-server (NULL has no server role), filler. */
export function greeting(): Buffer {
  const bytes = Buffer.alloc(GREETING_BYTES)
  bytes[0] = 0xff
  bytes[9] = 0x7f
  bytes[10] = 3
  bytes[11] = 0
  bytes.write('NULL', 12, 'latin1')
  return bytes
}

/** One frame's header: flags, then a 1-byte size (up to 255) or an 8-byte one. */
export function frameHeader(size: number, more: boolean, command = false): Buffer {
  const flags = (more ? FLAG_MORE : 0) | (command ? FLAG_COMMAND : 0)
  if (size <= 255) return Buffer.from([flags, size])
  const header = Buffer.allocUnsafe(9)
  header[0] = flags | FLAG_LONG
  header.writeUInt32BE(Math.floor(size / 2 ** 32), 1)
  header.writeUInt32BE(size >>> 0, 5)
  return header
}

/** A command frame: name, then its body. */
export function command(name: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const payload = Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'latin1'), body])
  return Buffer.concat([frameHeader(payload.length, false, true), payload])
}

/** READY with our socket type (ZMTP's metadata: 1-byte name length, name, 4-byte value length, value). */
export function readyCommand(socketType: string): Buffer {
  const name = Buffer.from('Socket-Type', 'latin1')
  const value = Buffer.from(socketType, 'latin1')
  const property = Buffer.alloc(1 + name.length + 4 + value.length)
  property[0] = name.length
  name.copy(property, 1)
  property.writeUInt32BE(value.length, 1 + name.length)
  value.copy(property, 5 + name.length)
  return command('READY', property)
}

/** The parts of one outgoing message, headers and bodies, for one corked write (bodies are not copied). */
export function messageParts(bodies: readonly Buffer[]): Buffer[] {
  const parts: Buffer[] = []
  bodies.forEach((body, index) => {
    parts.push(frameHeader(body.length, index < bodies.length - 1), body)
  })
  return parts
}

export interface ZmtpHandlers {
  /** The peer's READY, with its metadata (names lower-cased). */
  onReady(metadata: ReadonlyMap<string, string>): void
  /** One whole message: its parts, each possibly a view into a chunk (copy to keep). */
  onMessage(parts: Buffer[]): void
  /** A message dropped unread: a part over the size limit, or more than MAX_MESSAGE_PARTS parts. */
  onOversize(size: number, reason: string): void
  /** A PING: answer with this PONG. */
  onPing(pong: Buffer): void
  /** The peer broke the protocol (bad greeting, a command out of place, an ERROR): drop it. */
  onProtocolError(reason: string): void
}

type State = 'greeting' | 'ready' | 'traffic' | 'stopped'

/**
 * Reads a ZMTP 3 stream: the 64-byte greeting, the peer's READY, then frames into messages. A frame
 * over `maxFrameBytes` is skipped as it streams past (never buffered) and its message dropped, as
 * the length-prefixed reader does; a message's parts together may hold at most `maxMessageBytes`.
 * Progress (the handshake, each message) is reported to the connection for its idle timeout.
 */
export class ZmtpReader implements StreamReader {
  private readonly bytes = new ByteQueue()
  private state: State = 'greeting'
  private parts: Buffer[] = []
  private partsBytes = 0
  /** The rest of the current message is being dropped (a part was oversized or one too many). */
  private discarding = false

  constructor(
    private readonly connection: FramedConnection,
    private readonly handlers: ZmtpHandlers,
    private readonly maxFrameBytes: number,
    /** Bytes a message's parts may hold together (a publish's topic besides a payload of max_frame_bytes). */
    private readonly maxMessageBytes = maxFrameBytes,
  ) {}

  get pendingBytes(): number {
    return this.bytes.length + this.partsBytes
  }

  get inFrame(): boolean {
    return this.state !== 'traffic' || this.bytes.length > 0 || this.bytes.discarding > 0 || this.parts.length > 0 || this.discarding
  }

  stop(): void {
    this.state = 'stopped'
  }

  push(chunk: Buffer): void {
    if (this.state === 'stopped') return
    this.bytes.push(chunk)
    this.drain()
  }

  private fail(reason: string): void {
    this.state = 'stopped'
    this.handlers.onProtocolError(reason)
  }

  private drain(): void {
    const bytes = this.bytes
    for (;;) {
      if (this.state === 'stopped') return
      if (this.state === 'greeting') {
        if (bytes.length < GREETING_BYTES) return
        const peer = bytes.take(GREETING_BYTES)
        if (peer[0] !== 0xff || (peer[9]! & 0x01) !== 0x01) return this.fail('not a ZMTP peer (bad signature)')
        if (peer[10]! < 3) return this.fail(`ZMTP version ${peer[10]} is not supported (3.0 or later)`)
        const mechanism = peer.subarray(12, 32).toString('latin1').replace(/\0+$/, '')
        if (mechanism !== 'NULL') return this.fail(`mechanism ${JSON.stringify(mechanism)} is not supported (NULL)`)
        this.state = 'ready'
        continue
      }
      if (bytes.length < 2) return
      const head = bytes.peek(Math.min(bytes.length, 9))
      const flags = head[0]!
      if ((flags & 0xf8) !== 0) return this.fail(`reserved frame flags set (0x${flags.toString(16)})`)
      const long = (flags & FLAG_LONG) !== 0
      if (long && bytes.length < 9) return
      const headerBytes = long ? 9 : 2
      // An 8-byte size beyond 2^53 is clamped: it is over any limit either way, and skipping it never ends.
      const declared = long ? Math.min(Number.MAX_SAFE_INTEGER, head.readUInt32BE(1) * 2 ** 32 + head.readUInt32BE(5)) : head[1]!
      const isCommand = (flags & FLAG_COMMAND) !== 0
      const more = (flags & FLAG_MORE) !== 0
      if (isCommand && more) return this.fail('a command frame with the MORE flag')
      if (declared > this.maxFrameBytes) {
        if (isCommand || this.state !== 'traffic') return this.fail(`a command of ${declared} bytes`)
        // Skipped as it streams past: never buffered. The message it belongs to is dropped.
        bytes.consume(headerBytes)
        const size = declared
        bytes.discard(size)
        this.dropMessage(more, size, `frame of ${size} bytes from ${this.connection.peer} exceeds max_frame_bytes (${this.maxFrameBytes})`)
        continue
      }
      const size = declared
      if (bytes.length < headerBytes + size) return
      bytes.consume(headerBytes)
      const body = bytes.take(size)
      if (isCommand) {
        this.command(body)
        continue
      }
      if (this.state !== 'traffic') return this.fail('a message before the handshake completed')
      this.part(body, more)
    }
  }

  private dropMessage(more: boolean, size: number, reason: string): void {
    const wasDiscarding = this.discarding
    this.parts = []
    this.partsBytes = 0
    this.discarding = more
    if (!wasDiscarding) this.handlers.onOversize(size, reason)
    if (!more) this.connection.frameDone()
  }

  private part(body: Buffer, more: boolean): void {
    if (this.discarding) {
      this.discarding = more
      if (!more) this.connection.frameDone()
      return
    }
    if (this.parts.length >= MAX_MESSAGE_PARTS || this.partsBytes + body.length > this.maxMessageBytes) {
      this.dropMessage(
        more,
        this.partsBytes + body.length,
        `message from ${this.connection.peer} has more than ${MAX_MESSAGE_PARTS} parts or ${this.maxMessageBytes} bytes (max_frame_bytes)`,
      )
      return
    }
    if (!more && this.parts.length === 0) {
      this.connection.frameDone()
      this.handlers.onMessage([body])
      return
    }
    // Parts of a longer message are copied: the chunks they are views of move on.
    this.parts.push(Buffer.from(body))
    this.partsBytes += body.length
    if (more) return
    const parts = this.parts
    this.parts = []
    this.partsBytes = 0
    this.connection.frameDone()
    this.handlers.onMessage(parts)
  }

  private command(body: Buffer): void {
    const nameLength = body[0] ?? 0
    if (body.length < 1 + nameLength) return this.fail('a command cut short')
    const name = body.subarray(1, 1 + nameLength).toString('latin1')
    const data = body.subarray(1 + nameLength)
    if (name === 'ERROR') return this.fail(`the peer sent ERROR: ${data.subarray(1, 1 + (data[0] ?? 0)).toString('latin1')}`)
    if (this.state === 'ready') {
      if (name !== 'READY') return this.fail(`expected READY, got ${JSON.stringify(name)}`)
      const metadata = parseMetadata(data)
      if (metadata === undefined) return this.fail('READY with malformed metadata')
      this.state = 'traffic'
      this.connection.frameDone()
      this.handlers.onReady(metadata)
      return
    }
    if (name === 'PING') {
      // TTL (2 bytes), then up to 16 bytes of context the PONG echoes.
      this.handlers.onPing(command('PONG', Buffer.from(data.subarray(2, 18))))
      return
    }
    // PONG and any command a later ZMTP adds: nothing to do.
  }
}

function parseMetadata(data: Buffer): Map<string, string> | undefined {
  const metadata = new Map<string, string>()
  let pos = 0
  while (pos < data.length) {
    const nameLength = data[pos]!
    if (pos + 1 + nameLength + 4 > data.length) return undefined
    const name = data
      .subarray(pos + 1, pos + 1 + nameLength)
      .toString('latin1')
      .toLowerCase()
    const valueLength = data.readUInt32BE(pos + 1 + nameLength)
    const start = pos + 5 + nameLength
    if (start + valueLength > data.length) return undefined
    metadata.set(name, data.subarray(start, start + valueLength).toString('latin1'))
    pos = start + valueLength
  }
  return metadata
}
