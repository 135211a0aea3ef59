import { connect as connectSocket, type Socket } from 'node:net'
import {
  ConnectionError,
  NatsConnectionImpl,
  ProtocolHandler,
  connect,
  hasWsProtocol,
  setTransportFactory,
  type ConnectionOptions,
  type NatsConnection,
  type Server,
} from '@nats-io/transport-node'
// nats.js's own socket glue for Node: dialing, TLS (upgrade after INFO, client certificates) and closing stay its own.
import { NodeTransport, nodeResolveHost } from '@nats-io/transport-node/lib/node_transport.js'

/**
 * nats.js's Node socket glue with a leaner hot path, through nats-core's transport factory. Stock, every chunk
 * read resumes an async generator that waits on a fresh deferred promise, and every write makes a deferred promise
 * no one awaits: per message a minion receives or sends, several promises and microtasks. A swarm of thousands of
 * NATS minions in one process spends a fifth of its transport time there. Here a chunk read goes straight to the
 * protocol's parser once the protocol's reader has caught up ({@link parseWith}; until then, to the waiting reader or
 * a queue), and a write is a plain socket write whose failure the socket's error and close events report, as
 * nats.js's ignored write errors were left to its reads and pings.
 */
export class DirectNodeTransport extends NodeTransport {
  /** The protocol's reader waiting for the next chunk; chunks that arrive while it parses wait in `yields`. */
  #reader: ((result: IteratorResult<Uint8Array>) => void) | undefined
  #ended = false
  /** The protocol's parser, fed each chunk in the socket's data event while the reader waits with nothing queued. */
  #parse: ((chunk: Uint8Array) => void) | undefined

  /**
   * Parses chunks as they arrive instead of resuming the protocol's reader: no promise and no microtask per chunk.
   * Only once the reader waits with nothing queued, so every chunk is still parsed once, in order. A chunk the parser
   * refuses (a broken protocol stream) ends the connection, which nats.js then reconnects; stock, its reader stopped
   * reading and the connection hung until its pings went unanswered.
   */
  parseWith(parse: (chunk: Uint8Array) => void): void {
    this.#parse = parse
  }

  override setupHandlers(): void {
    const socket = this.socket
    let error: Error | undefined
    socket.on('data', (chunk: Uint8Array) => {
      const reader = this.#reader
      if (reader === undefined) {
        this.yields.push(chunk)
        return
      }
      if (this.#parse !== undefined) {
        this.#parseNow(socket, chunk)
        return
      }
      this.#reader = undefined
      reader({ value: chunk, done: false })
    })
    socket.on('error', (cause: Error) => {
      error = cause
    })
    // The server half-closed: finish our writes, then close our half (nats.js does the same).
    socket.on('end', () => {
      if (!socket.destroyed) socket.write(new Uint8Array(0), () => socket.end())
    })
    socket.on('close', () => {
      void this.close(error)
      this.#end()
    })
  }

  override [Symbol.asyncIterator](): AsyncIterableIterator<Uint8Array> {
    const iterator: AsyncIterableIterator<Uint8Array> = {
      next: () => {
        // Chunks read before the socket closed are still the server's last words (an -ERR naming why): deliver them.
        if (this.yields.length > 0) return Promise.resolve({ value: this.yields.shift()!, done: false })
        if (this.#ended || this.done) return Promise.resolve({ value: undefined, done: true })
        return new Promise<IteratorResult<Uint8Array>>((resolve) => {
          this.#reader = resolve
        })
      },
      return: () => {
        this.#end()
        return Promise.resolve({ value: undefined, done: true })
      },
      [Symbol.asyncIterator]: () => iterator,
    }
    return iterator
  }

  #parseNow(socket: Socket, chunk: Uint8Array): void {
    try {
      this.#parse!(chunk)
    } catch (error) {
      this.#parse = undefined
      socket.destroy(error instanceof Error ? error : new Error(String(error)))
    }
  }

  override send(frame: Uint8Array): void {
    if (this.done || this.socket === undefined || this.socket.destroyed) return
    try {
      this.socket.write(frame)
    } catch {
      // A socket torn down under us: its close event reports it and nats.js reconnects.
    }
  }

  override discard(): void {
    super.discard()
    this.#end()
  }

