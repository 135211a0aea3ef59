import { connect, nuid, type NatsConnection } from '@nats-io/transport-node'
import { encode } from '@brine/core'
import type { RawConnection, RawTarget } from '@brine/transport-compliance'
import { CHUNK_HEADER_BYTES, CHUNK_MARK, Subjects } from '../src/index.js'

/** Test helper: where the compliance suite's raw peers reach the broker, and under which prefix. */
export interface RawBroker {
  url: () => string
  prefix: string
}

function chunk(messageId: number, total: number, offset: number, bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(CHUNK_HEADER_BYTES + bytes.length)
  out[0] = CHUNK_MARK
  out.writeUInt32BE(messageId, 1)
  out.writeUInt32BE(total, 5)
  out.writeUInt32BE(offset, 9)
  out.set(bytes, CHUNK_HEADER_BYTES)
  return out
}

/**
 * A hand-driven peer on the broker (the suite's `connectRaw` for NATS): its frames are messages to the
 * request subject with its own inbox as reply subject (chunked past max_payload, as the client does),
 * startFrame/sendBytes stream one chunked message by hand, and a subscription is a hello naming the id.
 */
class RawNatsPeer implements RawConnection {
  readonly ready: Promise<void>
  readonly closed: Promise<void>
  isClosed = false
  readonly #subjects: Subjects
  readonly #inbox: string
  readonly #client = nuid.next()
  #connection: NatsConnection | undefined
  #messageId = 1
  #declared = 0
  #sent = 0
  #hello = false
  #resolveClosed!: () => void

  constructor(broker: RawBroker, target: RawTarget, handshake: boolean) {
    this.#subjects = new Subjects(broker.prefix, target.port)
    this.#inbox = `${this.#subjects.replyPrefix}raw${nuid.next()}`
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve))
    this.ready = connect({ servers: broker.url(), reconnect: false }).then((connection) => {
      this.#connection = connection
      void connection.closed().then(() => this.#markClosed())
      // Without a handshake: a message declared and never sent, the nearest a broker peer comes to a silent connection.
      if (!handshake) this.startFrame(1024, 0)
    })
  }

  #markClosed(): void {
    this.isClosed = true
    this.#resolveClosed()
  }

  #publish(data: Uint8Array): void {
    this.#connection?.publish(this.#subjects.request, data, { reply: this.#inbox })
  }

  #maxPart(): number {
    return (this.#connection?.info?.max_payload ?? 1024 * 1024) - CHUNK_HEADER_BYTES
  }

  localPeer(): string {
    return this.#inbox
  }

  sendFrame(body: Uint8Array): void {
    if (body.length + CHUNK_HEADER_BYTES <= this.#maxPart()) {
      this.#publish(body)
      return
    }
    this.startFrame(body.length, 0)
    this.sendBytes(body)
  }

  startFrame(size: number, bytes: number): void {
    this.#messageId++
    this.#declared = size
    this.#sent = 0
    this.#publish(chunk(this.#messageId, size, 0, new Uint8Array(0)))
    if (bytes > 0) this.sendBytes(Buffer.alloc(bytes, 0x61))
  }

  sendBytes(bytes: Uint8Array): void {
    const step = this.#maxPart()
    for (let at = 0; at < bytes.length; at += step) {
      const part = bytes.subarray(at, Math.min(bytes.length, at + step))
      this.#publish(chunk(this.#messageId, this.#declared, this.#sent, part))
      this.#sent += part.length
    }
  }

  subscribe(topic: string): void {
    this.#hello = true
    this.#connection?.publish(this.#subjects.hello, encode({ hello: 1, id: topic, client: this.#client }))
  }

  async drained(): Promise<void> {
    await this.#connection?.flush().catch(() => {})
  }

  close(): void {
    const connection = this.#connection
    if (connection === undefined || connection.isClosed()) return
    // A subscriber says goodbye as the real client does; one that vanishes is forgotten oldest first, past a bound.
    if (this.#hello) connection.publish(this.#subjects.hello, encode({ hello: 0, id: null, client: this.#client }))
    void connection.flush().finally(() => connection.close())
  }
}

export function connectRawNats(broker: RawBroker, target: RawTarget, options: { role?: 'request' | 'publish'; handshake?: boolean } = {}): RawConnection {
  return new RawNatsPeer(broker, target, options.handshake ?? true)
}

/** The suite's `injectRaw` for NATS: each body published raw to the request subject (chunked past max_payload). */
export async function sendRawNats(broker: RawBroker, target: { host: string; port: number }, frames: Uint8Array[]): Promise<void> {
  const peer = new RawNatsPeer(broker, { ...target }, true)
  await peer.ready
  for (const body of frames) peer.sendFrame(body)
  await peer.drained()
  peer.close()
  await peer.closed
}
