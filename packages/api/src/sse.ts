import type { ServerResponse } from 'node:http'
import type { BusEvent } from '@brine/common'
import { silentLogger, type Logger } from '@brine/transport'
import type { MasterEvent } from '@brine/client'
import { ApiError } from './errors.js'

/** Longest delay setTimeout takes. */
const MAX_TIMER_MS = 2 ** 31 - 1

export interface EventStreamsOptions {
  /** The bus connection every stream shares (one subscription for all of them). */
  events: MasterEvent
  /** Bytes one stream may hold for a reader that is not keeping up; past it events are dropped for that stream. */
  bufferBytes: number
  /** Streams open at once; one more is refused with 503. */
  maxStreams: number
  /** How often each distinct token of the open streams is checked again (revocation), ms. */
  recheckMs: number
  /** Whether a token is still live (the master's get_token). */
  tokenLive: (token: string) => Promise<boolean>
  logger?: Logger
}

/** What `/stats` shows of the streams. */
export interface EventStreamStats {
  streams: number
  events: number
  delivered: number
  dropped: number
  /** Bytes held right now for readers that are behind (at most `streams` × `bufferBytes`). */
  queuedBytes: number
}

/** Salt's SSE record for one event: `tag:` then `data: {"tag", "data"}` as JSON, then a blank line. */
export function sseRecord(event: BusEvent): Buffer {
  const tag = event.tag.replace(/[\r\n]/g, ' ')
  let json: string
  try {
    json = JSON.stringify({ tag: event.tag, data: event.data })
  } catch (error) {
    json = JSON.stringify({ tag: event.tag, data: { error: `event data could not be serialised: ${(error as Error).message}` } })
  }
  return Buffer.from(`tag: ${tag}\ndata: ${json}\n\n`)
}

/** One `/events` reader: its socket, the bytes waiting for it, and what it lost. */
class Stream {
  readonly #raw: ServerResponse
  readonly #hub: EventStreams
  readonly #queue: Buffer[] = []
  #queued = 0
  #draining = false
  /** Events dropped since the last notice sent to this reader. */
  #unreported = 0
  dropped = 0
  delivered = 0
  #timer: NodeJS.Timeout | undefined
  #ended = false