  #end(): void {
    this.#ended = true
    const reader = this.#reader
    this.#reader = undefined
    reader?.({ value: undefined, done: true })
  }
}

/**
 * nats.js's protocol handler, failing a connect at once when the server closes the connection before the handshake's
 * PONG. Stock, only a refused credential ends a handshake early: a server that answers `-ERR 'maximum connections
 * exceeded'` (nats-server past its max_connections) and hangs up left the dial waiting out its whole `timeout`, then
 * failing with a bare timeout instead of the server's reason, and a client failing over waited as long per server.
 */
class HandshakeProtocolHandler extends ProtocolHandler {
  override dial(server: Server): Promise<void> {
    // The stock dial sets up its transport and its handshake's rejection before its first await.
    const earlierError = this.lastError
    const dialing = super.dial(server)
    // The parser of the moment: a reconnect's prepare() makes a new one.
    if (this.transport instanceof DirectNodeTransport) this.transport.parseWith((chunk) => this.parser.parse(chunk))
    const failHandshake = this.connectError
    void this.transport.closed().then(async (cause) => {
      // Still this dial's handshake (once it completes, or another dial starts, connectError is another or none).
      if (failHandshake === undefined || this.connectError !== failHandshake) return
      // The server's -ERR, parsed before the close was seen, is the reason a user needs.
      const said = this.lastError !== earlierError ? this.lastError : await this.#reasonLost(server, cause)
      if (this.connectError !== failHandshake) return
      failHandshake(said ?? (cause instanceof Error ? cause : new ConnectionError('the server closed the connection during the handshake')))
    })
    return dialing
  }

  /**
   * A server that says why and hangs up at once (nats-server past its max_connections: INFO, -ERR, close) answers our
   * CONNECT with a reset, and a write that meets the reset (EPIPE) closes the socket before the -ERR queued behind it
   * is read. Then the server is asked again on a connection that only listens: its -ERR, if it says one at once.
   */
  async #reasonLost(server: Server, cause: unknown): Promise<Error | undefined> {
    const code = (cause as NodeJS.ErrnoException | undefined)?.code
    if (code !== 'EPIPE' && code !== 'ECONNRESET') return undefined
    const line = await firstErrorLine(server.hostname, server.port)
    return line === undefined ? undefined : (ProtocolHandler as unknown as { toError(text: string): Error }).toError(line)
  }
}

/** How long a listening probe waits for a refusing server's -ERR, which it sends right after its INFO. */
const PROBE_MS = 500

/** The text of the -ERR a server sends within {@link PROBE_MS} on a connection that sends nothing, if any. */
function firstErrorLine(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let text = ''
    const socket = connectSocket({ host, port })
    const done = (line: string | undefined): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve(line)
    }
    const timer = setTimeout(() => done(undefined), PROBE_MS)
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1')
      const found = /^-ERR '?([^'\r\n]*)'?\r\n/m.exec(text)
      if (found !== null) done(found[1])
      else if (text.length > 64 * 1024) done(undefined)
    })
    socket.on('error', () => done(undefined))
    socket.on('close', () => done(/^-ERR '?([^'\r\n]*)'?\r\n/m.exec(text)?.[1]))
  })
}

/**
 * nats.js's `connect` on {@link DirectNodeTransport} and {@link HandshakeProtocolHandler}. The transport factory is
 * nats-core's, one per process: a stock `connect` elsewhere in the process (a test's raw subscriber) puts nats.js's own
 * back for the connections that dial after it, which then work as they always did; each connect here puts this one back.
 */
export async function connectDirect(options: ConnectionOptions): Promise<NatsConnection> {
  // WebSocket URLs are nats.js's wsconnect's: its connect refuses them with its own error.
  if (hasWsProtocol(options)) return connect(options)
  setTransportFactory({ factory: () => new DirectNodeTransport(), dnsResolveFn: nodeResolveHost })
  // As NatsConnectionImpl.connect, with the handler above (its constructor is private in the typings only).
  const connection = new (NatsConnectionImpl as unknown as new (options: ConnectionOptions) => NatsConnectionImpl)(options)
  const handler = new HandshakeProtocolHandler(connection.options, connection)
  await handler.dialLoop()
  connection.protocol = handler
  return connection
}
