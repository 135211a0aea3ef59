import { buildAuthRequest, generateKeys, PeerBox } from '@brine/crypt'
import { loadTransport } from '@brine/common'
import { clearRequest } from '@brine/protocol'
import type { WireValue } from '@brine/core'
import { deadline, deferred, portOf } from '@brine/testkit'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { isOperatorRequest } from '../src/index.js'
import { cleanups, natsFor, runCleanups, stopNatsServer, WAIT_MS } from './helpers.js'

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

afterAll(stopNatsServer)
afterEach(runCleanups)

const minionKeys = generateKeys()
const masterKeys = generateKeys()
const box = new PeerBox({ id: 'web1', role: 'minion', secretKey: minionKeys.box.secretKey, peerPublicKey: masterKeys.box.publicKey })
const sealedReturn = (n: number): WireValue =>
  box.seal({ cmd: '_return', id: 'web1', jid: '20261127035800123456', fun: 'test.ping', return: n }) as unknown as WireValue
const publish = clearRequest({ cmd: 'publish', key: 'root key', tgt: '*', fun: 'test.ping', arg: [] }) as unknown as WireValue

describe('isOperatorRequest: what the request servers serve before waiting minion requests', () => {
  it("picks the operator's clear commands and nothing a minion sends", () => {
    const operator = ['publish', 'runner', 'wheel', 'fire_event', 'mk_token', 'get_token', 'rm_token'].map((cmd) =>
      clearRequest({ cmd, key: 'root key', fun: 'test.ping' }),
    )
    for (const request of operator) expect(isOperatorRequest(request as unknown as WireValue)).toBe(true)
    const minions: unknown[] = [
      // A minion's authentication, its sealed return: the flood an operator's request must not wait behind.
      clearRequest(buildAuthRequest('web1', minionKeys)),
      sealedReturn(1),
      // Not a clear command at all: the adapter refuses these, and they gain no place in the lane either.
      { enc: 'clear', load: 'publish' },
      { enc: 'clear', load: { cmd: 7 } },
      { enc: 'clear' },
      ['clear', { cmd: 'publish' }],
      'publish',
      null,
    ]
    for (const request of minions) expect(isOperatorRequest(request as WireValue)).toBe(false)
  })
})

describe.each(TRANSPORTS)("the operator's lane over %s", (transport) => {
  it("a publish sent after a backlog full of minions' returns and _auths is served before all of them", async () => {
    const flood = 40
    const { broker } = await natsFor(transport)
    const transports = await loadTransport(transport)
    const seen: string[] = []
    const first = deferred()
    const gate = deferred<WireValue>()
    // One handler slot, held by the first return; the master's own choice of lane.
    const server = transports.createRequestServer({
      host: '127.0.0.1',
      port: 0,
      concurrency: 1,
      backlog: flood + 1,
      urgent: isOperatorRequest,
      ...(broker === undefined ? {} : { broker }),
    })
    server.handle(async (request) => {
      const load = (request as { load?: { cmd?: string } }).load
      seen.push(load?.cmd ?? 'sealed')
      if (seen.length > 1) return { ok: true }
      first.resolve()
      return gate.promise
    })
    cleanups.push(() => server.close())
    await deadline(server.start(), WAIT_MS, `the ${transport} request server to bind`)
    const client = transports.createRequestClient({ host: '127.0.0.1', port: portOf(server), timeout: WAIT_MS, ...(broker === undefined ? {} : { broker }) })
    cleanups.push(() => client.close())
    await client.start()
    const settle = (sending: Promise<WireValue>): Promise<unknown> => sending.catch((error: unknown) => error)
    const held = settle(client.send(sealedReturn(0)))
    await deadline(first.promise, WAIT_MS, 'the first return to take the one slot')
    // The stand-in flood, returns and _auths in turn, then the operator's publish: the backlog is full.
    const waiting = Array.from({ length: flood }, (_, n) =>
      settle(client.send(n % 2 === 0 ? sealedReturn(n + 1) : (clearRequest(buildAuthRequest('web1', minionKeys)) as unknown as WireValue))),
    )
    const published = client.send(publish)
    // One more is refused, so everything before it on this client has reached the server and waits.
    const refused = await deadline(settle(client.send(sealedReturn(flood + 1))), WAIT_MS, 'the request beyond the full backlog')
    expect(refused).toMatchObject({ remoteName: 'ServerBusyError' })
    gate.resolve({ ok: true })
    expect(await deadline(published, WAIT_MS, 'the publish')).toEqual({ ok: true })
    await deadline(Promise.all([held, ...waiting]), WAIT_MS, 'the flood to be served')
    expect(seen.slice(0, 2)).toEqual(['sealed', 'publish'])
    expect(seen.slice(2)).toEqual(Array.from({ length: flood }, (_, n) => (n % 2 === 0 ? 'sealed' : '_auth')))
  })
})
