import { mkdtemp, rm, stat } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createLogger, decode, encode, frame, FrameReader, type Logger } from '@brine/core'
import { defaultsFor, type MasterConfig } from '@brine/config'
import { deadline } from '@brine/transport-compliance'
import { eventStamp } from '@brine/protocol'
import { DEFAULT_EVENT_BUS_HWM, DEFAULT_EVENT_BUS_HWM_BYTES, EventBus, eventBusHwm } from '../src/event-bus.js'
import { Master } from '../src/master.js'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function startBus(hwm?: number, logger?: Logger, hwmBytes?: number): Promise<EventBus> {
  const dir = await mkdtemp(join(tmpdir(), 'brine-bus-'))
  const bus = new EventBus({ sockDir: join(dir, 'sock'), hwm, ...(hwmBytes === undefined ? {} : { hwmBytes }), ...(logger === undefined ? {} : { logger }) })
  await bus.start()
  cleanups.push(
    () => rm(dir, { recursive: true, force: true }),
    () => bus.close(),
  )
  return bus
}

/** A raw subscriber: connects to the socket and collects decoded events. */
function rawSubscriber(path: string): Promise<{ events: Array<{ tag: string; data: Record<string, unknown> }>; next: () => Promise<void>; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const events: Array<{ tag: string; data: Record<string, unknown> }> = []
    let waiting: (() => void) | undefined
    const reader = new FrameReader({
      onFrame: (body) => {
        events.push(decode(body) as (typeof events)[number])
        waiting?.()
      },
      onOversize: () => {},
    })
    const socket = connect(path)
    socket.on('data', (chunk: Buffer) => reader.push(chunk))
    socket.once('error', reject)
    cleanups.push(async () => socket.destroy())
    socket.once('connect', () =>
      resolve({
        events,
        socket,
        next: () =>
          new Promise<void>((r) => {
            waiting = r
          }),
      }),
    )
  })
}

/** Resolves once the bus has registered a subscriber. */
async function registered(bus: EventBus): Promise<void> {
  await deadline(
    (async () => {
      while (bus.subscriberCount === 0) await new Promise((r) => setImmediate(r))
    })(),
    5000,
    'the bus to register its subscriber',
  )
}

/** Resolves once `done()` holds, checked each turn of the event loop. */
async function until(done: () => boolean, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!done()) await new Promise((r) => setImmediate(r))
    })(),
    5000,
    what,
  )
}

/** A subscriber that connects and never reads, once the bus has registered it. */
async function stalledSubscriber(bus: EventBus): Promise<Socket> {
  const socket = connect(bus.path)
  cleanups.push(async () => socket.destroy())
  socket.pause()
  await registered(bus)
  return socket
}

