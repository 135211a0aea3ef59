import { connect } from 'node:net'
import { encode, frame } from '@brine/core'
import { connectRawSocket, type RawConnection, type RawTarget } from '@brine/transport-compliance'

/**
 * Test helper (the compliance suite's `injectRaw` for TCP): opens a plain socket to `target`,
 * writes each body as one length-prefixed frame, ends the socket and resolves once it has closed
 * (reading and discarding what the server answers: a refused request is answered, and an unread
 * reply would keep the socket from ever seeing its end).
 * It rejects only when the connection could not be made.
 */
export function sendRawFrames(target: { host: string; port: number }, frames: Uint8Array[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.host, port: target.port })
    let connected = false
    let failure: Error | undefined
    socket.resume()
    socket.once('connect', () => {
      connected = true
      for (const body of frames) socket.write(frame(body))
      socket.end()
    })
    // A reset after the frames went out is the server's business; only a failed connect is ours.
    socket.on('error', (error) => {
      failure ??= error
    })
    socket.once('close', () => {
      if (!connected && failure !== undefined) reject(failure)
      else resolve()
    })
  })
}

/** A hand-driven TCP connection (the compliance suite's `connectRaw`): length-prefixed frames; a subscription is a hello naming it. */
export function connectRaw(target: RawTarget, options?: { role?: 'request' | 'publish'; handshake?: boolean }): RawConnection {
  return connectRawSocket(
    target,
    {
      frame: (body) => frame(body),
      header: (size) => {
        const header = Buffer.alloc(4)
        header.writeUInt32BE(size, 0)
        return header
      },
      subscription: (topic) => frame(encode({ hello: 1, id: topic })),
    },
    options,
  )
}
