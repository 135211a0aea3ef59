import type { ServerResponse } from 'node:http'
import { BUS_DROPPED_TAG, type BusEvent } from '@brine/protocol'
import { silentLogger, type Logger } from '@brine/core'
import type { MasterEvent } from '@brine/client'
import { ApiError } from './errors.js'
import { msFromSeconds } from '@brine/config'

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
  /** Readers dropped for falling past their bound (websocket readers; an SSE reader loses events instead). */
  overflowed: number
  /** Bytes held right now for readers that are behind (at most `streams` × `bufferBytes`). */
  queuedBytes: number
  /** Gaps before the streams: times the API's bus reader was told it lost events (the master dropped them for it, or its connection was lost). */
  upstreamGaps: number
  /** Events those gaps lost, where they were counted (a lost connection's are not). */
  upstreamLost: number
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

/**
 * Where one reader's records go: an SSE response or a websocket. The sink encodes (SSE records, salt-api's
 * websocket frames, or `format_events` summaries) and says what a reader that fell behind is told.
 */
export interface EventSink {
  /** The records for `event`, none to skip it; `cache` holds encodings shared by every sink of a kind for this event. */
  encode(event: BusEvent, cache: Map<string, Buffer>): Buffer[]
  /** Writes one record; false when the peer is behind (then {@link EventSink.onDrain} says when to go on). */
  write(record: Buffer): boolean
  onDrain(listener: () => void): void
  onClose(listener: () => void): void
  /**
   * Past its bound a reader loses events (`drop-events`: SSE, told by a comment when it catches up) or is itself
   * dropped (`drop-reader`: a websocket has no comment line, and a `format_events` reader's view of its jobs
   * would go wrong silently).
   */
  readonly overflow: 'drop-events' | 'drop-reader'
  /** What a `drop-events` reader that lost `count` events is told when it catches up. */
  dropNotice(count: number, bufferBytes: number): Buffer | undefined
  /** Ends the reader: `reason` says why; `abrupt` when it is being dropped and nothing more can reach it. */
  end(reason: string | undefined, abrupt: boolean): void
  /**
   * Events were lost before the streams (a `brine/bus/dropped` event): the reason to end this reader, or undefined
   * to send it the notice as an event (a `format_events` view that missed events would be wrong, so it is ended).
   */
  lostUpstream?(): string | undefined
}

/** Whether `event` is the notice of events lost before the streams (the bus's `brine/bus/dropped`). */
const isLossNotice = (event: BusEvent): boolean => event.tag === BUS_DROPPED_TAG

/** Two notices of events lost before the streams as one: their counts summed, or null when either was not counted. */
function mergeLoss(held: BusEvent | undefined, next: BusEvent): BusEvent {
  if (held === undefined) return next
  const [a, b] = [held.data['count'], next.data['count']]
  const count = typeof a === 'number' && typeof b === 'number' ? a + b : null
  return { tag: next.tag, data: { ...next.data, count, reason: count === null ? 'reconnect' : next.data['reason'] } }
}

/** The SSE sink of one `/events` response. */
export function sseSink(raw: ServerResponse): EventSink {
  return {
    encode: (event, cache) => {
      let record = cache.get('sse')
      if (record === undefined) cache.set('sse', (record = sseRecord(event)))
      return [record]
    },
    write: (record) => raw.write(record),
    onDrain: (listener) => raw.on('drain', listener),
    onClose: (listener) => raw.on('close', listener),
    overflow: 'drop-events',
    // An SSE comment: readers ignore it, people and tests see what was lost.
    dropNotice: (count, bufferBytes) =>
      Buffer.from(`: dropped ${count} events (this reader fell ${bufferBytes} bytes behind; rest_cherrypy.events_buffer_bytes)\n\n`),
    end: (reason) => {
      if (!raw.writableEnded) raw.end(reason === undefined ? undefined : `: ${reason}\n\n`)
    },
  }
}

/** One event reader (`/events` or `/ws`): its sink, the bytes waiting for it, and what it lost. */
class Stream {
  readonly #sink: EventSink
  readonly #hub: EventStreams
  readonly #queue: Buffer[] = []
  #queued = 0
  #draining = false
  /** Events dropped since the last notice sent to this reader. */
  #unreported = 0
  /** A notice of events lost before the streams that came while this reader was losing events: sent after its own notice. */
  #heldLoss: BusEvent | undefined
  dropped = 0
  delivered = 0
  #timer: NodeJS.Timeout | undefined
  #ended = false

