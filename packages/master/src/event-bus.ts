import { chmod, mkdir, rm } from 'node:fs/promises'
import { createServer, type Server, type Socket } from 'node:net'
import { FramedConnection } from '@brine/transport'
import { BoundedQueue, decode, encodeFrame, silentLogger, type Logger } from '@brine/core'
import { busTagMatcher, eventBusPath, eventStamp, MAX_BUS_PATTERNS, MAX_UNIX_SOCKET_PATH, parseBusSubscription, type BusEvent } from '@brine/protocol'
import { EventBusError } from './errors.js'

export interface EventBusOptions {
  /** Directory of the bus socket (Salt's sock_dir); created 0700. */
  sockDir: string
  /** Events queued per subscriber that stops reading, before new ones are dropped for it. */
  hwm?: number
  /** Bytes queued per subscriber that stops reading, before new events are dropped for it (default 32 MiB). */
  hwmBytes?: number
  logger?: Logger
}

/**
 * Per-subscriber hwm of the bus in events, when the config says nothing larger. High, because the byte
 * bound below is what holds a stalled reader's memory: a master busy with a burst of returns writes a
 * reader's backlog out only a socket buffer at a time, and a reader that keeps reading must not lose
 * events for it.
 */
export const DEFAULT_EVENT_BUS_HWM = 200_000
/**
 * Bytes held per subscriber that stops reading: the count alone would let many events of a large
 * return (a 10 MB cmd.run output each) pile up; whichever bound is met first drops the event for it.
 * 8 MiB is some 25,000 return events, over a second of a master storing 20,000 returns a second: a
 * reader that keeps reading rides out a burst, and one further behind costs the master no more while
 * it is told what it missed; each reader's queue counts toward the master's peak in a burst.
 */
export const DEFAULT_EVENT_BUS_HWM_BYTES = 8 * 1024 * 1024

/**
 * The bus hwm for a master's `pub_hwm`: ten times it (a job fires several events per publish),
 * never below {@link DEFAULT_EVENT_BUS_HWM}. Still bounded, so a stalled reader cannot grow the master.
 */
export function eventBusHwm(pubHwm: number | undefined): number {
  if (pubHwm === undefined || !Number.isSafeInteger(pubHwm * 10) || pubHwm <= 0) return DEFAULT_EVENT_BUS_HWM
  return Math.max(DEFAULT_EVENT_BUS_HWM, pubHwm * 10)
}

export type EventListener = (event: BusEvent) => void

/** What the bus keeps of one socket subscriber: its drops, and the tags it asked for. */
interface SubscriberState {
  dropped: number
  untold: number
  /** The subscriber's {@link parseBusSubscription} patterns as one test; undefined: every event. */
  accepts: ((tag: string) => boolean) | undefined
}

/** A subscription frame holds a map, one array and its patterns: anything more deeply built is refused before it is decoded. */
const SUBSCRIPTION_LIMITS = { maxEntries: MAX_BUS_PATTERNS + 1, maxDepth: 2 }

/**
 * The master's local event bus (Salt's master_event_pub.ipc): a unix socket only the master's user
 * can open. Every fired event is stamped, encoded once and written to every subscriber, each behind
 * its own queue bounded by count (`hwm`) and bytes (`hwmBytes`), so a stalled reader loses events
 * (counted) instead of growing the master; once its queue takes frames again it is told how many (`dropped`:
 * in a frame of its own, or beside `tag` and `data` of an event written first), so a reader that must not miss
 * returns can read them back from the job cache. The bus never closes a reader for being slow.
 * In-process listeners ({@link subscribe}: the reactor) see every event synchronously and unqueued: they
 * run inside the master, so no socket reader's stall can make them miss one.
 */
