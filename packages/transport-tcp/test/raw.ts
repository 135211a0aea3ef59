import { connect } from 'node:net'
import { frame } from '@brine/transport'

/**
 * Test helper (the compliance suite's `injectRaw` for TCP): opens a plain socket to `target`,
 * writes each body as one length-prefixed frame, ends the socket and resolves once it has closed.
 * It rejects only when the connection could not be made.
 */
export function sendRawFrames(target: { host: string; port: number }, frames: Uint8Array[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.host, port: target.port })
    let connected = false
    let failure: Error | undefined
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
