import { connect, type Socket } from 'node:net'
import { deadline } from '@brine/testkit'

/**
 * A bare NATS protocol subscriber on a plain socket (no client library): CONNECT, one SUB, and the subject of
 * every MSG it is handed. What a stranger on the broker could see, so a test can say which subjects a
 * publish travelled on.
 */
export class RawNatsSubscriber {
  readonly subjects: string[] = []
  #buffer = Buffer.alloc(0)

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.#receive(chunk))
    socket.on('error', () => {})
  }

  /** Connects to `port` on loopback and subscribes to `subject` (wildcards allowed); resolves once the server confirmed it (PONG). */
  static async subscribe(port: number, subject: string, ms = 30_000): Promise<RawNatsSubscriber> {
    const socket = connect({ host: '127.0.0.1', port })
    const subscriber = new RawNatsSubscriber(socket)
    await deadline(
      new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve)
        socket.once('error', reject)
      }),
      ms,
      `a raw connection to nats-server on port ${port}`,
    )
    const pong = subscriber.#nextPong()
    socket.write(`CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\nSUB ${subject} 1\r\nPING\r\n`)
    await deadline(pong, ms, `nats-server on port ${port} to confirm SUB ${subject}`)
    return subscriber
  }

  #pongs: Array<() => void> = []

  #nextPong(): Promise<void> {
    return new Promise((resolve) => this.#pongs.push(resolve))
  }

  #receive(chunk: Buffer): void {
    this.#buffer = Buffer.concat([this.#buffer, chunk])
    for (;;) {
      const end = this.#buffer.indexOf('\r\n')
      if (end < 0) return
      const line = this.#buffer.subarray(0, end).toString('latin1')
      if (line.startsWith('MSG ')) {
        // MSG <subject> <sid> [reply-to] <#bytes>: the payload and its CRLF follow the line.
        const fields = line.split(' ')
        const size = Number(fields.at(-1))
        if (this.#buffer.length < end + 2 + size + 2) return
        this.subjects.push(fields[1]!)
        this.#buffer = this.#buffer.subarray(end + 2 + size + 2)
        continue
      }
      this.#buffer = this.#buffer.subarray(end + 2)
      if (line === 'PING') this.socket.write('PONG\r\n')
      else if (line === 'PONG') this.#pongs.shift()?.()
    }
  }

  close(): void {
    this.socket.destroy()
  }
}
