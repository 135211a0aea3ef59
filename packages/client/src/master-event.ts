import { connect } from 'node:net'
import { FramedConnection } from '@brine/transport'
import { backoffDelay, BoundedQueue, decode, encode, frame, silentLogger, type BackoffOptions, type Logger } from '@brine/core'
import { BUS_DROPPED_TAG, busTagMatcher, eventBusPath, eventStamp, parseBusSubscription, type BusEvent, type BusSubscription } from '@brine/protocol'
import { globToRegExp } from '@brine/targeting'
import { EventBusUnavailableError, MatchTypeError } from './errors.js'

/** Salt's `match_type` names, plus `prefix` and `glob` as plain-English aliases. */
export type MatchType = 'startswith' | 'prefix' | 'endswith' | 'find' | 'regex' | 'fnmatch' | 'glob'

export interface IterOptions {
  /** Tag pattern; '' (the default) matches every event. */
  match?: string
  /** How `match` is applied (Salt's default: startswith). */
  matchType?: MatchType
  signal?: AbortSignal
  /**
   * Events buffered for this reader before the newest are dropped (counted in `dropped`; a reader whose match takes
   * `brine/bus/dropped` is told where, once its buffer has room again).
   */
  hwm?: number
  /**
   * A further test of each tag that matches, made as the event arrives (before it is buffered); it may
   * answer differently as the reader's interest changes (a job reader narrowed to its jids).
   */
  filter?: (tag: string) => boolean
}

/** What {@link MasterEvent.iter} returns: the events, and a way to end them that needs no AbortController. */
export interface BusReader extends AsyncIterable<BusEvent> {
  /** Ends the reader as an abort of its `signal` would (idempotent): what it buffered is read, then it is done. */
  stop(): void
}

export interface MasterEventOptions {
  /** The master's sock_dir. */
  sockDir: string
  logger?: Logger
  /** Reconnect backoff when the master restarts, ms. */
  reconnect?: BackoffOptions
  /**
   * Tag patterns (docs/protocol.md: a prefix, a whole segment `*` for any one segment): the master then
   * writes this connection only the events that match one, and its readers see no others. A reader that
   * needs few of the bus's events (a job's returns) is then not woken by the rest. Default: every event.
   */
  tags?: readonly string[]
}

/** Builds the tag test for one match type. */
export function tagMatcher(match: string, matchType: MatchType = 'startswith'): (tag: string) => boolean {
  switch (matchType) {
    case 'startswith':
    case 'prefix':
      return (tag) => tag.startsWith(match)
    case 'endswith':
      return (tag) => tag.endsWith(match)
    case 'find':
      return (tag) => tag.includes(match)
    case 'regex': {
      const pattern = new RegExp(match)
      return (tag) => pattern.test(tag)
    }
    case 'fnmatch':
    case 'glob': {
      const pattern = globToRegExp(match)
      return (tag) => pattern.test(tag)
    }
    default:
      throw new MatchTypeError(String(matchType))
  }
}

/** Why a `brine/bus/dropped` event was delivered: the master dropped events for this connection, or the connection was lost and made again. */
export type BusLossReason = 'behind' | 'reconnect'

/**
 * The `brine/bus/dropped` event a reader gets where events were lost before it: `count` of them, or `null` when
 * nobody counted them (the connection to the bus was lost and made again).
 */
export function busLossEvent(count: number | null, reason: BusLossReason, stamp?: unknown): BusEvent {
  return { tag: BUS_DROPPED_TAG, data: { count, reason, _stamp: typeof stamp === 'string' ? stamp : eventStamp() } }
}

interface Reader {
  test: (tag: string) => boolean
  queue: BoundedQueue<BusEvent>
  /** Events this reader's full buffer dropped since it was last told (only counted for a reader that takes the notice). */
  lost: number
}

/**
 * Offers `event` to one reader: a reader that lost events to its full buffer is first told how many (a
 * `brine/bus/dropped` event, reason `behind`, where the events went missing), once its buffer holds both. Returns false
 * when the event was dropped.
 */
