import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { decode, encode, frame, FrameReader } from '@brine/core'
import { BUS_DROPPED_TAG, BusSubscriptionError, eventBusPath } from '@brine/protocol'
import { deadline } from '@brine/transport-compliance'
import { EventBusUnavailableError } from '../src/errors.js'
import { MasterEvent, tagMatcher } from '../src/master-event.js'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A stand-in bus: a unix server that hands the test each subscriber socket. */
async function fakeBus(sockDir: string): Promise<{ server: Server; sockets: Socket[]; connected: () => Promise<Socket> }> {
  const sockets: Socket[] = []
  let onConnect: ((socket: Socket) => void) | undefined
  const server = createServer((socket) => {
    sockets.push(socket)
    onConnect?.(socket)
  })
  await new Promise<void>((resolve) => server.listen(eventBusPath(sockDir), resolve))
  cleanups.push(
    () => new Promise((resolve) => server.close(resolve)),
    async () => sockets.forEach((s) => s.destroy()),
  )
  return {
    server,
    sockets,
    connected: () => new Promise((resolve) => (onConnect = resolve)),
  }
}

/** A MasterEvent connected to a fresh stand-in bus, with the subscriber socket the bus accepted for it. */
async function connectedBus(
  options: { reconnect?: { initial: number; max: number }; tags?: string[] } = {},
): Promise<{ bus: Awaited<ReturnType<typeof fakeBus>>; events: MasterEvent; socket: Socket }> {
  const dir = await mkdtemp(join(tmpdir(), 'brine-me-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const bus = await fakeBus(dir)
  const events = new MasterEvent({
    sockDir: dir,
    ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
    ...(options.tags === undefined ? {} : { tags: options.tags }),
  })
  cleanups.push(() => events.close())
  const socketReady = bus.connected()
  await events.connect()
  const socket = await deadline(socketReady, 5000, 'the subscriber to connect')
  return { bus, events, socket }
}

const fire = (socket: Socket, tag: string, data: Record<string, unknown> = {}): void => {
  socket.write(frame(encode({ tag, data: { ...data, _stamp: new Date().toISOString() } })))
}

describe('tagMatcher', () => {
  it("applies Salt's match types", () => {
    expect(tagMatcher('salt/job/')('salt/job/1/new')).toBe(true)
    expect(tagMatcher('salt/job/*/ret/*', 'fnmatch')('salt/job/1/ret/web1')).toBe(true)
    expect(tagMatcher('salt/job/*/ret/*', 'glob')('salt/job/1/new')).toBe(false)
    expect(tagMatcher('^salt/job/\\d+/ret/', 'regex')('salt/job/123/ret/db1')).toBe(true)
    expect(tagMatcher('/start', 'endswith')('salt/minion/web1/start')).toBe(true)
    expect(tagMatcher('minion', 'find')('salt/minion/web1/start')).toBe(true)
    expect(() => tagMatcher('x', 'bogus' as never)).toThrow(/unknown match type 'bogus'/)
  })
})

describe('MasterEvent', () => {
  it("turns the master's count of events it dropped for this connection into a brine/bus/dropped event before the next one, and resolves nextConnection on a reconnect", async () => {
    const { bus, events, socket } = await connectedBus({ reconnect: { initial: 10, max: 20 } })
    const all = events.iter()[Symbol.asyncIterator]()
    const jobs = events.iter({ match: 'salt/job/' })[Symbol.asyncIterator]()
    socket.write(frame(encode({ tag: 'salt/job/1/ret/web1', data: { id: 'web1' }, dropped: 3 })))
    expect((await deadline(all.next(), 5000, 'the drop notice')).value).toMatchObject({ tag: BUS_DROPPED_TAG, data: { count: 3 } })
    expect((await deadline(all.next(), 5000, 'the event')).value).toEqual({ tag: 'salt/job/1/ret/web1', data: { id: 'web1' } })
    // A reader whose filter does not take the notice sees only the event.
    expect((await deadline(jobs.next(), 5000, 'the job event')).value).toEqual({ tag: 'salt/job/1/ret/web1', data: { id: 'web1' } })
    expect(events.masterDropped).toBe(3)

    const reconnected = events.nextConnection()
    const again = bus.connected()
    socket.destroy()
    await deadline(again, 5000, 'the reconnect')
    await deadline(reconnected, 5000, 'nextConnection to resolve')
    expect(events.reconnects).toBe(1)
  })

  it("tells readers the master's count of dropped events when it comes in a frame of its own, whatever tags the connection asked for", async () => {
    const { events, socket } = await connectedBus({ tags: ['salt/job/*/ret/'] })
    const all = events.iter()[Symbol.asyncIterator]()
    const jobs = events.iter({ match: 'salt/job/' })[Symbol.asyncIterator]()
    socket.write(frame(encode({ dropped: 2 })))
    fire(socket, 'salt/job/1/ret/web1')
    expect((await deadline(all.next(), 5000, 'the drop notice')).value).toEqual({
      tag: BUS_DROPPED_TAG,
      data: { count: 2, reason: 'behind', _stamp: expect.any(String) },
    })
    expect((await deadline(all.next(), 5000, 'the next event')).value?.tag).toBe('salt/job/1/ret/web1')
    expect((await deadline(jobs.next(), 5000, 'the job event')).value?.tag).toBe('salt/job/1/ret/web1')
    expect(events.masterDropped).toBe(2)
  })

  it('asks the bus for its tags on every connection, and holds what arrives to them', async () => {
    const { bus, events, socket } = await connectedBus({ reconnect: { initial: 10, max: 20 }, tags: ['salt/job/*/ret/', 'syndic/'] })
    const subscriptionOf = async (peer: Socket): Promise<unknown> =>
      deadline(
        new Promise((resolve) => {
          const reader = new FrameReader({ onFrame: (body) => resolve(decode(body)), onOversize: () => {} })
          peer.on('data', (chunk: Buffer) => reader.push(chunk))
        }),
        5000,
        'the subscription frame',
      )
    expect(await subscriptionOf(socket)).toEqual({ subscribe: ['salt/job/*/ret/', 'syndic/'] })
    const all = events.iter()[Symbol.asyncIterator]()
    // What a master writes before it has read the subscription reaches no reader.
    fire(socket, 'salt/job/1/new')
    fire(socket, 'brine/audit/publish')
    fire(socket, 'salt/job/1/ret/web1')
    expect((await deadline(all.next(), 5000, 'the return event')).value?.tag).toBe('salt/job/1/ret/web1')

    const again = bus.connected()
    socket.destroy()
    const second = await deadline(again, 5000, 'the reconnect')
    expect(await subscriptionOf(second)).toEqual({ subscribe: ['salt/job/*/ret/', 'syndic/'] })
  })

  it('refuses tags that are not valid patterns, naming the problem', () => {
    expect(() => new MasterEvent({ sockDir: '/tmp', tags: ['salt/j*b/'] })).toThrow(BusSubscriptionError)
    expect(() => new MasterEvent({ sockDir: '/tmp', tags: [] })).toThrow(/0 patterns; 1 to 16 are allowed/)
  })

  it('buffers for a reader only what its changing filter takes when the event arrives (a job reader narrowed to its jid)', async () => {
    const { events, socket } = await connectedBus()
    let wanted: string | undefined
    const reader = events
      .iter({ match: 'salt/job/', filter: (tag) => wanted === undefined || tag.startsWith(`salt/job/${wanted}/`), hwm: 2 })
      [Symbol.asyncIterator]()
    fire(socket, 'salt/job/1/ret/web1')
    expect((await deadline(reader.next(), 5000, 'the first event')).value?.tag).toBe('salt/job/1/ret/web1')
    wanted = '2'
    // Three events of other jobs would overflow a buffer of two: none is buffered, none counted dropped.
    for (const jid of ['1', '3', '4']) fire(socket, `salt/job/${jid}/ret/web1`)
    fire(socket, 'salt/job/2/ret/web1')
    expect((await deadline(reader.next(), 5000, "the reader's own job event")).value?.tag).toBe('salt/job/2/ret/web1')
    expect(events.dropped).toBe(0)
  })

  it('gives each reader the events matching its filter, and stops on abort', async () => {
    const { events, socket } = await connectedBus()
    const controller = new AbortController()
    const returns = events.iter({ match: 'salt/job/*/ret/*', matchType: 'glob', signal: controller.signal })
    const everything = events.iter()[Symbol.asyncIterator]()
    fire(socket, 'salt/job/1/new', { minions: ['a', 'b'] })
    fire(socket, 'salt/job/1/ret/a', { return: true })
    fire(socket, 'salt/job/1/ret/b', { return: true })
    const seen: string[] = []
    for await (const event of returns) {
      seen.push(event.tag)
      if (seen.length === 2) controller.abort()
    }
    expect(seen).toEqual(['salt/job/1/ret/a', 'salt/job/1/ret/b'])
    expect((await everything.next()).value?.tag).toBe('salt/job/1/new')
  })

  it('ends a reader on stop() as on abort: what it buffered is read, later events are not, other readers go on', async () => {
    const { events, socket } = await connectedBus()
    const stopped = events.iter({ match: 'salt/job/' })
    const reader = stopped[Symbol.asyncIterator]()
    const everything = events.iter()[Symbol.asyncIterator]()
    fire(socket, 'salt/job/1/ret/a')
    expect((await deadline(everything.next(), 5000, 'the first event')).value?.tag).toBe('salt/job/1/ret/a')
    stopped.stop()
    stopped.stop()
    fire(socket, 'salt/job/1/ret/b')
    expect((await deadline(everything.next(), 5000, 'the event after the stop')).value?.tag).toBe('salt/job/1/ret/b')
    expect((await deadline(reader.next(), 5000, 'the event buffered before the stop')).value?.tag).toBe('salt/job/1/ret/a')
    expect(await deadline(reader.next(), 5000, "the stopped reader's end")).toEqual({ value: undefined, done: true })
    expect(events.dropped).toBe(0)
  })

  it('names the socket when the bus cannot be reached', async () => {
    const events = new MasterEvent({ sockDir: '/nonexistent/brine' })
    const error = await events.connect().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EventBusUnavailableError)
    expect((error as Error).message).toMatch(/\/nonexistent\/brine\/master_event_pub\.ipc.*Is brine-master running/)
  })

  it('reconnects when the master comes back', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-me-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    let bus = await fakeBus(dir)
    const events = new MasterEvent({ sockDir: dir, reconnect: { initial: 20, max: 100 } })
    cleanups.push(() => events.close())
    const first = bus.connected()
    await events.connect()
    await first
    const reader = events.iter()[Symbol.asyncIterator]()
    await new Promise<void>((resolve) => {
      bus.sockets.forEach((s) => s.destroy())
      bus.server.close(() => resolve())
    })
    bus = await fakeBus(dir)
    const again = await deadline(bus.connected(), 10_000, 'MasterEvent to reconnect')
    fire(again, 'salt/auth', { id: 'web1' })
    // Where the connection was down, the reader is told that an uncounted number of events may be lost.
    expect((await deadline(reader.next(), 5000, 'the reconnect notice')).value).toEqual({
      tag: BUS_DROPPED_TAG,
      data: { count: null, reason: 'reconnect', _stamp: expect.any(String) },
    })
    expect((await deadline(reader.next(), 5000, 'an event after the reconnect')).value?.tag).toBe('salt/auth')
    expect(events.reconnects).toBe(1)
  })
})

