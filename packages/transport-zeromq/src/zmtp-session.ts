import type { FramedConnection } from '@brine/transport'
import { greeting, readyCommand, ZmtpReader, type ZmtpHandlers } from './zmtp.js'

export interface SessionHandlers {
  /** The handshake completed with a peer of an accepted socket type. */
  onReady?(session: ZmtpSession): void
  onMessage(parts: Buffer[], session: ZmtpSession): void
  /** A message dropped unread for its size. */
  onOversize(size: number, reason: string, session: ZmtpSession): void
}

let nextRoutingId = 1

/**
 * One peer of a ZeroMQ server: its connection, its ZMTP reader, and a routing id like libzmq's
 * Router gives (a zero byte, then a 32-bit counter), shown as hex in events and the handler's
 * context. Writes our greeting and READY as the connection opens; a peer whose socket type cannot
 * talk to ours, or that breaks the protocol, is dropped.
 */
export class ZmtpSession {
  readonly reader: ZmtpReader
  readonly routingId: string
  ready = false

  constructor(
    readonly connection: FramedConnection,
    private readonly socketType: string,
    private readonly peerTypes: readonly string[],
    private readonly handlers: SessionHandlers,
    maxFrameBytes: number,
  ) {
    const id = Buffer.alloc(5)
    id.writeUInt32BE(nextRoutingId, 1)
    nextRoutingId = nextRoutingId >= 0xffffffff ? 1 : nextRoutingId + 1
    this.routingId = id.toString('hex')
    const zmtp: ZmtpHandlers = {
      onReady: (metadata) => {
        const type = metadata.get('socket-type') ?? ''
        if (!this.peerTypes.includes(type)) {
          connection.drop(`a ZeroMQ ${type || 'socket of no type'} cannot talk to a ${this.socketType} (expected ${this.peerTypes.join(' or ')})`)
          return
        }
        this.ready = true
        this.handlers.onReady?.(this)
      },
      onMessage: (parts) => this.handlers.onMessage(parts, this),
      onOversize: (size, reason) => this.handlers.onOversize(size, reason, this),
      onPing: (pong) => {
        connection.write(pong)
      },
      onProtocolError: (reason) => connection.drop(`ZMTP: ${reason}`),
    }
    this.reader = new ZmtpReader(connection, zmtp, maxFrameBytes)
  }

  /** Our half of the handshake, sent as soon as the connection is admitted (libzmq then answers at once). */
  greet(): void {
    this.connection.write([greeting(), readyCommand(this.socketType)])
  }
}