function offer(reader: Reader, event: BusEvent): boolean {
  if (reader.lost > 0) {
    if (reader.queue.size + 2 > reader.queue.capacity) return dropFor(reader)
    reader.queue.push(busLossEvent(reader.lost, 'behind'))
    reader.lost = 0
  }
  return reader.queue.push(event) || reader.queue.isEnded || dropFor(reader)
}

/** Counts one event the reader's buffer could not take, for its notice if its match takes one; always false. */
function dropFor(reader: Reader): false {
  if (reader.test(BUS_DROPPED_TAG)) reader.lost++
  return false
}

/** The notice of what a reader's full buffer dropped, taken out of the reader once its buffer is read empty. */
function pendingNotice(reader: Reader): BusEvent | undefined {
  if (reader.lost === 0 || reader.queue.size > 0) return undefined
  const notice = busLossEvent(reader.lost, 'behind')
  reader.lost = 0
  return notice
}

/**
 * Salt's MasterEvent: the master's event bus as async iterators. Several readers may iterate at once,
 * each with its own tag filter and bounded buffer. If the master restarts, the connection comes back on
 * its own (events fired while it was down are not replayed). When the master had to drop events for this
 * connection, or a reader's own buffer was full, readers whose filter takes `brine/bus/dropped` get one such event
 * (`{count, reason: 'behind'}`) in their place; when the connection came back after it was lost, one with
 * `{count: null, reason: 'reconnect'}`.
 *
 * ```ts
 * const events = new MasterEvent({ sockDir: '/var/run/brine/master' })
 * await events.connect()
 * for await (const { tag, data } of events.iter({ match: 'salt/job/', signal })) console.log(tag, data)
 * ```
 */
export class MasterEvent implements AsyncDisposable {
  readonly path: string
  private readonly readers = new Set<Reader>()
  private connection: FramedConnection | undefined
  private connecting: Promise<void> | undefined
  private closed = false
  private everConnected = false
  private attempt = 0
  private timer: NodeJS.Timeout | undefined
  private readonly logger: Logger
  /** Events dropped for readers that fell behind, in total. */
  dropped = 0
  /** Events the master dropped for this connection (it fell behind the master's hwm), as the master reported them. */
  masterDropped = 0
  reconnects = 0
  /** Waiting for the next (re)connection; see {@link nextConnection}. */
  private readonly connectWaiters = new Set<() => void>()
  /** The subscription frame sent on every (re)connection, when `tags` narrows what this connection reads. */
  private readonly subscription: Buffer | undefined
  /** `tags` as one test: events the master sent before it read the subscription are held to it here too. */
  private readonly accepts: ((tag: string) => boolean) | undefined

  /** Throws BusSubscriptionError when `tags` is not a list of valid patterns. */
  constructor(private readonly options: MasterEventOptions) {
    this.path = eventBusPath(options.sockDir)
    this.logger = options.logger ?? silentLogger
    if (options.tags !== undefined) {
      const subscription: BusSubscription = { subscribe: parseBusSubscription({ subscribe: [...options.tags] }) }
      this.subscription = frame(encode(subscription))
      this.accepts = busTagMatcher(subscription.subscribe)
    }
  }

  /** Connects once; rejects with EventBusUnavailableError (naming the socket) if the bus cannot be reached. */
  async connect(): Promise<void> {
    if (this.connection !== undefined) return
    this.connecting ??= this.open(true).finally(() => (this.connecting = undefined))
    await this.connecting
  }

