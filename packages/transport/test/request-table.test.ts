import { afterEach, describe, expect, it } from 'vitest'
import { EndpointCore, RequestTable, type PendingRequest, type RequestTableOptions } from '../src/index.js'
import { ClosedError, EnvelopeKind, InFlightLimitError, InvalidOperationError, RemoteError, TimeoutError, decodeEnvelope, encodeEnvelope } from '@brine/core'

const ADDRESS = 'tcp://127.0.0.1:4506'

const open: RequestTable[] = []
// Requests a test leaves pending are rejected with ClosedError here, and those rejections are expected.
afterEach(() => {
  for (const requests of open.splice(0)) requests.close()
})

/** Sends a request whose outcome the test does not look at. */
const hold = (promise: Promise<unknown>): void => void promise.catch(() => {})

/** A table whose link records every try instead of sending it; replies are fed back by hand. */
function table(options: Partial<RequestTableOptions> = {}) {
  const core = new EndpointCore('test', 'request client', ADDRESS)
  const tries: PendingRequest[] = []
  const settled: PendingRequest[] = []
  const requests = new RequestTable(
    core,
    { timeout: 60_000, tries: 1, limit: 100, maxFrameBytes: 1024 * 1024, ...options },
    { transmit: (request) => tries.push(request), settled: (request) => settled.push(request) },
  )
  requests.open()
  open.push(requests)
  const reply = (id: number, body: unknown): void => requests.receive(encodeEnvelope({ kind: EnvelopeKind.Reply, id, body }), 'server')
  return { core, requests, tries, settled, reply }
}