  constructor(
    raw: ServerResponse,
    hub: EventStreams,
    readonly token: string,
    expireAt: number,
  ) {
    this.#raw = raw
    this.#hub = hub
    raw.on('drain', () => this.#flush())
    raw.on('close', () => this.end())
    this.#timer = setTimeout(() => this.end('token expired'), Math.min(Math.max(0, expireAt - Date.now()), MAX_TIMER_MS))
    this.#timer.unref()
  }

  get queuedBytes(): number {
    return this.#queued
  }

  /** Writes `record` now, or queues it while the socket drains, or drops it past the stream's bound. */
  send(record: Buffer, limit: number): void {
    if (this.#ended) return
    if (this.#draining) {
      if (this.#queued + record.length > limit) {
        this.dropped++
        this.#unreported++
        this.#hub.noteDrop()
        return
      }
      this.#queue.push(record)
      this.#queued += record.length
      return
    }
    this.delivered++
    if (!this.#raw.write(record)) this.#draining = true
  }

  #flush(): void {
    this.#draining = false
    while (this.#queue.length > 0 && !this.#draining) {
      const record = this.#queue.shift() as Buffer
      this.#queued -= record.length
      this.delivered++
      if (!this.#raw.write(record)) this.#draining = true
    }
    if (!this.#draining && this.#unreported > 0) {
      // An SSE comment: readers ignore it, people and tests see what was lost.
      const notice = `: dropped ${this.#unreported} events (this reader fell ${this.#hub.bufferBytes} bytes behind; rest_cherrypy.events_buffer_bytes)\n\n`
      this.#unreported = 0
      if (!this.#raw.write(notice)) this.#draining = true
    }
  }

  /** Ends the stream (with `reason` as a final comment); idempotent. */
  end(reason?: string): void {
    if (this.#ended) return
    this.#ended = true
    clearTimeout(this.#timer)
    this.#queue.length = 0
    this.#queued = 0
    this.#hub.forget(this)
    if (!this.#raw.writableEnded) this.#raw.end(reason === undefined ? undefined : `: ${reason}\n\n`)
  }
}

/**
 * The `/events` streams: one reader of the master's bus feeds them all. Each stream is bounded
 * (`bufferBytes`): a reader that does not keep up loses events — counted, and told in an SSE comment when
 * it catches up — and never grows the API's memory. A stream ends when its token expires, is revoked
 * (checked every `recheckMs`, or at once by {@link endToken} on logout), or the client goes.
 */
export class EventStreams {
  readonly #o: EventStreamsOptions
  readonly #logger: Logger
  readonly #streams = new Set<Stream>()
  readonly #abort = new AbortController()
  #recheck: NodeJS.Timeout | undefined
  #events = 0
  #delivered = 0
  #dropped = 0
  #reading: Promise<void> | undefined

  constructor(options: EventStreamsOptions) {
    this.#o = options
    this.#logger = options.logger ?? silentLogger
  }

  get bufferBytes(): number {
    return this.#o.bufferBytes
  }

  /** Starts the one bus reader. */
  start(): void {
    if (this.#reading !== undefined) return
    this.#reading = (async () => {
      // The bus reconnects by itself once connected; before its first connection (the API started before
      // the master) iterating fails, so try again every second until this hub closes.
      while (!this.#abort.signal.aborted) {
        // One reader per attempt, always ended (a failed first read leaves no reader registered behind).
        const attempt = new AbortController()
        const stop = (): void => attempt.abort()
        this.#abort.signal.addEventListener('abort', stop, { once: true })
        try {
          for await (const event of this.#o.events.iter({ signal: attempt.signal, hwm: 10_000 })) this.#fanout(event)
        } catch (error) {
          this.#logger.debug(`event streams: the master's bus is not reachable yet: ${(error as Error).message}`)
        } finally {
          attempt.abort()
          this.#abort.signal.removeEventListener('abort', stop)
        }
        if (!this.#abort.signal.aborted) await new Promise((resolve) => setTimeout(resolve, 1000).unref())
      }
    })()
    this.#recheck = setInterval(() => void this.#recheckTokens(), this.#o.recheckMs)
    this.#recheck.unref()
  }

  #fanout(event: BusEvent): void {
    this.#events++
    if (this.#streams.size === 0) return
    const record = sseRecord(event)
    for (const stream of this.#streams) stream.send(record, this.#o.bufferBytes)
  }

  /** Opens a stream on `raw` for a live token (`expire`: epoch seconds); 503 past `maxStreams`. */
  open(raw: ServerResponse, token: string, expire: number, headers: Record<string, string>): void {
    if (this.#streams.size >= this.#o.maxStreams) throw new ApiError(503, `too many event streams open (${this.#streams.size}; rest_cherrypy.events_max_streams is ${this.#o.maxStreams})`)
    raw.writeHead(200, { 'Content-Type': 'text/event-stream;charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive', ...headers })
    raw.write('retry: 400\n')
    this.#streams.add(new Stream(raw, this, token, expire * 1000))
  }

  /** Ends every stream of `token` (logout). */
  endToken(token: string, reason = 'token revoked'): void {
    for (const stream of [...this.#streams]) if (stream.token === token) stream.end(reason)
  }

  async #recheckTokens(): Promise<void> {
    const tokens = new Set([...this.#streams].map((stream) => stream.token))
    for (const token of tokens) {
      let live = true
      try {
        live = await this.#o.tokenLive(token)
      } catch (error) {
        // The master is away: keep the streams; the next round asks again.
        this.#logger.debug(`event streams: token check failed: ${(error as Error).message}`)
      }
      if (!live) this.endToken(token, 'token expired or revoked')
    }
  }

  /** Called by a stream that dropped an event. */
  noteDrop(): void {
    this.#dropped++
  }

  /** Called by a stream that ended. */
  forget(stream: Stream): void {
    if (!this.#streams.delete(stream)) return
    this.#delivered += stream.delivered
  }

  stats(): EventStreamStats {
    let delivered = this.#delivered
    let queuedBytes = 0
    for (const stream of this.#streams) {
      delivered += stream.delivered
      queuedBytes += stream.queuedBytes
    }
    return { streams: this.#streams.size, events: this.#events, delivered, dropped: this.#dropped, queuedBytes }
  }

  async close(): Promise<void> {
    clearInterval(this.#recheck)
    for (const stream of [...this.#streams]) stream.end('the API is stopping')
    this.#abort.abort()
    await this.#reading
  }
}
