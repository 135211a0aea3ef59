import { connect } from 'node:net'
import type { RawConnection, RawTarget } from '../setup.js'

/** How one transport frames what a raw connection writes. */
export interface RawFraming {
  /** Written right after connecting when a handshake is asked for (ZeroMQ: greeting and READY for the role). */
  hello?(role: 'request' | 'publish'): Buffer
  /** With a hello: true once what the server sent completes its side of the handshake. */
  handshakeDone?(received: Buffer): boolean
  /** One whole frame. */
  frame(body: Uint8Array): Buffer
  /** The header of a frame of `size` bytes. */
  header(size: number): Buffer
  /** A subscription (or hello) for `topic`. */
  subscription(topic: string): Buffer
}

/**
 * A raw connection over node:net in a transport's framing, for the compliance suite's hardening
 * cases: a peer that says nothing, trickles a frame, parks part of one, or floods subscriptions.
 */
export function connectRawSocket(target: RawTarget, framing: RawFraming, options: { role?: 'request' | 'publish'; handshake?: boolean } = {}): RawConnection {
  const role = options.role ?? 'request'
  const handshake = options.handshake ?? true
  const socket = connect({ host: target.host, port: target.port, ...(target.localAddress === undefined ? {} : { localAddress: target.localAddress }) })
  let isClosed = false
  socket.on('error', () => {})
  // Whatever the server sends is read and discarded, so its closing the connection is seen at once.
  socket.on('data', () => {})
  // Kept from the connect: a destroyed socket forgets its local address, and a test asks for it after the server dropped it.
  let localPeer = 'unknown:0'
  socket.once('connect', () => {
    localPeer = `${socket.localAddress ?? 'unknown'}:${socket.localPort ?? 0}`
  })
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  void closed.then(() => {
    isClosed = true
  })
  const ready = new Promise<void>((resolve, reject) => {
    socket.once('close', () => reject(new Error(`raw connection to ${target.host}:${target.port} closed before it was ready`)))
    socket.once('connect', () => {
      const hello = handshake ? framing.hello?.(role) : undefined
      if (hello === undefined) {
        resolve()
        return
      }
      socket.write(hello)
      let received = Buffer.alloc(0)
      const onData = (chunk: Buffer): void => {
        received = Buffer.concat([received, chunk])
        if (framing.handshakeDone?.(received) ?? true) {
          socket.off('data', onData)
          resolve()
        }
      }
      socket.on('data', onData)
    })
  })
  ready.catch(() => {})
  // What one tick writes goes out as one writev: a flood of a thousand small subscriptions is then a few syscalls on
  // each side rather than a thousand, and the server reads the frames as a stream delivers them anyway.
  let corked = false
  const write = (bytes: Uint8Array): void => {
    if (isClosed || socket.destroyed) return
    if (!corked) {
      corked = true
      socket.cork()
      process.nextTick(() => {
        corked = false
        socket.uncork()
      })
    }
    socket.write(bytes)
  }
  return {
    ready,
    closed,
    get isClosed() {
      return isClosed
    },
    localPeer: () => localPeer,
    sendFrame: (body) => write(framing.frame(body)),
    startFrame: (size, bytes) => write(Buffer.concat([framing.header(size), Buffer.alloc(bytes, 0x61)])),
    sendBytes: (bytes) => write(bytes),
    subscribe: (topic) => write(framing.subscription(topic)),
    drained: () =>
      new Promise<void>((resolve) => {
        if (isClosed || socket.destroyed) return resolve()
        // An empty write's callback runs once everything written before it has been flushed.
        socket.write(Buffer.alloc(0), () => resolve())
        void closed.then(() => resolve())
      }),
    close: () => socket.destroy(),
  }
}
