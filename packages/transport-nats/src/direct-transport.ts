import { NatsConnectionImpl, connect, hasWsProtocol, setTransportFactory, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node'
// nats.js's own socket glue for Node: dialing, TLS (upgrade after INFO, client certificates) and closing stay its own.
import { NodeTransport, nodeResolveHost } from '@nats-io/transport-node/lib/node_transport.js'

/**
 * nats.js's Node socket glue with a leaner hot path, through nats-core's transport factory. Stock, every chunk
 * read resumes an async generator that waits on a fresh deferred promise, and every write makes a deferred promise
 * no one awaits: per message a minion receives or sends, several promises and microtasks. A swarm of thousands of
 * NATS minions in one process spends a fifth of its transport time there. Here a chunk read goes straight to the
 * protocol's waiting reader (or a queue while it parses), and a write is a plain socket write whose failure the
 * socket's error and close events report, as nats.js's ignored write errors were left to its reads and pings.
 */
export class DirectNodeTransport extends NodeTransport {
  /** The protocol's reader waiting for the next chunk; chunks that arrive while it parses wait in `yields`. */
  #reader: ((result: IteratorResult<Uint8Array>) => void) | undefined
  #ended = false

  override setupHandlers(): void {
    const socket = this.socket
    let error: Error | undefined
    socket.on('data', (chunk: Uint8Array) => {
      const reader = this.#reader
      if (reader === undefined) {
        this.yields.push(chunk)
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
 * nats.js's `connect` on {@link DirectNodeTransport}. The transport factory is nats-core's, one per process: a
 * stock `connect` elsewhere in the process (a test's raw subscriber) puts nats.js's own back for the connections
 * that dial after it, which then work as they always did; each connect here puts this one back.
 */
export function connectDirect(options: ConnectionOptions): Promise<NatsConnection> {
  // WebSocket URLs are nats.js's wsconnect's: its connect refuses them with its own error.
  if (hasWsProtocol(options)) return connect(options)
  setTransportFactory({ factory: () => new DirectNodeTransport(), dnsResolveFn: nodeResolveHost })
  return NatsConnectionImpl.connect(options)
}
