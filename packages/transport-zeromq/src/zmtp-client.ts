import { DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_HWM, ReconnectingLink, type ClientOptions, type EndpointCore, type FramedConnection } from '@brine/transport'
import { DEFAULT_MAX_FRAME_BYTES } from '@brine/core'
import { greeting, readyCommand, ZmtpReader } from './zmtp.js'

export interface ZmtpClientHandlers {
  /** The handshake completed with a server of a type ours can talk to: send subscriptions, waiting requests. */
  onConnect(connection: FramedConnection): void
  /** One whole message from the server; must never throw because of what the server sent. */
  onMessage(parts: Buffer[], connection: FramedConnection): void
}

export interface ZmtpClientShape {
  /** Our socket type (SUB, DEALER) and the server types it talks to, as libzmq checks them. */
  socketType: string
  peerTypes: readonly string[]
  /** Bytes one incoming message may hold (a publish's topic besides its payload); default max_frame_bytes. */
  maxMessageBytes?: number
}

/**
 * A ZeroMQ client's one connection to its server, spoken as libzmq 4.3's Dealer and Subscriber speak it (ZMTP
 * 3.0, NULL): the shared ReconnectingLink (backoff, events, `reconnectNow()`) with ZMTP's reader. On each
 * connect it sends our greeting and READY at once; the link is up once the server's greeting and READY have
 * come, naming a socket type ours can talk to, within `handshakeTimeout`. A server that breaks the protocol
 * (a bad greeting, a command out of place, reserved flags) has its connection dropped, logged, and is tried
 * again on the backoff; a message over the limit is skipped as it streams and counted as a frame drop.
 */
export function zmtpClientLink(core: EndpointCore, options: ClientOptions, shape: ZmtpClientShape, handlers: ZmtpClientHandlers): ReconnectingLink {
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES
  const drop = (connection: FramedConnection, reason: string): void => {
    core.logger.warning(`${core.what} ${core.address}: dropped the connection to the server: ${reason}`)
    connection.drop(reason)
  }
  const link: ReconnectingLink = new ReconnectingLink(
    core,
    {
      host: options.host,
      port: options.port,
      ...(options.path === undefined ? {} : { path: options.path }),
      maxFrameBytes,
      hwm: options.hwm ?? DEFAULT_HWM,
      reconnect: options.reconnect,
      peer: core.address,
      handshakeTimeout: options.handshakeTimeout ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
      reader: (connection) =>
        new ZmtpReader(
          connection,
          {
            onReady: (metadata) => {
              const type = metadata.get('socket-type') ?? ''
              if (shape.peerTypes.includes(type)) link.established(connection)
              else drop(connection, `a ZeroMQ ${type || 'socket of no type'} cannot talk to a ${shape.socketType} (expected ${shape.peerTypes.join(' or ')})`)
            },
            onMessage: (parts) => handlers.onMessage(parts, connection),
            onOversize: (size, reason) => core.frameDropped(connection.peer, reason, size),
            onPing: (pong) => {
              connection.write(pong)
            },
            onProtocolError: (reason) => drop(connection, `ZMTP: ${reason}`),
          },
          maxFrameBytes,
          shape.maxMessageBytes ?? maxFrameBytes,
        ),
    },
    {
      onOpen: (connection) => connection.write([greeting(), readyCommand(shape.socketType)]),
      onConnect: (connection) => handlers.onConnect(connection),
    },
  )
  return link
}
