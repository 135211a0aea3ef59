import { Dealer } from 'zeromq'
import { connectRawSocket, type RawConnection, type RawTarget } from '@brine/transport-compliance'
import { formatEndpoint, isIPv6 } from '../src/socket-util.js'
import { frameHeader, greeting, GREETING_BYTES, readyCommand } from '../src/zmtp.js'

/** How long libzmq keeps delivering after close(), and how long one send may wait for the link. */
const RAW_LINGER_MS = 2000

/**
 * Test helper (the compliance suite's `injectRaw` for ZeroMQ): a raw Dealer connects to
 * `tcp://host:port` and sends each byte array as one message, so a Router sees
 * `[routing id, bytes]` exactly as given. The socket closes with a linger long enough for
 * libzmq to finish delivering in the background.
 */
export async function sendRawFrames(target: { host: string; port: number }, frames: readonly Uint8Array[]): Promise<void> {
  const socket = new Dealer({ linger: RAW_LINGER_MS, sendTimeout: RAW_LINGER_MS, ipv6: isIPv6(target.host) })
  try {
    socket.connect(formatEndpoint(target.host, target.port))
    for (const frame of frames) await socket.send(frame)
  } finally {
    socket.close()
  }
}

/**
 * A hand-driven ZMTP 3.0 connection (the compliance suite's `connectRaw`): with a handshake it sends
 * the greeting and READY as a DEALER (request) or SUB (publish) and is ready once the server's
 * greeting and READY have arrived; frames are one-part messages; a subscription is `\x01topic`.
 */
export function connectRaw(target: RawTarget, options?: { role?: 'request' | 'publish'; handshake?: boolean }): RawConnection {
  return connectRawSocket(
    target,
    {
      hello: (role) => Buffer.concat([greeting(), readyCommand(role === 'publish' ? 'SUB' : 'DEALER')]),
      // The server's greeting (64 bytes), then its READY command: a short frame, flags, size, body.
      handshakeDone: (received) => received.length >= GREETING_BYTES + 2 && received.length >= GREETING_BYTES + 2 + received[GREETING_BYTES + 1]!,
      frame: (body) => Buffer.concat([frameHeader(body.length, false), body]),
      header: (size) => frameHeader(size, false),
      subscription: (topic) => {
        const body = Buffer.concat([Buffer.from([1]), Buffer.from(topic, 'latin1')])
        return Buffer.concat([frameHeader(body.length, false), body])
      },
    },
    options,
  )
}