describe('RequestTable', () => {
  it('sends one envelope per try and resolves with the reply matched by id', async () => {
    const { requests, tries, reply, settled } = table()
    const first = requests.send('a')
    const second = requests.send('b')
    expect(tries.map((request) => decodeEnvelope(request.data))).toEqual([
      { kind: EnvelopeKind.Request, id: 0, body: 'a' },
      { kind: EnvelopeKind.Request, id: 1, body: 'b' },
    ])
    expect(requests.inFlight).toBe(2)
    reply(1, 'to b')
    reply(0, 'to a')
    expect(await Promise.all([first, second])).toEqual(['to a', 'to b'])
    expect(requests.inFlight).toBe(0)
    expect(settled).toHaveLength(2)
  })

  it('wraps ids at idLimit and skips the ids still in flight', async () => {
    const { requests, tries, reply } = table({ idLimit: 5, limit: 4 })
    const held = [0, 1, 2, 3].map((n) => requests.send(n))
    hold(held[0]!)
    hold(held[2]!)
    reply(1, 'done')
    reply(3, 'done')
    await Promise.all([held[1], held[3]])
    hold(requests.send(4))
    // In flight now: 0, 2, 4. The counter wraps to 0, still in flight, so the next id is 1.
    hold(requests.send(5))
    expect(tries.map((request) => request.id)).toEqual([0, 1, 2, 3, 4, 1])
    expect(requests.inFlight).toBe(4)
  })

  it('refuses a request beyond the in-flight limit with InFlightLimitError naming `limit`, and counts it', async () => {
    const { requests, core } = table({ limit: 2 })
    hold(requests.send(1))
    hold(requests.send(2))
    const error = await requests.send(3).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(InFlightLimitError)
    expect((error as InFlightLimitError).context).toEqual({ address: ADDRESS, limit: 2 })
    expect((error as Error).message).toBe(`2 requests already in flight to ${ADDRESS} (hwm 2); request refused`)
    expect(core.counters.refused).toBe(1)
    expect(requests.inFlight).toBe(2)
  })

  it('validates timeout and tries with a RangeError naming the bad value, in send() and in the defaults', async () => {
    const { requests } = table()
    await expect(requests.send('x', { tries: 0 })).rejects.toThrow(new RangeError('tries must be a positive integer, got 0'))
    await expect(requests.send('x', { tries: 1.5 })).rejects.toThrow(/got 1\.5$/)
    await expect(requests.send('x', { timeout: -5 })).rejects.toThrow(/timeout must be a positive number of ms up to 2147483647, got -5$/)
    await expect(requests.send('x', { timeout: 2 ** 31 })).rejects.toBeInstanceOf(RangeError)
    expect(requests.inFlight).toBe(0)
    const core = new EndpointCore('test', 'request client', ADDRESS)
    expect(() => new RequestTable(core, { timeout: 1000, tries: 0, limit: 1, maxFrameBytes: 1024 }, { transmit: () => {} })).toThrow(
      /tries must be a positive integer, got 0/,
    )
  })

  it('re-sends the same bytes on each try and fails with TimeoutError after the last', async () => {
    const { requests, tries } = table()
    const error = await requests.send('slow', { timeout: 10, tries: 3 }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(TimeoutError)
    expect(error).toMatchObject({ address: ADDRESS, timeout: 10, tries: 3 })
    expect(tries).toHaveLength(3)
    expect(new Set(tries.map((request) => request.data)).size).toBe(1)
  })

  it('with `patience`, a try the server answers with a Pending notice does not count, at most `patience` times; without, notices change nothing', async () => {
    const core = new EndpointCore('test', 'request client', ADDRESS)
    const sent: number[] = []
    // The server's side, played here: every try of request `id` is answered "still in hand".
    const requests: RequestTable = new RequestTable(
      core,
      { timeout: 10, tries: 2, limit: 10, maxFrameBytes: 1024 },
      {
        transmit: (request) => {
          sent.push(request.id)
          requests.receive(encodeEnvelope({ kind: EnvelopeKind.Pending, id: request.id, body: null }), 'server')
        },
      },
    )
    requests.open()
    open.push(requests)
    const patient = await requests.send('queued', { patience: 3 }).catch((caught: unknown) => caught)
    expect(patient).toBeInstanceOf(TimeoutError)
    expect(patient).toMatchObject({ timeout: 10, tries: 2 })
    // Two tries and the three handed back: five in all, the same request each time.
    expect(sent).toEqual([0, 0, 0, 0, 0])
    sent.length = 0
    expect(await requests.send('impatient').catch((caught: unknown) => caught)).toBeInstanceOf(TimeoutError)
    expect(sent).toEqual([1, 1])
    await expect(requests.send('x', { patience: -1 })).rejects.toThrow(new RangeError('patience must be a non-negative integer, got -1'))
    await expect(requests.send('x', { patience: 0.5 })).rejects.toThrow(/got 0\.5$/)
  })

  it('a reply after Pending notices resolves the request', async () => {
    const { requests, tries } = table()
    const answer = requests.send('queued', { timeout: 60_000, tries: 1, patience: 2 })
    requests.receive(encodeEnvelope({ kind: EnvelopeKind.Pending, id: 0, body: null }), 'server')
    expect(requests.inFlight).toBe(1)
    requests.receive(encodeEnvelope({ kind: EnvelopeKind.Reply, id: 0, body: 'stored' }), 'server')
    expect(await answer).toBe('stored')
    expect(tries).toHaveLength(1)
  })

  it('rejects with a RemoteError on an error reply, with the abort reason on abort, and ClosedError on close', async () => {
    const { requests, tries } = table()
    const failing = requests.send('fail')
    requests.receive(encodeEnvelope({ kind: EnvelopeKind.ErrorReply, id: tries[0]!.id, body: { name: 'TypeError', message: 'bad' } }), 'server')
    await expect(failing).rejects.toBeInstanceOf(RemoteError)

    const controller = new AbortController()
    const aborted = requests.send('wait', { signal: controller.signal })
    controller.abort(new Error('gave up'))
    await expect(aborted).rejects.toThrow('gave up')
    await expect(requests.send('x', { signal: controller.signal })).rejects.toThrow('gave up')

    const pending = requests.send('pending')
    requests.close()
    await expect(pending).rejects.toBeInstanceOf(ClosedError)
    expect(requests.inFlight).toBe(0)
  })

  it('refuses to send before open() and after the endpoint closed', async () => {
    const core = new EndpointCore('test', 'request client', ADDRESS)
    const requests = new RequestTable(core, { timeout: 1000, tries: 1, limit: 1, maxFrameBytes: 1024 }, { transmit: () => {} })
    await expect(requests.send('early')).rejects.toBeInstanceOf(InvalidOperationError)
    requests.open()
    core.markClosed()
    await expect(requests.send('late')).rejects.toBeInstanceOf(ClosedError)
  })

  it('drops a frame that is not a reply, with a frame-drop, and ignores a reply nobody waits for', async () => {
    const { requests, core, reply } = table()
    requests.receive(Buffer.from([0xc1]), 'server')
    requests.receive(encodeEnvelope({ kind: EnvelopeKind.Request, id: 0, body: 'a request' }), 'server')
    reply(42, 'nobody asked')
    expect(core.counters.framesDropped).toBe(2)
    expect(requests.inFlight).toBe(0)
  })
})
