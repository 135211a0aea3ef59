import type { BusEvent } from '@brine/protocol'
import type { WebSocket } from 'ws'
import type { EventSink } from './sse.js'

/** What a salt-api websocket client sends before any event reaches it (salt-api's SynchronizingWebsocket). */
export const WS_READY = 'websocket client ready'

/** Bytes handed to a websocket and not yet flushed to the kernel past which the reader counts as behind. */
const WS_HIGH_WATER = 64 * 1024

/**
 * Why a ready `format_events` reader is closed (1013, try again later) when events were lost before the streams: its
 * views would be silently wrong from then on, and salt-api's format has no message that could say so.
 */
export const FORMAT_EVENTS_LOSS_REASON = 'events were lost before this stream; reconnect to rebuild the view'

/** How many jobs a `format_events` reader's view keeps (salt-api's grows for as long as the socket lives). */
export const FORMAT_EVENTS_MAX_JOBS = 200

/** salt-api's websocket frame for one event: `data: {"tag", "data"}` as JSON, then a blank line. */
export function wsRecord(event: BusEvent): Buffer {
  let json: string
  try {
    json = JSON.stringify({ tag: event.tag, data: event.data })
  } catch (error) {
    json = JSON.stringify({ tag: event.tag, data: { error: `event data could not be serialised: ${(error as Error).message}` } })
  }
  return Buffer.from(`data: ${json}\n\n`)
}

const isMap = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

interface JobView {
  jid: unknown
  start_time: unknown
  minions: Record<string, Record<string, unknown>>
  fun: unknown
  tgt: unknown
  tgt_type: unknown
  state: 'running' | 'complete'
}

/**
 * The `format_events` view of one reader, as salt-api's `event_processor.SaltInfo` keeps it: the jobs it saw
 * (state `running` until every minion returned with success) and the minions (grains from `grains.items`
 * returns, added and removed by `salt/key` events), sent whole as `{"jobs": …}` or `{"minions": [...]}` after
 * each event that changes them. Brine has no presence events, so `salt/presence/*` never updates it.
 */
export class EventFormatter {
  readonly jobs = new Map<string, JobView>()
  minions: Record<string, Record<string, unknown>> = {}

  /** The messages `event` produces (none for an event that changes no view). */
  process(event: BusEvent): string[] {
    const parts = event.tag.split('/')
    const data = isMap(event.data) ? event.data : {}
    const out: string[] = []
    if (parts[1] === 'job' && parts[3] === 'new' && typeof data['jid'] === 'string') {
      const minions: JobView['minions'] = {}
      for (const id of Array.isArray(data['minions']) ? data['minions'] : []) minions[String(id)] = { success: false }
      this.jobs.set(data['jid'], {
        jid: data['jid'],
        start_time: data['_stamp'],
        minions,
        fun: data['fun'],
        tgt: data['tgt'],
        tgt_type: data['tgt_type'],
        state: 'running',
      })
      // Bounded: the oldest job leaves the view first (a Map keeps insertion order).
      while (this.jobs.size > FORMAT_EVENTS_MAX_JOBS) this.jobs.delete(this.jobs.keys().next().value as string)
      out.push(this.#jobsMessage())
      if (data['fun'] === 'grains.items') this.minions = {}
    } else if (parts[1] === 'job' && parts[3] === 'ret' && parts[2] !== undefined && parts[4] !== undefined) {
      const [jid, id] = [parts[2], parts.slice(4).join('/')]
      let job = this.jobs.get(jid)
      if (job === undefined) {
        job = { jid, start_time: undefined, minions: {}, fun: data['fun'], tgt: undefined, tgt_type: undefined, state: 'running' }
        this.jobs.set(jid, job)
      }
      job.minions[id] = { ...job.minions[id], return: data['return'], retcode: data['retcode'], success: data['success'] }
      if (Object.values(job.minions).every((minion) => minion['success'] === true)) job.state = 'complete'
      out.push(this.#jobsMessage())
      if (data['fun'] === 'grains.items') {
        this.minions[id] = { ...this.minions[id], grains: data['return'] }
        out.push(this.#minionsMessage())
      }
    }
    if (parts[1] === 'key' && typeof data['id'] === 'string') {
      if (data['act'] === 'delete') delete this.minions[data['id']]
      else if (data['act'] === 'accept') this.minions[data['id']] ??= {}
      out.push(this.#minionsMessage())
    }
    return out
  }

  #jobsMessage(): string {
    return JSON.stringify({ jobs: Object.fromEntries(this.jobs) })
  }

  #minionsMessage(): string {
    return JSON.stringify({ minions: Object.entries(this.minions).map(([id, info]) => ({ ...info, id })) })
  }
}

/**
 * The sink of one `/ws` reader. Nothing reaches it until the client sends {@link WS_READY}, as with salt-api;
 * then each event is one text message (salt-api's `data: …` frame, or `format_events` views); events lost before the
 * streams arrive as a `brine/bus/dropped` event (a `format_events` reader is closed instead). A reader whose
 * unflushed messages pass the stream's bound is dropped (`drop-reader`): the socket is destroyed at once, since
 * a close frame would queue behind what it is not reading.
 */
export function websocketSink(socket: WebSocket, formatEvents: boolean): EventSink {
  let ready = false
  let pending = 0
  let behind = false
  const drainListeners: Array<() => void> = []
  const formatter = formatEvents ? new EventFormatter() : undefined
  socket.on('message', (message, isBinary) => {
    if (!isBinary && message.toString() === WS_READY) ready = true
  })
  return {
    encode: (event, cache) => {
      if (!ready) return []
      if (formatter !== undefined) return formatter.process(event).map((text) => Buffer.from(text))
      let record = cache.get('ws')
      if (record === undefined) cache.set('ws', (record = wsRecord(event)))
      return [record]
    },
    write: (record) => {
      pending += record.length
      // The callback runs once ws handed the frame to the socket and the socket flushed it.
      socket.send(record, { binary: false }, () => {
        pending -= record.length
        if (behind && pending < WS_HIGH_WATER) {
          behind = false
          for (const listener of drainListeners) listener()
        }
      })
      if (pending >= WS_HIGH_WATER) behind = true
      return !behind
    },
    onDrain: (listener) => drainListeners.push(listener),
    onClose: (listener) => socket.on('close', listener),
    overflow: 'drop-reader',
    dropNotice: () => undefined,
    // A plain reader gets the notice as an event; a view that has begun is ended (one not yet begun lost nothing of it).
    lostUpstream: () => (formatter !== undefined && ready ? FORMAT_EVENTS_LOSS_REASON : undefined),
    end: (reason, abrupt) => {
      if (abrupt) return socket.terminate()
      if (socket.readyState !== socket.OPEN) return
      // 1001 "going away" when the API stops; 1013 "try again later" for a view that missed events; 1008 "policy
      // violation" for an expired or revoked token.
      const text = Buffer.from(reason ?? '')
        .subarray(0, 123)
        .toString()
      socket.close(reason === 'the API is stopping' ? 1001 : reason === FORMAT_EVENTS_LOSS_REASON ? 1013 : 1008, text)
    },
  }
}