  private open(first: boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = connect(this.path)
      let established = false
      const connection = new FramedConnection(
        socket,
        { maxFrameBytes: 64 * 1024 * 1024, hwm: 16, peer: this.path },
        {
          onFrame: (body) => this.dispatch(body),
          onOversize: (error) => this.logger.warning(`event bus: ${error.message}`),
          onClose: (_conn, reason) => {
            if (!established) {
              if (first) {
                reject(
                  new EventBusUnavailableError(
                    `cannot reach the master's event bus at ${this.path}: ${reason ?? 'connection closed'}. Is brine-master running, and are you its user?`,
                    { path: this.path },
                  ),
                )
              } else {
                this.scheduleReconnect()
              }
              return
            }
            this.connection = undefined
            this.scheduleReconnect()
          },
        },
      )
      socket.once('connect', () => {
        if (this.subscription !== undefined) connection.write(this.subscription)
        established = true
        this.everConnected = true
        this.attempt = 0
        this.connection = connection
        if (!first) {
          this.reconnects++
          // Whatever the master fired while this connection was down reached no reader here, and nothing counted it.
          this.deliver(busLossEvent(null, 'reconnect'))
        }
        for (const wake of this.connectWaiters) wake()
        this.connectWaiters.clear()
        resolve()
      })
    })
  }

  private scheduleReconnect(): void {
    if (this.closed) return
    this.attempt++
    const delay = backoffDelay(this.attempt, this.options.reconnect ?? { initial: 100, max: 2000 })
    // Not unref'd: a program whose only work is reading events (brine-run event.listen) must stay
    // alive while the master restarts. close() clears it.
    this.timer = setTimeout(() => {
      this.open(false).catch(() => {})
    }, delay)
  }

  private dispatch(body: Buffer): void {
    let event: BusEvent & { dropped?: unknown }
    try {
      event = decode(body) as BusEvent & { dropped?: unknown }
    } catch (error) {
      this.logger.warning(`event bus: undecodable event dropped: ${(error as Error).message}`)
      return
    }
    if (typeof event !== 'object' || event === null) return
    const lost = event.dropped
    if (typeof lost === 'number' && lost > 0) {
      // The master dropped events for this connection before this frame (an event, or the count alone once the
      // connection takes frames again): readers that ask for it are told.
      this.masterDropped += lost
      delete event.dropped
      this.deliver(busLossEvent(lost, 'behind', event.data?.['_stamp']))
    }
    if (typeof event.tag !== 'string') return
    if (this.accepts === undefined || this.accepts(event.tag)) this.deliver(event)
  }

  private deliver(event: BusEvent): void {
    for (const reader of this.readers) {
      if (reader.test(event.tag) && !offer(reader, event)) this.dropped++
    }
  }

  /**
   * Events whose tag matches, as they arrive from now on. Ends when `signal` aborts, when its `stop()` is called, when
   * the caller breaks out of the loop, or when this MasterEvent is closed.
   */
  iter(options: IterOptions = {}): BusReader {
    const matches = tagMatcher(options.match ?? '', options.matchType)
    const filter = options.filter
    const reader: Reader = {
      test: filter === undefined ? matches : (tag) => matches(tag) && filter(tag),
      queue: new BoundedQueue(options.hwm ?? 10_000),
      lost: 0,
    }
    this.readers.add(reader)
    const finish = (): void => {
      this.readers.delete(reader)
      reader.queue.end()
    }
    if (this.closed || options.signal?.aborted) finish()
    options.signal?.addEventListener('abort', finish, { once: true })
    return {
      stop: () => {
        finish()
        options.signal?.removeEventListener('abort', finish)
      },
      [Symbol.asyncIterator]: () => {
        const inner = reader.queue[Symbol.asyncIterator]()
        return {
          // Iterating a MasterEvent that was never connected connects it (and fails with the clear
          // EventBusUnavailableError); once connected, reconnects happen in the background.
          next: async () => {
            if (!this.closed && !this.everConnected) await this.connect()
            // Read empty after it fell behind, with no event since to carry the notice: told now, not at some later event.
            const notice = pendingNotice(reader)
            return notice === undefined ? inner.next() : { value: notice, done: false }
          },
          return: async () => {
            finish()
            options.signal?.removeEventListener('abort', finish)
            return { value: undefined, done: true }
          },
        }
      },
    }
  }

  /** True while the bus connection is up (false before connect(), while reconnecting after a master restart, and after close()). */
  get connected(): boolean {
    return this.connection !== undefined
  }

  /**
   * Resolves at the next time the bus connects (a reconnect after the master restarted): call it before
   * restarting the master to know when events it fires will be read. Never rejects; a closed MasterEvent
   * leaves it pending, so bound the wait.
   */
  nextConnection(): Promise<void> {
    return new Promise((resolve) => this.connectWaiters.add(resolve))
  }

  /** Readers open now (each iter() not yet ended). */
  get readerCount(): number {
    return this.readers.size
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    for (const reader of this.readers) reader.queue.end()
    this.readers.clear()
    await this.connection?.close()
    this.connection = undefined
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }
}
