import { describe, expect } from 'vitest'
import { type RequestContext, type SendOptions } from '@brine/transport'
import { RemoteError, TimeoutError, type WireValue } from '@brine/core'
import { deadline, deferred, until } from '@brine/testkit'
import { HOST, WAIT_MS, type Harness } from '../harness/index.js'
import { complianceCase as test } from './case.js'

export function requestReplyTests(harness: Harness): void {
  describe('request-reply', () => {
    roundTripCases(harness)
  })

  describe('timeouts', () => {
    timeoutRetryCases(harness)
    timeoutOptionCases(harness)
  })

  describe('handler failure', () => {
    test('handler failure: a throwing handler yields an error reply and the server keeps serving', async () => {
      const server = await harness.requestServer(async (request) => {
        if ((request as { fail?: boolean }).fail) throw new TypeError("'fun' must be a string")
        return 'fine'
      })
      const { endpoint: client } = await harness.requestClient(server.port)
      const error = await client.send({ fail: true }, { timeout: WAIT_MS }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(RemoteError)
      expect((error as RemoteError).remoteName).toBe('TypeError')
      expect((error as Error).message).toContain("'fun' must be a string")
      const event = await server.recorder.waitFor((e) => e.type === 'handler-error', 'a handler-error event')
      expect(event.type === 'handler-error' && event.error).toContain("'fun' must be a string")
      expect(await client.send({ fail: false }, { timeout: WAIT_MS })).toBe('fine')
      expect(server.endpoint.stats().inFlight).toBe(0)
    })
  })
}

/** Requests reach their replies, concurrently and with their context. */
function roundTripCases(harness: Harness): void {
  test('request-reply: a request gets its reply', async () => {
    const server = await harness.requestServer(async (request) => ({ echo: request }))
    const { endpoint: client } = await harness.requestClient(server.port)
    const load = { cmd: '_return', id: 'web1', jid: '20261122170903123456', return: { a: [1, 'two', null] } }
    expect(await client.send(load, { timeout: WAIT_MS })).toEqual({ echo: load })
    expect(client.stats().inFlight).toBe(0)
  })

  test('request-reply: 200 concurrent requests answered out of order each reach their caller', async () => {
    const held: Array<{ value: number; release: (reply: WireValue) => void }> = []
    const allHeld = deferred()
    const server = await harness.requestServer(async (request) => {
      const value = (request as { n: number }).n
      const reply = deferred<WireValue>()
      held.push({ value, release: reply.resolve })
      if (held.length === 200) allHeld.resolve()
      return reply.promise
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    const replies = Array.from({ length: 200 }, (_, n) => client.send({ n }, { timeout: WAIT_MS }))
    await deadline(allHeld.promise, WAIT_MS, 'all 200 requests to reach the handler')
    expect(server.endpoint.stats().inFlight).toBe(200)
    expect(client.stats().inFlight).toBe(200)
    // Answer newest first, so replies leave in the reverse of the order they were asked.
    for (const { value, release } of [...held].reverse()) release({ doubled: value * 2 })
    const answers = await deadline(Promise.all(replies), WAIT_MS, '200 replies')
    expect(answers).toEqual(Array.from({ length: 200 }, (_, n) => ({ doubled: n * 2 })))
    expect(client.stats().inFlight).toBe(0)
  })

  test('request-reply: the handler sees the request context', async () => {
    const contexts: RequestContext[] = []
    const server = await harness.requestServer(async (_request, context) => {
      contexts.push(context)
      return 'ok'
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    await client.send('hello', { timeout: WAIT_MS })
    expect(contexts).toHaveLength(1)
    expect(contexts[0]!.transport).toBe(harness.setup.name)
    expect(contexts[0]!.peer).toMatch(/\S/)
  })
}

/**
 * Timeouts after exactly `tries` attempts, and a late reply to an earlier try.
 *
 * The contract changed here: a try of a request whose earlier try (same peer, same id) is still waiting or running
 * at the server is counted (`stats().coalesced`) and not served again; the earlier try's reply carries the same id
 * and answers it. Before, every try reached the handler, so a master late by more than a minion's retry timer ran
 * each return once per try, and every retry lengthened the queue the first one waited in (issue 28's 20,000-minion
 * runs). A reply is answered once per request; a client's tries are only its way of asking again.
 */
function timeoutRetryCases(harness: Harness): void {
  test('timeouts: TimeoutError after exactly `tries` attempts, carrying address, timeout and tries', async () => {
    const calls: WireValue[] = []
    const never = deferred<WireValue>()
    const server = await harness.requestServer(async (request) => {
      calls.push(request)
      return request === 'probe' ? 'probed' : never.promise
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    const error = await client.send({ fun: 'test.sleep' }, { timeout: 250, tries: 3 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TimeoutError)
    expect(error).toMatchObject({ address: client.address, timeout: 250, tries: 3 })
    expect((error as Error).message).toBe(`request to ${client.address} timed out after 250 ms (3 tries)`)
    // Answered after the three tries on the same link, so all three have reached the server: one ran, two joined it.
    expect(await client.send('probe', { timeout: WAIT_MS })).toBe('probed')
    expect(calls).toEqual([{ fun: 'test.sleep' }, 'probe'])
    expect(server.endpoint.stats().coalesced).toBe(2)
    expect(client.stats().inFlight).toBe(0)
    never.resolve('too late')
  })

  test('timeouts: a late reply to an earlier try completes the request', async () => {
    const first = deferred<WireValue>()
    const calls: WireValue[] = []
    const server = await harness.requestServer(async (request) => {
      calls.push(request)
      if (request === 'question') return first.promise
      return request === 'probe' ? 'probed' : new Promise<WireValue>(() => {})
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    const question = client.send('question', { timeout: 2500, tries: 2 })
    // Its timer is due after the question's first try runs out, so by this TimeoutError the second try is sent.
    const gaveUp = await client.send('gave up', { timeout: 3000, tries: 1 }).catch((e: unknown) => e)
    expect(gaveUp).toBeInstanceOf(TimeoutError)
    expect(await client.send('probe', { timeout: WAIT_MS })).toBe('probed')
    expect(server.endpoint.stats().coalesced).toBe(1)
    // The second try is still waiting on the client: the first try's answer completes the request.
    first.resolve('answer to the first try')
    expect(await deadline(question, WAIT_MS, 'the question')).toBe('answer to the first try')
    expect(calls).toEqual(['question', 'gave up', 'probe'])
  })

  test('timeouts: a patient client keeps waiting while the server holds its request (Pending notices), beyond its tries', async () => {
    const calls: WireValue[] = []
    const server = await harness.requestServer(async (request) => {
      calls.push(request)
      // Answered only once the request has been asked for three times more: with two tries, the client asks a second
      // and a third time beyond them only because the server's notices (still in hand) handed those tries back.
      await until(() => server.endpoint.stats().coalesced >= 3, WAIT_MS, 'three more tries of the held request')
      return 'stored'
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    expect(await deadline(client.send('held', { timeout: 1000, tries: 2, patience: 4 }), WAIT_MS, 'the patient request')).toBe('stored')
    expect(calls).toEqual(['held'])
    expect(client.stats().inFlight).toBe(0)
  })
}

/** An aborted signal, and bad tries or timeout values refused before anything is sent. */
function timeoutOptionCases(harness: Harness): void {
  test('timeouts: an aborted signal rejects the request', async () => {
    const reached = deferred()
    const server = await harness.requestServer(async (request) => {
      if (request === 'quick') return 'answered'
      reached.resolve()
      return new Promise<WireValue>(() => {})
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    const controller = new AbortController()
    const pending = client.send('wait', { timeout: WAIT_MS, signal: controller.signal })
    await deadline(reached.promise, WAIT_MS, 'the request to reach the handler')
    controller.abort(new Error('caller gave up'))
    await expect(pending).rejects.toThrow('caller gave up')
    expect(client.stats().inFlight).toBe(0)
    // Another request on the same client is untouched, and a signal already aborted rejects at once.
    expect(await client.send('quick', { timeout: WAIT_MS })).toBe('answered')
    await expect(client.send('late', { signal: controller.signal })).rejects.toThrow('caller gave up')
    expect(client.stats().inFlight).toBe(0)
  })

  test('timeouts: tries and timeout are checked alike, a RangeError naming the bad value, before anything is sent', async () => {
    let calls = 0
    const server = await harness.requestServer(async () => {
      calls++
      return 'ok'
    })
    const { endpoint: client } = await harness.requestClient(server.port)
    const bad: Array<[SendOptions, string]> = [
      [{ tries: 0 }, 'tries must be a positive integer, got 0'],
      [{ tries: 2.5 }, 'tries must be a positive integer, got 2.5'],
      [{ tries: -1 }, 'tries must be a positive integer, got -1'],
      [{ timeout: 0 }, 'got 0'],
      [{ timeout: -100 }, 'got -100'],
      [{ timeout: Number.NaN }, 'got NaN'],
      [{ timeout: 2 ** 31 }, `got ${2 ** 31}`],
    ]
    for (const [options, message] of bad) {
      const error = await client.send('x', options).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(RangeError)
      expect((error as Error).message.endsWith(message)).toBe(true)
    }
    expect(client.stats().inFlight).toBe(0)
    expect(await client.send('valid', { tries: 1, timeout: WAIT_MS })).toBe('ok')
    expect(calls).toBe(1)
    // The same checks guard a client's defaults.
    const transport = await harness.transport()
    expect(() => transport.createRequestClient({ host: HOST, port: server.port, tries: 0 })).toThrow(new RangeError('tries must be a positive integer, got 0'))
    expect(() => transport.createRequestClient({ host: HOST, port: server.port, timeout: -1 })).toThrow(RangeError)
  })
}
