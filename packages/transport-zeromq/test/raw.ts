import { Dealer } from 'zeromq'
import { formatEndpoint, isIPv6, retryInterrupted } from '../src/socket-util.js'

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
    retryInterrupted(() => socket.connect(formatEndpoint(target.host, target.port)))
    for (const frame of frames) await socket.send(frame)
  } finally {
    socket.close()
  }
}
