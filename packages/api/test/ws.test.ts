import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocket, WebSocketServer } from 'ws'
import { deadline, until } from '@brine/transport-compliance'
import { EventFormatter, FORMAT_EVENTS_MAX_JOBS, websocketSink, WS_READY, wsRecord } from '../src/ws.js'
import { startBusAndStreams } from './bus-streams.js'

describe("format_events (salt-api's event_processor)", () => {
  it('keeps a view of jobs (running, then complete when every minion succeeded) and of minions (grains, keys)', () => {
    const view = new EventFormatter()
    const created = view.process({ tag: 'salt/job/1/new', data: { jid: '1', minions: ['a', 'b'], fun: 'test.ping', tgt: '*', tgt_type: 'glob', _stamp: 'T' } })
    expect(created.map((text) => JSON.parse(text))).toEqual([
      {
        jobs: {
          '1': {
            jid: '1',
            start_time: 'T',
            minions: { a: { success: false }, b: { success: false } },
            fun: 'test.ping',
            tgt: '*',
            tgt_type: 'glob',
            state: 'running',
          },
        },
      },
    ])
    view.process({ tag: 'salt/job/1/ret/a', data: { return: true, retcode: 0, success: true, fun: 'test.ping' } })
    const last = view.process({ tag: 'salt/job/1/ret/b', data: { return: true, retcode: 0, success: true, fun: 'test.ping' } })
    expect(JSON.parse(last[0]!).jobs['1']).toMatchObject({
      state: 'complete',
      minions: { a: { return: true, retcode: 0, success: true }, b: { success: true } },
    })

    view.process({ tag: 'salt/job/2/new', data: { jid: '2', minions: ['a'], fun: 'grains.items' } })
    const grains = view.process({ tag: 'salt/job/2/ret/a', data: { return: { os: 'Debian' }, retcode: 0, success: true, fun: 'grains.items' } })
    expect(JSON.parse(grains[1]!)).toEqual({ minions: [{ grains: { os: 'Debian' }, id: 'a' }] })
    expect(JSON.parse(view.process({ tag: 'salt/key', data: { act: 'accept', id: 'c', result: true } })[0]!)).toEqual({
      minions: [{ grains: { os: 'Debian' }, id: 'a' }, { id: 'c' }],
    })
    expect(JSON.parse(view.process({ tag: 'salt/key', data: { act: 'delete', id: 'a', result: true } })[0]!)).toEqual({ minions: [{ id: 'c' }] })
    expect(view.process({ tag: 'salt/auth', data: {} })).toEqual([])
  })

  it(`keeps at most ${FORMAT_EVENTS_MAX_JOBS} jobs, the oldest leaving first`, () => {
    const view = new EventFormatter()
    for (let jid = 0; jid < FORMAT_EVENTS_MAX_JOBS + 5; jid++) view.process({ tag: `salt/job/${jid}/new`, data: { jid: String(jid), minions: [] } })
    expect(view.jobs.size).toBe(FORMAT_EVENTS_MAX_JOBS)
    expect(view.jobs.has('0')).toBe(false)
    expect(view.jobs.has(String(FORMAT_EVENTS_MAX_JOBS + 4))).toBe(true)
  })
})

describe('websocket readers of EventStreams', () => {
  const cleanup: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step()
  })

  /** A real bus, the hub reading it, and a ws server whose connections become readers of the hub. */
  async function setup(bufferBytes: number, expireInS = 3600, formatEvents = false) {
    const { bus, streams } = await startBusAndStreams(cleanup, { bufferBytes, maxStreams: 4 })
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    server.on('connection', (socket) => streams.attach(websocketSink(socket, formatEvents), 'ab', Date.now() / 1000 + expireInS))
    await new Promise((resolve) => server.once('listening', resolve))
    const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`)
    cleanup.push(async () => client.terminate())
    const messages: string[] = []
    client.on('message', (data) => messages.push(data.toString()))
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      client.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    )
    await deadline(new Promise((resolve) => client.once('open', resolve)), 10_000, 'the websocket to open')
    await until(() => streams.stats().streams === 1, 10_000, 'the reader to be attached')
    // The hub's bus reader is connected once an event fired now reaches it.
    await until(() => (bus.fire('salt/test/warmup', {}), streams.stats().events > 0), 10_000, 'the hub to read the bus')
    return { bus, streams, client, messages, closed }
  }

  it("sends nothing before 'websocket client ready', then salt-api's data frames", async () => {
    const { bus, streams, client, messages } = await setup(1 << 20)
    const seen = streams.stats().events
    bus.fire('salt/test/before', { n: 0 })
    // The hub has fanned it out (to a reader not yet ready) before the client says it is ready.
    await until(() => streams.stats().events > seen, 10_000, 'the hub to read the event before ready')
    client.send(WS_READY)
    await until(() => (bus.fire('salt/test/after', { n: 1 }), messages.length > 0), 10_000, 'an event after ready')
    expect(messages.some((text) => text.includes('salt/test/before'))).toBe(false)
    expect(messages[0]).toBe(wsRecord({ tag: 'salt/test/after', data: JSON.parse(messages[0]!.slice(6)).data }).toString())
    expect(messages[0]).toMatch(/^data: \{"tag":"salt\/test\/after","data":\{"n":1,"_stamp":"[^"]+"\}\}\n\n$/)
  })

  it('closes the socket (1008) when the token expires', async () => {
    const { closed } = await setup(1 << 20, 0.5)
    expect(await deadline(closed, 10_000, 'the close at expiry')).toEqual({ code: 1008, reason: 'token expired' })
  })

  it('drops a reader that stops reading once it falls past its bound, and counts it', async () => {
    const { bus, streams, client, closed } = await setup(64 * 1024)
    client.send(WS_READY)
    await until(() => (bus.fire('salt/test/ready', {}), streams.stats().delivered > 0), 10_000, 'the first delivered event')
    client.pause()
    const blob = 'x'.repeat(256 * 1024)
    // The kernel's socket buffers take a few MiB first; bounded at 400 events (100 MiB), far past them.
    for (let index = 0; index < 400 && streams.stats().overflowed === 0; index++) {
      bus.fire('salt/test/bulk', { blob })
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await until(() => streams.stats().overflowed === 1, 10_000, 'the stalled reader to be dropped')
    expect(streams.stats()).toMatchObject({ streams: 0, overflowed: 1, queuedBytes: 0 })
    client.resume()
    expect((await deadline(closed, 10_000, 'the dropped socket to close')).code).toBe(1006)
  })
})