  constructor(
    sink: EventSink,
    hub: EventStreams,
    readonly token: string,
    expireAt: number,
  ) {
    this.#sink = sink
    this.#hub = hub
    sink.onDrain(() => this.#flush())
    sink.onClose(() => this.end())
    this.#timer = setTimeout(() => this.end('token expired'), Math.min(Math.max(0, expireAt - Date.now()), MAX_TIMER_MS))
    this.#timer.unref()
  }

  get queuedBytes(): number {
    return this.#queued
  }

  /**
   * Writes `event`'s records now, or queues them while the sink drains, or drops them past the stream's bound. A
   * reader that lost an event loses every later one until it has caught up and been told how many: its loss is one
   * stretch, the notice stands where it was, and an event it will not get is not even encoded for it (a stalled
   * reader costs the API nothing per event but the count).
   */
  send(event: BusEvent, cache: Map<string, Buffer>, limit: number): void {
    if (this.#ended) return
    const notice = isLossNotice(event)
    if (notice) {
      const reason = this.#sink.lostUpstream?.()
      if (reason !== undefined) return this.end(reason)
    }
    if (this.#unreported > 0 || this.#heldLoss !== undefined) {
      if (!notice) return this.#drop()
      this.#heldLoss = mergeLoss(this.#heldLoss, event)
      return
    }
    for (const record of this.#sink.encode(event, cache)) {
      if (this.#ended) return
      if (this.#draining) {
        if (this.#queued + record.length > limit) {
          // A notice of events lost before the streams is not lost with them: it waits, and follows the reader's own notice.
          if (notice && this.#sink.overflow === 'drop-events') {
            this.#heldLoss = mergeLoss(this.#heldLoss, event)
            return
          }
          this.#drop()
          if (this.#sink.overflow === 'drop-reader') {
            this.#hub.noteOverflow()
            this.end(`this reader fell more than ${limit} bytes behind (rest_cherrypy.events_buffer_bytes); dropped`, true)
          }
          return
        }
        this.#queue.push(record)
        this.#queued += record.length
        continue
      }
      this.delivered++
      if (!this.#sink.write(record)) this.#draining = true
    }
  }

  #drop(): void {
    this.dropped++
    this.#unreported++
    this.#hub.noteDrop()
  }

  #flush(): void {
    if (this.#ended) return
    this.#draining = false
    while (this.#queue.length > 0 && !this.#draining) {
      const record = this.#queue.shift() as Buffer
      this.#queued -= record.length
      this.delivered++
      if (!this.#sink.write(record)) this.#draining = true
    }
    if (!this.#draining && this.#unreported > 0) {
      const notice = this.#sink.dropNotice(this.#unreported, this.#hub.bufferBytes)
      this.#unreported = 0
      if (notice !== undefined && !this.#sink.write(notice)) this.#draining = true
    }
    if (!this.#draining && this.#heldLoss !== undefined) {
      const held = this.#heldLoss
      this.#heldLoss = undefined
      for (const record of this.#sink.encode(held, new Map())) if (!this.#sink.write(record)) this.#draining = true
    }
  }

  /** Ends the stream (telling the reader `reason`); idempotent. */
  end(reason?: string, abrupt = false): void {
    if (this.#ended) return
    this.#ended = true
    clearTimeout(this.#timer)
    this.#queue.length = 0
    this.#queued = 0
    this.#hub.forget(this)
    this.#sink.end(reason, abrupt)
  }
}

/**
 * The `/events` streams: one reader of the master's bus feeds them all. Each stream is bounded
 * (`bufferBytes`): a reader that does not keep up loses events — counted, and told in an SSE comment when
 * it catches up — and never grows the API's memory. Events lost before the streams (the master's bus dropped them
 * for this reader, or its connection was lost and made again) reach every stream as one `brine/bus/dropped` event
 * per gap (`{count, reason}`; `count` null when nobody counted), as the bus's own readers see it. A stream ends when its token expires, is revoked
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
  #overflowed = 0
  #upstreamGaps = 0
  #upstreamLost = 0
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
    if (isLossNotice(event)) this.#noteUpstreamLoss(event)
    if (this.#streams.size === 0) return
    // One encoding per kind of sink for this event, however many readers share it.
    const cache = new Map<string, Buffer>()
    for (const stream of this.#streams) stream.send(event, cache, this.#o.bufferBytes)
  }

  /** Counts a gap before the streams and says so in the log; every stream gets the notice itself (its own `brine/bus/dropped` event). */
  #noteUpstreamLoss(event: BusEvent): void {
    const count = event.data['count']
    this.#upstreamGaps++
    if (typeof count === 'number') this.#upstreamLost += count
    this.#logger.warning(
      typeof count === 'number'
        ? `event streams: the master's bus dropped ${count} event(s) for this API's reader (it fell behind); ${this.#streams.size} stream(s) told`
        : `event streams: the connection to the master's bus was lost and made again; events fired meanwhile reached no stream; ${this.#streams.size} stream(s) told`,
    )
  }

  /** Opens a stream on `raw` for a live token (`expire`: epoch seconds); 503 past `maxStreams`. */
  open(raw: ServerResponse, token: string, expire: number, headers: Record<string, string>): void {
    this.checkRoom()
    raw.writeHead(200, { 'Content-Type': 'text/event-stream;charset=utf-8', 'Cache-Control': 'no-cache', Connection: 'keep-alive', ...headers })
    raw.write('retry: 400\n')
    this.attach(sseSink(raw), token, expire)
  }

  /** Throws the 503 a reader gets past `maxStreams`. */
  checkRoom(): void {
    if (this.#streams.size >= this.#o.maxStreams)
      throw new ApiError(503, `too many event streams open (${this.#streams.size}; rest_cherrypy.events_max_streams is ${this.#o.maxStreams})`)
  }

  /** Adds a reader on any sink (the websocket's) for a live token (`expire`: epoch seconds): the same bound, expiry and revocation as `/events`. */
  attach(sink: EventSink, token: string, expire: number): void {
    this.checkRoom()
    this.#streams.add(new Stream(sink, this, token, msFromSeconds(expire)))
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

  /** Called by a stream dropped for falling past its bound (a websocket reader). */
  noteOverflow(): void {
    this.#overflowed++
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
    return {
      streams: this.#streams.size,
      events: this.#events,
      delivered,
      dropped: this.#dropped,
      overflowed: this.#overflowed,
      queuedBytes,
      upstreamGaps: this.#upstreamGaps,
      upstreamLost: this.#upstreamLost,
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#recheck)
    for (const stream of [...this.#streams]) stream.end('the API is stopping')
    this.#abort.abort()
    await this.#reading
  }
}