describe('MasterEvent buffering', () => {
  it('bounds a slow reader: the newest events beyond hwm are dropped and counted, the rest read in order', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-me-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const bus = await fakeBus(dir)
    const events = new MasterEvent({ sockDir: dir })
    cleanups.push(() => events.close())
    const socketReady = bus.connected()
    const slow = events.iter({ hwm: 3 })[Symbol.asyncIterator]()
    const fast = events.iter({ match: 'salt/job/9/ret/' })[Symbol.asyncIterator]()
    await events.connect()
    const socket = await deadline(socketReady, 5000, 'the subscriber to connect')
    for (let index = 0; index < 6; index++) fire(socket, `salt/job/9/ret/m${index}`)
    // The fast reader's sixth event proves all six were dispatched.
    for (let index = 0; index < 6; index++)
      expect((await deadline(fast.next(), 5000, `event ${index} at the fast reader`)).value?.tag).toBe(`salt/job/9/ret/m${index}`)
    const seen: unknown[] = []
    for (let index = 0; index < 3; index++) seen.push((await slow.next()).value?.tag)
    // m0..m2 filled the buffer; m3..m5 were dropped for this reader only.
    expect(seen).toEqual(['salt/job/9/ret/m0', 'salt/job/9/ret/m1', 'salt/job/9/ret/m2'])
    expect(events.dropped).toBe(3)
    fire(socket, 'salt/job/9/ret/late')
    // The reader takes brine/bus/dropped (it matches every tag): told where its three went missing, before the next event.
    expect((await deadline(slow.next(), 5000, 'the notice')).value).toMatchObject({ tag: BUS_DROPPED_TAG, data: { count: 3, reason: 'behind' } })
    expect((await deadline(slow.next(), 5000, 'an event once the reader caught up')).value?.tag).toBe('salt/job/9/ret/late')
  })

  it('tells a reader whose own buffer dropped events as soon as it has read the buffer empty, without waiting for another event, and keeps the order around the gap', async () => {
    const { events, socket } = await connectedBus()
    const slow = events.iter({ match: `^salt/job/|^${BUS_DROPPED_TAG}$`, matchType: 'regex', hwm: 3 })[Symbol.asyncIterator]()
    const narrow = events.iter({ match: 'salt/job/', hwm: 3 })[Symbol.asyncIterator]()
    const witness = events.iter({ match: 'salt/job/' })[Symbol.asyncIterator]()
    for (let index = 0; index < 5; index++) fire(socket, `salt/job/1/ret/m${index}`)
    for (let index = 0; index < 5; index++) await deadline(witness.next(), 5000, `event ${index} at the witness`)
    const read: unknown[] = []
    for (let index = 0; index < 4; index++) read.push((await deadline(slow.next(), 5000, `read ${index}`)).value)
    expect(read.map((event) => (event as { tag: string }).tag)).toEqual(['salt/job/1/ret/m0', 'salt/job/1/ret/m1', 'salt/job/1/ret/m2', BUS_DROPPED_TAG])
    expect((read[3] as { data: unknown }).data).toMatchObject({ count: 2, reason: 'behind' })
    // n3 finds the buffer full; after one event read, n4 finds room for one, not for a notice and an event: lost too.
    for (let index = 0; index < 4; index++) fire(socket, `salt/job/1/ret/n${index}`)
    for (let index = 0; index < 4; index++) await deadline(witness.next(), 5000, `n${index} at the witness`)
    expect((await deadline(slow.next(), 5000, 'n0')).value?.tag).toBe('salt/job/1/ret/n0')
    fire(socket, 'salt/job/1/ret/n4')
    await deadline(witness.next(), 5000, 'n4 at the witness')
    expect((await deadline(slow.next(), 5000, 'n1')).value?.tag).toBe('salt/job/1/ret/n1')
    // Two free now: the notice of n3 and n4, then n5, after what was buffered before the gap.
    fire(socket, 'salt/job/1/ret/n5')
    await deadline(witness.next(), 5000, 'n5 at the witness')
    const after: unknown[] = []
    for (let index = 0; index < 3; index++) after.push((await deadline(slow.next(), 5000, `after ${index}`)).value)
    expect(after.map((event) => (event as { tag: string }).tag)).toEqual(['salt/job/1/ret/n2', BUS_DROPPED_TAG, 'salt/job/1/ret/n5'])
    expect((after[1] as { data: unknown }).data).toMatchObject({ count: 2, reason: 'behind' })
    // A reader whose match does not take the notice loses the same events, counted, and is never sent one.
    const narrowTags: unknown[] = []
    for (let index = 0; index < 3; index++) narrowTags.push((await deadline(narrow.next(), 5000, `narrow ${index}`)).value?.tag)
    expect(narrowTags).toEqual(['salt/job/1/ret/m0', 'salt/job/1/ret/m1', 'salt/job/1/ret/m2'])
    expect(events.dropped).toBeGreaterThan(3)
  })

  it('fails the first next() with the clear error when the bus is unreachable', async () => {
    const events = new MasterEvent({ sockDir: '/nonexistent/brine' })
    cleanups.push(() => events.close())
    await expect(events.iter()[Symbol.asyncIterator]().next()).rejects.toBeInstanceOf(EventBusUnavailableError)
  })
})
