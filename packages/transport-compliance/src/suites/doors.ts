import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import type { RequestServer, RequestServerOptions, TransportEvent } from '@brine/transport'
import { deadline } from '@brine/testkit'
import { HOST, WAIT_MS, type Harness, type TrackedServer } from '../harness/index.js'
import { Recorder } from '../harness/recorder.js'
import type { RawConnection } from '../setup.js'
import { complianceCase as test } from './case.js'

const MiB = 1024 * 1024

/** The reason the server gave for dropping `raw`, or a message saying there was none. */
function dropReason(events: readonly TransportEvent[], raw: RawConnection): string {
  const drop = events.find((event) => event.type === 'peer-drop' && event.peer === raw.localPeer())
  return drop?.type === 'peer-drop' ? drop.reason : `no drop for ${raw.localPeer()}`
}

/**
 * A raw peer that has completed its greeting: connected (ZeroMQ: handshake done) and one frame the
 * server has read (a byte msgpack never uses, so the server drops it and says so).
 */
export async function greetedPeer(harness: Harness, server: TrackedServer<RequestServer>, localAddress?: string): Promise<RawConnection> {
  const raw = harness.setup.connectRaw({ host: HOST, port: server.port, ...(localAddress === undefined ? {} : { localAddress }) })
  await deadline(raw.ready, WAIT_MS, 'a raw peer to connect')
  const mark = server.recorder.mark()
  raw.sendFrame(Buffer.from([0xc1]))
  await server.recorder.waitFor((event) => event.type === 'frame-drop', `the server to read the greeting frame of ${raw.localPeer()}`, {
    from: mark,
    ms: WAIT_MS,
  })
  return raw
}

/** A request server whose handler takes `'login'` as proof of who the peer is (`context.authenticated()`); answers `'in'`. */
export async function loginServer(
  harness: Harness,
  options: Partial<RequestServerOptions> = {},
): Promise<TrackedServer<RequestServer> & { logins: () => number }> {
  let logins = 0
  let poke = (): void => {}
  const server = await harness.requestServer(async (request, context) => {
    if (request === 'login') {
      context.authenticated?.()
      logins++
      poke()
    }
    return 'in'
  }, options)
  poke = () => server.recorder.poke()
  return { ...server, logins: () => logins }
}

/** A raw peer that has greeted and logged in: the request `'login'` in a hand-made envelope, handled. */
export async function authenticatedPeer(harness: Harness, server: Awaited<ReturnType<typeof loginServer>>, localAddress?: string): Promise<RawConnection> {
  const raw = harness.setup.connectRaw({ host: HOST, port: server.port, ...(localAddress === undefined ? {} : { localAddress }) })
  await deadline(raw.ready, WAIT_MS, 'a raw peer to connect')
  const before = server.logins()
  // [0, 1, 'login']: a request envelope around the string.
  raw.sendFrame(Buffer.from([0x93, 0x00, 0x01, 0xa5, ...Buffer.from('login')]))
  await server.recorder.until(() => server.logins() === before + 1, `the login of ${raw.localPeer()} to be handled`, WAIT_MS)
  return raw
}

/**
 * The eviction cases' broker equivalent. On a broker, connections are the broker's to admit (nats-server's
 * max_connections: the hardening case's broker equivalent checks that cap); a server holds none of its peers,
 * so there is nothing for it to evict. What eviction protects still holds, and is checked: with the server's
 * caps at `cap`, twice as many peers that never greeted and two that greeted but never authenticated take no
 * slot of it; a real client is answered, nobody is refused, and the authenticated peer is never dropped.
 */
async function brokerPeersHoldNoSlot(harness: Harness, cap: number): Promise<void> {
  const server = await loginServer(harness, { maxConnections: cap, maxConnectionsPerAddress: cap })
  const spoke = await authenticatedPeer(harness, server, '127.0.0.2')
  const crowd: RawConnection[] = []
  try {
    for (let i = 0; i < 2 * cap; i++) crowd.push(harness.setup.connectRaw({ host: HOST, port: server.port, localAddress: '127.0.0.2' }, { handshake: false }))
    await deadline(Promise.all(crowd.map((raw) => raw.ready)), WAIT_MS, 'the silent peers to connect')
    for (let i = 0; i < 2; i++) crowd.push(await greetedPeer(harness, server, '127.0.0.2'))
    const { endpoint: client } = await harness.requestClient(server.port)
    expect(await client.send('login', { timeout: WAIT_MS })).toBe('in')
    const stats = server.endpoint.stats()
    expect(stats.peersRefused).toBe(0)
    expect(stats.peersDropped).toBe(0)
    expect(spoke.isClosed).toBe(false)
    expect(await client.send('still in', { timeout: WAIT_MS })).toBe('in')
  } finally {
    for (const raw of [spoke, ...crowd]) raw.close()
  }
}

