import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { BUS_DROPPED_TAG } from '@brine/protocol'
import { deadline, until } from '@brine/transport-compliance'
import { sseSink, type EventStreams } from '../src/sse.js'
import { FORMAT_EVENTS_LOSS_REASON, websocketSink, WS_READY } from '../src/ws.js'
import { startBusAndStreams } from './bus-streams.js'

interface Seen {
  tag: string
  data: Record<string, unknown>
}

/** What the test's readers saw of its own events (warm-up events left out), in order. */
const ours = (seen: Seen[]): Seen[] => seen.filter((event) => !event.tag.startsWith('salt/warmup'))

/** An `/events` response whose peer reads everything: the events it was sent, parsed back from the SSE records. */
function sseReader(): { raw: ServerResponse; seen: () => Seen[] } {
  let chunks = ''
  const raw = {
    writableEnded: false,
    write: (chunk: Buffer) => ((chunks += chunk.toString()), true),
    on: () => {},
    end: () => {},
  } as unknown as ServerResponse
  const seen = (): Seen[] =>
    ours(
      chunks
        .split('\n\n')
        .filter((record) => record.startsWith('tag: '))
        .map((record) => {
          const [tagLine, dataLine] = record.split('\n')
          const event = JSON.parse(dataLine!.replace(/^data: /, '')) as Seen
          // The SSE record's tag line and its data's tag agree.
          expect(tagLine).toBe(`tag: ${event.tag}`)
          return event
        }),
    )
  return { raw, seen }
}

/** A websocket reader of `streams` (ready, as salt-api's clients say), with the messages it received and its close. */
async function wsReader(streams: EventStreams, cleanup: Array<() => Promise<void>>, formatEvents: boolean) {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
  server.on('connection', (socket) => streams.attach(websocketSink(socket, formatEvents), 'ab', Date.now() / 1000 + 3600))
  await new Promise((resolve) => server.once('listening', resolve))
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`)
  cleanup.push(async () => client.terminate())
  const messages: string[] = []
  client.on('message', (data) => messages.push(data.toString()))
  const closed = new Promise<{ code: number; reason: string }>((resolve) => client.on('close', (code, reason) => resolve({ code, reason: reason.toString() })))
  await deadline(new Promise((resolve) => client.once('open', resolve)), 10_000, 'the websocket to open')
  client.send(WS_READY)
  const seen = (): Seen[] => ours(messages.filter((text) => text.startsWith('data: ')).map((text) => JSON.parse(text.slice(6)) as Seen))
  return { client, messages, closed, seen }
}

describe('events lost before the streams (upstream of the API)', () => {
  const cleanup: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step()
  })

  it("reach every /events and /ws reader as one brine/bus/dropped event per gap: counted when the master's bus dropped them, uncounted when its connection was lost", async () => {
    // A bus that queues at most 4 events for a reader: a burst of 10 in one turn loses 6 of them for the API's reader.
    const { bus, streams, restartBus } = await startBusAndStreams(cleanup, { bufferBytes: 1 << 20, maxStreams: 4, busHwm: 4 })
    const sse = sseReader()
    streams.attach(sseSink(sse.raw), 'ab', Date.now() / 1000 + 3600)
    const ws = await wsReader(streams, cleanup, false)
    await until(() => (bus.fire('salt/warmup', {}), ws.messages.length > 0), 10_000, 'the hub to read the bus, and the websocket to be ready')

    // The bus writes what it queued for a reader in the turn after (one batch): the last warm-up event is gone by then.
    await new Promise((resolve) => setImmediate(resolve))
    for (let index = 0; index < 10; index++) bus.fire(`salt/test/burst/${index}`, {})
    // Nothing is fired after the burst: the bus tells the reader of its loss once it takes events again.
    const burst = ['salt/test/burst/0', 'salt/test/burst/1', 'salt/test/burst/2', 'salt/test/burst/3', BUS_DROPPED_TAG]
    for (const reader of [sse, ws]) {
      await until(() => reader.seen().length >= 5, 10_000, 'the burst and its loss notice')
      expect(reader.seen().map((event) => event.tag)).toEqual(burst)
      expect(reader.seen()[4]!.data).toEqual({ count: 6, reason: 'behind', _stamp: expect.any(String) })
    }
    expect(streams.stats()).toMatchObject({ upstreamGaps: 1, upstreamLost: 6, dropped: 0 })

    // The master restarts: the API's reader comes back to the new bus, and every stream is told once.
    const restarted = await restartBus()
    await until(
      () => (restarted.fire('salt/test/after', {}), sse.seen().some((event) => event.tag === 'salt/test/after')),
      10_000,
      'an event after the reconnect',
    )
    await until(() => ws.seen().some((event) => event.tag === 'salt/test/after'), 10_000, 'an event after the reconnect on the websocket')
    for (const reader of [sse, ws]) {
      const after = reader.seen().slice(burst.length)
      expect(after[0]).toEqual({ tag: BUS_DROPPED_TAG, data: { count: null, reason: 'reconnect', _stamp: expect.any(String) } })
      expect(after.slice(1).every((event) => event.tag === 'salt/test/after')).toBe(true)
    }
    expect(streams.stats()).toMatchObject({ upstreamGaps: 2, upstreamLost: 6, dropped: 0 })
  })

  it(`closes a ready format_events reader (1013) whose views missed events, and tells it why`, async () => {
    const { bus, streams, restartBus } = await startBusAndStreams(cleanup, { bufferBytes: 1 << 20, maxStreams: 4 })
    const ws = await wsReader(streams, cleanup, true)
    // A job's new event makes a view: the reader is ready and has begun one.
    await until(() => (bus.fire('salt/job/1/new', { jid: '1', minions: ['web1'], fun: 'test.ping' }), ws.messages.length > 0), 10_000, 'the first view')
    expect(JSON.parse(ws.messages[0]!)).toMatchObject({ jobs: { '1': { jid: '1', state: 'running' } } })
    await restartBus()
    expect(await deadline(ws.closed, 10_000, 'the close after the gap')).toEqual({ code: 1013, reason: FORMAT_EVENTS_LOSS_REASON })
    expect(streams.stats()).toMatchObject({ upstreamGaps: 1, streams: 0 })
  })
})