describe('EventBus', () => {
  it('stamps events and delivers them to socket subscribers and in-process listeners', async () => {
    const bus = await startBus()
    const local: string[] = []
    bus.subscribe((event) => local.push(event.tag))
    const subscriber = await rawSubscriber(bus.path)
    await registered(bus)
    const arrived = subscriber.next()
    bus.fire('salt/job/20261122170903000001/new', { jid: '20261122170903000001', minions: ['web1'] })
    await deadline(arrived, 5000, 'the event to reach the socket subscriber')
    expect(subscriber.events[0]!.tag).toBe('salt/job/20261122170903000001/new')
    expect(subscriber.events[0]!.data).toMatchObject({ jid: '20261122170903000001', minions: ['web1'] })
    expect(new Date(subscriber.events[0]!.data['_stamp'] as string).toISOString()).toBe(subscriber.events[0]!.data['_stamp'])
    expect(local).toEqual(['salt/job/20261122170903000001/new'])
  })

  it('keeps its socket and directory private to the master user', async () => {
    const bus = await startBus()
    expect((await stat(bus.path)).mode & 0o777).toBe(0o600)
    expect((await stat(join(bus.path, '..'))).mode & 0o777).toBe(0o700)
  })

  it('refuses a sock_dir too long for a unix socket, naming the path and the limit', async () => {
    const bus = new EventBus({ sockDir: `/tmp/${'x'.repeat(120)}` })
    await expect(bus.start()).rejects.toThrow(/unix sockets allow 107\. Set a shorter sock_dir/)
  })

  it('drops past its hwm for a subscriber that stopped reading and logs the exact count when it leaves', async () => {
    const lines: string[] = []
    const bus = await startBus(2, createLogger({ level: 'warning', write: (line) => lines.push(line) }))
    const socket = await stalledSubscriber(bus)
    // Events fired in one turn are written together after it, at most hwm (2) of them: eight of ten
    // are dropped. The two written leave the socket's buffer over its high-water mark, so in the next
    // turn two wait in the queue of 2 and eight more are dropped.
    const big = 'x'.repeat(256 * 1024)
    for (let i = 0; i < 10; i++) bus.fire('salt/test/big', { big })
    expect(bus.dropped).toBe(8)
    expect(lines.filter((line) => line.includes('1 event(s) dropped so far'))).toHaveLength(1)
    await new Promise((resolve) => setImmediate(resolve))
    for (let i = 0; i < 10; i++) bus.fire('salt/test/big', { big })
    expect(bus.dropped).toBe(16)
    socket.destroy()
    await deadline(
      (async () => {
        while (bus.subscriberCount > 0) await new Promise((r) => setImmediate(r))
      })(),
      5000,
      'the bus to see its subscriber leave',
    )
    expect(lines.filter((line) => line.includes('left after 16 event(s) were dropped for it; 16 dropped in total'))).toHaveLength(1)
  })

  it('bounds what a stalled subscriber holds by bytes too, not only by count', async () => {
    const bus = await startBus(10_000, undefined, 1024 * 1024)
    const socket = await stalledSubscriber(bus)
    // 200 events of 256 KiB (50 MiB) to a reader that reads nothing: far under the count of 10,000.
    const big = 'x'.repeat(256 * 1024)
    for (let turn = 0; turn < 20; turn++) {
      for (let i = 0; i < 10; i++) bus.fire('salt/test/big', { big })
      expect(bus.queuedBytes).toBeLessThanOrEqual(1024 * 1024)
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(bus.queuedBytes).toBeLessThanOrEqual(1024 * 1024)
    // What the socket took before it stopped draining, plus at most 1 MiB queued: the rest was dropped.
    expect(bus.dropped).toBeGreaterThan(150)
  })

  it("holds at most 8 MiB for a stalled subscriber by default: the bus of a master in a burst is not its readers' backlog", async () => {
    const bus = await startBus()
    const socket = await stalledSubscriber(bus)
    const big = 'x'.repeat(256 * 1024)
    for (let turn = 0; turn < 20; turn++) {
      for (let i = 0; i < 10; i++) bus.fire('salt/test/big', { big })
      expect(bus.queuedBytes).toBeLessThanOrEqual(DEFAULT_EVENT_BUS_HWM_BYTES)
      await new Promise((resolve) => setImmediate(resolve))
    }
    expect(DEFAULT_EVENT_BUS_HWM_BYTES).toBe(8 * 1024 * 1024)
    // 50 MiB fired: what the socket took before it stopped draining, plus at most 8 MiB queued; the rest dropped.
    expect(bus.dropped).toBeGreaterThan(120)
    socket.destroy()
  })

  it('delivers one event larger than the byte bound to a subscriber that keeps up (a 64 MiB return is not dropped)', async () => {
    const bus = await startBus(10_000, undefined, 1024 * 1024)
    const subscriber = await rawSubscriber(bus.path)
    await registered(bus)
    const arrived = subscriber.next()
    const big = 'y'.repeat(4 * 1024 * 1024)
    bus.fire('salt/job/20261122170903000001/ret/web1', { return: big })
    await deadline(arrived, 10_000, 'the 4 MiB event to reach the subscriber')
    expect(bus.dropped).toBe(0)
    expect(subscriber.events[0]!.data['return']).toBe(big)
  })

  it("writes an event fired in an immediate (a return's, once the job cache's batch is written) at once, before the next immediate", async () => {
    const bus = await startBus()
    const subscriber = await rawSubscriber(bus.path)
    await registered(bus)
    const arrived = subscriber.next()
    const unsentAtNextImmediate = await new Promise<number>((resolve) => {
      setImmediate(() => {
        // Queued before the event: an event held for the rest of the loop's turn would still be unsent when it runs.
        setImmediate(() => resolve(bus.queuedBytes))
        void (async () => {
          await null
          bus.fire('salt/job/20261128111500000001/ret/web1', { return: true })
        })()
      })
    })
    expect(unsentAtNextImmediate).toBe(0)
    await deadline(arrived, 5000, 'the event')
    expect(subscriber.events.map((event) => event.tag)).toEqual(['salt/job/20261128111500000001/ret/web1'])
  })

  it('tells a subscriber that lost events how many, with the next event that reaches it', async () => {
    const bus = await startBus(2)
    const received: Array<{ tag: string; dropped?: number }> = []
    let wake: (() => void) | undefined
    const reader = new FrameReader({
      onFrame: (body) => {
        received.push(decode(body) as { tag: string; dropped?: number })
        wake?.()
      },
      onOversize: () => {},
    })
    const socket = await stalledSubscriber(bus)
    socket.on('data', (chunk: Buffer) => reader.push(chunk))
    socket.pause()
    const big = 'x'.repeat(256 * 1024)
    for (let i = 0; i < 10; i++) bus.fire('salt/test/big', { big })
    expect(bus.dropped).toBe(8)
    // The two kept went to the socket, which is now over its mark: events fired from here wait in the queue (of 2).
    await new Promise((resolve) => setImmediate(resolve))
    bus.fire('salt/test/after', { n: 1 })
    bus.fire('salt/test/after', { n: 2 })
    socket.resume()
    await deadline(
      (async () => {
        while (received.length < 4) await new Promise<void>((r) => (wake = r))
      })(),
      5000,
      'the events after the drop',
    )
    expect(received.map((event) => [event.tag, event.dropped])).toEqual([
      ['salt/test/big', undefined],
      ['salt/test/big', undefined],
      ['salt/test/after', 8],
      ['salt/test/after', undefined],
    ])
  })

  it('tells a subscriber that lost events how many in a frame of its own once it takes events again, when no event comes', async () => {
    const bus = await startBus(2)
    const received: Array<{ tag?: string; dropped?: number }> = []
    const reader = new FrameReader({ onFrame: (body) => received.push(decode(body) as (typeof received)[number]), onOversize: () => {} })
    const socket = await stalledSubscriber(bus)
    socket.on('data', (chunk: Buffer) => reader.push(chunk))
    socket.pause()
    const big = 'x'.repeat(256 * 1024)
    for (let i = 0; i < 10; i++) bus.fire('salt/test/big', { big })
    expect(bus.dropped).toBe(8)
    // Nothing more is fired: the subscriber reads, the bus's queue for it drains, and the count follows alone.
    socket.resume()
    await until(() => received.length >= 3, 'the count of the events lost')
    expect(received.map((event) => [event.tag, event.dropped])).toEqual([
      ['salt/test/big', undefined],
      ['salt/test/big', undefined],
      [undefined, 8],
    ])
    expect(received[2]).toEqual({ dropped: 8 })
  })

  it('writes a subscriber that sent a subscription only the events whose tags match it, a `*` segment for any one segment', async () => {
    const bus = await startBus()
    const narrowed = await rawSubscriber(bus.path)
    const everything = await rawSubscriber(bus.path)
    narrowed.socket.write(frame(encode({ subscribe: ['salt/job/*/ret/', 'syndic/'] })))
    await until(() => bus.narrowedSubscriberCount === 1, 'the bus to read the subscription')
    const tags = [
      'salt/job/20261122170903000001/new',
      'brine/audit/publish',
      'salt/job/20261122170903000001/ret/web1',
      'syndic/s1/salt/job/20261122170903000001/new',
      'salt/job/20261122170903000001',
      'salt/key',
    ]
    for (const tag of tags) bus.fire(tag, {})
    const last = 'salt/job/20261122170903000002/ret/db1'
    bus.fire(last, {})
    await until(() => narrowed.events.length === 3 && everything.events.length === tags.length + 1, 'the events to arrive')
    expect(narrowed.events.map((event) => event.tag)).toEqual(['salt/job/20261122170903000001/ret/web1', 'syndic/s1/salt/job/20261122170903000001/new', last])
    expect(everything.events.map((event) => event.tag)).toEqual([...tags, last])
    expect(bus.skipped).toBe(4)
  })

  it('ignores a malformed subscription with a warning naming the problem: that subscriber still reads every event', async () => {
    const lines: string[] = []
    const bus = await startBus(undefined, createLogger({ level: 'warning', write: (line) => lines.push(line) }))
    const subscriber = await rawSubscriber(bus.path)
    subscriber.socket.write(frame(encode({ subscribe: 'salt/' })))
    subscriber.socket.write(frame(encode({ subscribe: ['salt/j*b/'] })))
    subscriber.socket.write(frame(encode({ subscribe: Array.from({ length: 17 }, (_, i) => `t${i}/`) })))
    subscriber.socket.write(frame(Buffer.from([0xc1])))
    await until(() => lines.length >= 4, 'the four warnings')
    expect(lines[0]).toMatch(/bus subscription refused: expected \{subscribe: \[tag pattern, …\]\}/)
    expect(lines[1]).toMatch(/'\*' stands only for a whole segment/)
    expect(lines[2]).toMatch(/holds more than 17 entries/)
    expect(lines[3]).toMatch(/subscriber's frame was ignored/)
    expect(bus.narrowedSubscriberCount).toBe(0)
    bus.fire('brine/audit/publish', {})
    await until(() => subscriber.events.length === 1, 'the event to arrive')
    expect(subscriber.events[0]!.tag).toBe('brine/audit/publish')
  })

  it("sizes its hwm from the master's pub_hwm: ten times it, never below 200,000", () => {
    expect(eventBusHwm(undefined)).toBe(DEFAULT_EVENT_BUS_HWM)
    expect(eventBusHwm(1000)).toBe(200_000)
    expect(eventBusHwm(50_000)).toBe(500_000)
    expect(eventBusHwm(0)).toBe(DEFAULT_EVENT_BUS_HWM)
    const master = new Master({ ...defaultsFor('master'), sock_dir: '/tmp/brine-unused', pub_hwm: 40_000 } as MasterConfig)
    expect(master.bus.hwm).toBe(400_000)
  })
})

describe('eventStamp', () => {
  it("is the millisecond's ISO 8601 time, the same text within one millisecond and a new one at the next", () => {
    const at = Date.UTC(2026, 10, 26, 18, 0, 0, 123)
    expect(eventStamp(at)).toBe('2026-11-26T18:00:00.123Z')
    expect(eventStamp(at)).toBe(eventStamp(at))
    expect(eventStamp(at + 1)).toBe('2026-11-26T18:00:00.124Z')
    expect(eventStamp(at)).toBe('2026-11-26T18:00:00.123Z')
    const now = eventStamp()
    expect(Math.abs(Date.parse(now) - Date.now())).toBeLessThan(60_000)
  })
})