/**
 * The unix socket case's broker equivalent: a broker transport's servers are clients of the broker and own no
 * socket to put on a path, so the transport says so (`peerSockets: false`, whereupon the master serves its local
 * channel with a socket transport) and refuses a `path` at once, naming it, instead of serving the network's subject twice.
 */
async function brokerRefusesAPath(harness: Harness): Promise<void> {
  const transport = await harness.transport()
  expect(transport.peerSockets).toBe(false)
  const dir = await mkdtemp(join(tmpdir(), 'brine-door-'))
  const path = join(dir, 'ret.ipc')
  try {
    expect(() => transport.createRequestServer({ host: HOST, port: 0, path })).toThrow(path)
    expect(() => transport.createRequestClient({ host: HOST, port: 0, path })).toThrow(path)
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' })
    // The network server is unaffected: it answers as before.
    const server = await harness.requestServer(async (request) => ({ network: request }))
    const { endpoint: client } = await harness.requestClient(server.port)
    expect(await client.send('operator', { timeout: WAIT_MS })).toEqual({ network: 'operator' })
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/**
 * The doors of a server (issue 27, finding 4): deadlines a peer cannot stretch by trickling, eviction
 * of peers that never greeted when a connection cap is reached, and the unix socket channel that no
 * remote peer can fill.
 */
export function doorTests(harness: Harness): void {
  describe('doors', () => {
    doorTimeoutCases(harness)
    doorEvictionCases(harness)
    doorUnixSocketCases(harness)
  })
}

/** Peers that never finish a greeting or a frame are dropped at their timeouts; idle greeted clients stay. */
function doorTimeoutCases(harness: Harness): void {
  test('doors: a peer that never completes its greeting is dropped at handshake_timeout, whatever it trickles; a greeted client is kept', async () => {
    // The idle rule is off: only the greeting deadline can close these.
    const server = await harness.requestServer(async (request) => request, { idleTimeout: 0, frameTimeout: 0, handshakeTimeout: 300 })
    const { endpoint: client } = await harness.requestClient(server.port)
    expect(await client.send('first', { timeout: WAIT_MS })).toBe('first')
    const silent = harness.setup.connectRaw({ host: HOST, port: server.port }, { handshake: false })
    const trickler = harness.setup.connectRaw({ host: HOST, port: server.port }, { handshake: false })
    await deadline(Promise.all([silent.ready, trickler.ready]), WAIT_MS, 'the raw peers to connect')
    // One byte every 50 ms: never a whole greeting (a ZMTP signature, or a frame declared over max_frame_bytes).
    const trickle = setInterval(() => trickler.sendBytes(Buffer.from([0x61])), 50)
    try {
      await server.recorder.until(() => server.endpoint.stats().peersDropped === 2, 'the silent and the trickling peer to be dropped', WAIT_MS)
    } finally {
      clearInterval(trickle)
    }
    const drops = server.recorder.events
    expect(dropReason(drops, silent)).toMatch(/did not complete its greeting within 300 ms \(handshake_timeout; 0 bytes received\)/)
    expect(dropReason(drops, trickler)).toMatch(/did not complete its greeting within 300 ms \(handshake_timeout; [1-9]\d* bytes received\)/)
    // A broker's peer is the broker's client, not the server's: the server gives up its message, it cannot hang up on it.
    if (harness.setup.broker === undefined) await deadline(Promise.all([silent.closed, trickler.closed]), WAIT_MS, 'both raw peers to be disconnected')
    expect(await client.send('second', { timeout: WAIT_MS })).toBe('second')
    expect(client.stats().reconnects).toBe(0)
    // On a broker a subscriber is a connection of the broker's: the publish server hears of it only by its hello,
    // so there is no greeting of a subscriber for it to wait for; the request side above is the whole case there.
    if (harness.setup.broker !== undefined) return
    // A publish server alike: a connection that never says its hello (ZeroMQ: its handshake) is dropped.
    const publisher = await harness.publishServer({ idleTimeout: 0, frameTimeout: 0, handshakeTimeout: 300 })
    const mute = harness.setup.connectRaw({ host: HOST, port: publisher.port }, { role: 'publish', handshake: false })
    await deadline(mute.ready, WAIT_MS, 'the mute subscriber to connect')
    await publisher.recorder.until(() => publisher.endpoint.stats().peersDropped === 1, 'the mute subscriber to be dropped', WAIT_MS)
    expect(dropReason(publisher.recorder.events, mute)).toMatch(/did not complete its greeting within 300 ms \(handshake_timeout; 0 bytes received\)/)
    await deadline(mute.closed, WAIT_MS, 'the mute subscriber to be disconnected')
  })

  test('doors: a frame begun after the greeting is dropped at frame_timeout, however steadily it trickles; a client idle between frames is kept', async () => {
    const server = await harness.requestServer(async (request) => request, { idleTimeout: 0, handshakeTimeout: 0, frameTimeout: 300 })
    const { endpoint: client } = await harness.requestClient(server.port)
    expect(await client.send('first', { timeout: WAIT_MS })).toBe('first')
    const slowloris = await greetedPeer(harness, server)
    slowloris.startFrame(60 * MiB, 16)
    const trickle = setInterval(() => slowloris.sendBytes(Buffer.from([0x61])), 20)
    try {
      await server.recorder.until(() => server.endpoint.stats().peersDropped === 1, 'the trickling peer to be dropped', WAIT_MS)
    } finally {
      clearInterval(trickle)
    }
    expect(dropReason(server.recorder.events, slowloris)).toMatch(
      /did not complete its frame within 300 ms of its first byte \(frame_timeout; \d+ bytes of it held\)/,
    )
    if (harness.setup.broker === undefined) await deadline(slowloris.closed, WAIT_MS, 'the trickling peer to be disconnected')
    expect(await client.send('second', { timeout: WAIT_MS })).toBe('second')
    expect(client.stats().reconnects).toBe(0)
  })
}

/** At a connection cap, who is evicted for a newcomer: the ungreeted first, then the longest idle unauthenticated. */
function doorEvictionCases(harness: Harness): void {
  test('doors: at a connection cap the oldest peers that never greeted are evicted for a newcomer; greeted peers stay', async () => {
    if (harness.setup.broker !== undefined) {
      await brokerPeersHoldNoSlot(harness, 4)
      return
    }
    const server = await loginServer(harness, { maxConnections: 4, maxConnectionsPerAddress: 4 })
    const spoke = await authenticatedPeer(harness, server, '127.0.0.2')
    const silent: RawConnection[] = []
    for (let i = 0; i < 3; i++) {
      const raw = harness.setup.connectRaw({ host: HOST, port: server.port, localAddress: '127.0.0.2' }, { handshake: false })
      await deadline(raw.ready, WAIT_MS, `silent peer ${i} to connect`)
      silent.push(raw)
    }
    await server.recorder.until(() => server.endpoint.stats().peers === 4, 'the cap to be full')
    try {
      // The cap is full of peers that never greeted but one: a real client still gets in and is answered.
      const { endpoint: client } = await harness.requestClient(server.port)
      expect(await client.send('login', { timeout: WAIT_MS })).toBe('in')
      await deadline(silent[0]!.closed, WAIT_MS, 'the oldest silent peer to be evicted')
      expect(dropReason(server.recorder.events, silent[0]!)).toMatch(
        /^evicted after \d+ ms without completing its greeting, to admit a new connection at max_connections \(4\)$/,
      )
      expect(server.endpoint.stats().peersRefused).toBe(0)
      // Fill the cap with peers that authenticated: then a newcomer is refused, and none of them is evicted.
      await authenticatedPeer(harness, server, '127.0.0.3')
      await authenticatedPeer(harness, server, '127.0.0.3')
      await deadline(Promise.all(silent.map((raw) => raw.closed)), WAIT_MS, 'every silent peer to be evicted')
      const late = harness.setup.connectRaw({ host: HOST, port: server.port, localAddress: '127.0.0.4' }, { handshake: false })
      late.ready.catch(() => {})
      await server.recorder.until(() => server.endpoint.stats().peersRefused === 1, 'a newcomer to be refused at the cap of authenticated peers')
      expect(spoke.isClosed).toBe(false)
      expect(server.endpoint.stats().peersDropped).toBe(3)
      expect(await client.send('still in', { timeout: WAIT_MS })).toBe('in')
      late.close()
    } finally {
      for (const raw of [spoke, ...silent]) raw.close()
    }
  })

  test('doors: with none ungreeted, the longest idle peer that greeted but never authenticated is evicted; an authenticated one never is', async () => {
    if (harness.setup.broker !== undefined) {
      await brokerPeersHoldNoSlot(harness, 3)
      return
    }
    const server = await loginServer(harness, { maxConnections: 3, maxConnectionsPerAddress: 3 })
    const { endpoint: trusted } = await harness.requestClient(server.port)
    expect(await trusted.send('login', { timeout: WAIT_MS })).toBe('in')
    const idle = await greetedPeer(harness, server, '127.0.0.2')
    const lessIdle = await greetedPeer(harness, server, '127.0.0.2')
    expect(server.endpoint.stats().peers).toBe(3)
    try {
      const { endpoint: newcomer } = await harness.requestClient(server.port)
      expect(await newcomer.send('hello', { timeout: WAIT_MS })).toBe('in')
      await deadline(idle.closed, WAIT_MS, 'the longest idle unauthenticated peer to be evicted')
      expect(dropReason(server.recorder.events, idle)).toMatch(
        /^evicted, unauthenticated and idle for \d+ ms, to admit a new connection at max_connections \(3\)$/,
      )
      expect(lessIdle.isClosed).toBe(false)
      expect(await trusted.send('again', { timeout: WAIT_MS })).toBe('in')
      expect(trusted.stats().reconnects).toBe(0)
      expect(server.endpoint.stats().peersDropped).toBe(1)
    } finally {
      for (const raw of [idle, lessIdle]) raw.close()
    }
  })
}

/** The operator's door: a unix socket path that answers while the network caps are full. */
function doorUnixSocketCases(harness: Harness): void {
  test('doors: a request server on a unix socket path answers over it, owner-only, while the network caps are full', async () => {
    if (harness.setup.broker !== undefined) {
      await brokerRefusesAPath(harness)
      return
    }
    expect((await harness.transport()).peerSockets).not.toBe(false)
    const network = await loginServer(harness, { maxConnections: 2, maxConnectionsPerAddress: 2 })
    const peers = [await authenticatedPeer(harness, network, '127.0.0.2'), await authenticatedPeer(harness, network, '127.0.0.2')]
    const dir = await mkdtemp(join(tmpdir(), 'brine-door-'))
    const path = join(dir, 'ret.ipc')
    const transport = await harness.transport()
    const local = transport.createRequestServer({ host: HOST, port: 0, path })
    local.handle(async (request) => ({ local: request }))
    const recorder = new Recorder(local)
    const client = transport.createRequestClient({ host: HOST, port: 0, path })
    try {
      await deadline(local.start(), WAIT_MS, 'the unix socket server to bind')
      expect(local.address).toBe(`ipc://${path}`)
      expect((await stat(path)).mode & 0o777).toBe(0o600)
      // The network server is full of authenticated peers: one more is refused there.
      const refused = harness.setup.connectRaw({ host: HOST, port: network.port, localAddress: '127.0.0.3' }, { handshake: false })
      refused.ready.catch(() => {})
      await network.recorder.until(() => network.endpoint.stats().peersRefused === 1, 'the full network server to refuse a newcomer')
      await deadline(client.start(), WAIT_MS, 'the unix socket client to start')
      expect(await client.send('operator', { timeout: WAIT_MS })).toEqual({ local: 'operator' })
      expect(local.stats().peers).toBe(1)
      expect(recorder.events.some((event) => event.type === 'peer-refuse')).toBe(false)
      refused.close()
    } finally {
      await client.close()
      await local.close()
      for (const raw of peers) raw.close()
      await rm(dir, { recursive: true, force: true })
    }
  })
}
