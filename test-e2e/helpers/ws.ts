import { WebSocket } from 'ws'

/** What a `/ws` client sends before events flow (salt-api's handshake). */
const READY = 'websocket client ready'

/** A real websocket client of brine-api's `/ws`: the text messages it received, a bounded wait for one, its close. */
export class WsReader {
  readonly messages: string[] = []
  readonly closed: Promise<{ code: number; reason: string }>
  #waiters: Array<() => void> = []

  constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      this.messages.push(data.toString())
      for (const wake of this.#waiters.splice(0)) wake()
    })
    this.closed = new Promise((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })))
  }

  /** Tells the server to start sending events. */
  ready(): void {
    this.socket.send(READY)
  }

  /** The first message (already received or still to come) that `match` accepts; rejects naming `what` after `ms`. */
  async next(match: (text: string) => boolean, ms: number, what: string): Promise<string> {
    const end = Date.now() + ms
    let seen = 0
    for (;;) {
      for (; seen < this.messages.length; seen++) if (match(this.messages[seen]!)) return this.messages[seen]!
      const left = end - Date.now()
      if (left <= 0) throw new Error(`timed out after ${ms} ms waiting for ${what} (${this.messages.length} messages received)`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.#waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  /** Stops reading from the socket (the server sees a stalled reader). */
  pause(): void {
    this.socket.pause()
  }

  resume(): void {
    this.socket.resume()
  }

  close(): void {
    this.socket.terminate()
  }
}

/** Opens `url` (trusting `ca`): a reader once upgraded, or the HTTP status the server refused the upgrade with. Bounded by `ms`. */
export function wsOpen(url: string, ca: Buffer, headers: Record<string, string> = {}, ms = 30_000): Promise<WsReader | { status: number }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { ca, headers, handshakeTimeout: ms })
    socket.once('open', () => resolve(new WsReader(socket)))
    socket.once('unexpected-response', (_request, response) => {
      resolve({ status: response.statusCode ?? 0 })
      response.resume()
      socket.terminate()
    })
    socket.once('error', reject)
  })
}