export class EventBus {
  readonly path: string
  private server: Server | undefined
  /** Each subscriber with the events dropped for it, and how many of those it has not been told about yet. */
  private readonly subscribers = new Map<FramedConnection, SubscriberState>()
  private readonly listeners = new Set<EventListener>()
  /** Ends every in-process iterator when the bus closes. */
  readonly #enders = new Set<() => void>()
  /** Events queued per subscriber before new ones are dropped for it. */
  readonly hwm: number
  /** Bytes queued per subscriber before new events are dropped for it. */
  readonly hwmBytes: number
  private readonly logger: Logger
  /** Events dropped for subscribers that stopped reading. */
  dropped = 0
  fired = 0
  /** Events left unwritten to a subscriber because its subscription did not name their tags (not drops). */
  skipped = 0

  constructor(options: EventBusOptions) {
    this.path = eventBusPath(options.sockDir)
    this.hwm = options.hwm ?? DEFAULT_EVENT_BUS_HWM
    this.hwmBytes = options.hwmBytes ?? DEFAULT_EVENT_BUS_HWM_BYTES
    this.logger = options.logger ?? silentLogger
  }

  async start(): Promise<void> {
    if (Buffer.byteLength(this.path) > MAX_UNIX_SOCKET_PATH) {
      throw new EventBusError(
        `event bus socket path ${this.path} is ${Buffer.byteLength(this.path)} bytes; unix sockets allow ${MAX_UNIX_SOCKET_PATH}. Set a shorter sock_dir.`,
        { path: this.path, limit: MAX_UNIX_SOCKET_PATH },
      )
    }
    const sockDir = this.path.slice(0, this.path.lastIndexOf('/'))
    await mkdir(sockDir, { recursive: true, mode: 0o700 })
    await chmod(sockDir, 0o700)
    // A socket file left by a master that was killed would make listen() fail with EADDRINUSE.
    await rm(this.path, { force: true })
    const server = createServer((socket) => this.accept(socket))
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error) =>
        reject(new EventBusError(`cannot listen on event bus socket ${this.path}: ${error.message}`, { path: this.path }, { cause: error })),
      )
      server.listen(this.path, () => resolve())
    })
    server.on('error', (error) => this.logger.error(`event bus ${this.path}: ${error.message}`))
    await chmod(this.path, 0o600)
    this.server = server
  }

  private accept(socket: Socket): void {
    const connection = new FramedConnection(
      socket,
      { maxFrameBytes: 1024, hwm: this.hwm, maxQueuedBytes: this.hwmBytes, peer: `event-bus-subscriber`, coalesce: true },
      {
        // A subscriber sends at most its subscription (docs/protocol.md); anything else is logged and ignored.
        onFrame: (body, conn) => this.#subscribe(conn, body),
        onOversize: () => {},
        onClose: (conn) => this.#closed(conn),
        onWritable: (conn) => this.#tellDropped(conn),
      },
    )
    this.subscribers.set(connection, { dropped: 0, untold: 0, accepts: undefined })
  }

  /** Narrows what `connection` receives to the tags its subscription frame names; a bad frame changes nothing. */
  #subscribe(connection: FramedConnection, body: Buffer): void {
    const state = this.subscribers.get(connection)
    if (state === undefined) return
    try {
      state.accepts = busTagMatcher(parseBusSubscription(decode(body, 'event-bus-subscriber', SUBSCRIPTION_LIMITS)))
    } catch (error) {
      this.logger.warning(`event bus: a subscriber's frame was ignored: ${(error as Error).message}`)
    }
  }

  /**
   * `connection` takes frames again after some were dropped for it: it is told how many now, in a frame of its own
   * (`{dropped}`, no tag), rather than with the next event, which may be long in coming (the flood that filled its
   * queue has ended) — until then it could not know that it had lost any.
   */
  #tellDropped(connection: FramedConnection): void {
    const state = this.subscribers.get(connection)
    if (state === undefined || state.untold === 0) return
    if (connection.write(encodeFrame({ dropped: state.untold }))) state.untold = 0
  }

  /** The warning in fire() shows only the 1st and every 1000th drop, so the exact count is logged when a subscriber leaves. */
  #closed(connection: FramedConnection): void {
    const stats = this.subscribers.get(connection)
    this.subscribers.delete(connection)
    if (stats !== undefined && stats.dropped > 0) {
      this.logger.warning(`event bus: a subscriber left after ${stats.dropped} event(s) were dropped for it; ${this.dropped} dropped in total`)
    }
  }

  /**
   * Fires `tag` with `data` to every subscriber. Data without a `_stamp` is copied with one added; data
   * with one (a return's event data, made fresh for each event) is fired as it is.
   */
  fire(tag: string, data: Record<string, unknown>): BusEvent {
    const event: BusEvent = { tag, data: typeof data['_stamp'] === 'string' ? data : { ...data, _stamp: eventStamp() } }
    this.fired++
    for (const listener of this.listeners) {
      try {
        listener(event)
      } catch (error) {
        this.logger.error(`event listener failed on ${tag}`, error)
      }
    }
    if (this.subscribers.size > 0) {
      let bytes: Buffer | undefined
      for (const [subscriber, stats] of this.subscribers) {
        if (stats.accepts !== undefined && !stats.accepts(tag)) {
          this.skipped++
          continue
        }
        bytes ??= encodeFrame(event)
        // A subscriber that lost events is told how many with the next event that reaches it (`dropped`; its
        // MasterEvent turns that into a BUS_DROPPED_TAG event): a reader that must not miss returns reads them back.
        const written = stats.untold > 0 ? subscriber.write(encodeFrame({ ...event, dropped: stats.untold })) : subscriber.write(bytes)
        if (written) stats.untold = 0
        else {
          this.dropped++
          stats.dropped++
          stats.untold++
          if (this.dropped === 1 || this.dropped % 1000 === 0) {
            this.logger.warning(
              `event bus: a subscriber is not reading (hwm ${this.hwm} events or ${this.hwmBytes} bytes); ${this.dropped} event(s) dropped so far`,
            )
          }
        }
      }
    }
    return event
  }

  /** An in-process listener; returns its unsubscribe function. */
  subscribe(listener: EventListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * In-process events whose tag starts with `match` (or with one of several prefixes), from now on, as an async iterator behind a bounded
   * queue of `hwm` (default the bus's): a reader that falls behind loses the newest, as a socket
   * subscriber does. Ends when `signal` aborts, when the caller stops iterating, or when the bus closes.
   */
  iter(options: { match?: string | readonly string[]; hwm?: number; signal?: AbortSignal } = {}): AsyncIterable<BusEvent> {
    const prefixes = typeof options.match === 'string' ? [options.match] : (options.match ?? [''])
    const queue = new BoundedQueue<BusEvent>(options.hwm ?? this.hwm)
    // A full queue drops the event for this reader only; its owner (the return collector) reads the job cache.
    const unsubscribe = this.subscribe((event) => {
      if (prefixes.some((prefix) => event.tag.startsWith(prefix))) queue.push(event)
    })
    const finish = (): void => {
      unsubscribe()
      queue.end()
      options.signal?.removeEventListener('abort', finish)
      this.#enders.delete(finish)
    }
    this.#enders.add(finish)
    if (options.signal?.aborted === true) finish()
    options.signal?.addEventListener('abort', finish, { once: true })
    return {
      [Symbol.asyncIterator]: () => {
        const inner = queue[Symbol.asyncIterator]()
        return {
          next: () => inner.next(),
          return: async () => {
            finish()
            return inner.return!()
          },
        }
      },
    }
  }

  get subscriberCount(): number {
    return this.subscribers.size
  }

  /** Subscribers that asked for some tags only (a subscription frame the bus accepted). */
  get narrowedSubscriberCount(): number {
    let count = 0
    for (const state of this.subscribers.values()) if (state.accepts !== undefined) count++
    return count
  }

  /** Bytes waiting for subscribers that have not read them yet, over all subscribers. */
  get queuedBytes(): number {
    let bytes = 0
    for (const subscriber of this.subscribers.keys()) bytes += subscriber.queuedBytes
    return bytes
  }

  async close(): Promise<void> {
    const server = this.server
    this.server = undefined
    for (const end of this.#enders) end()
    this.#enders.clear()
    this.listeners.clear()
    await Promise.all([...this.subscribers.keys()].map((subscriber) => subscriber.close()))
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()))
    await rm(this.path, { force: true })
  }
}
