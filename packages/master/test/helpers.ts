import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { acceptAuthReply, buildAuthRequest, generateKeys, openPublish, PeerBox, type KeyPair, type PublicKeys, type SessionKey } from '@brine/crypt'
import { loadTransport } from '@brine/common'
import { defaultsFor, type MasterConfig } from '@brine/config'
import { type BusEvent } from '@brine/protocol'
import type { BrokerOptions, PublishClient, PublishServer, RequestClient } from '@brine/transport'
import type { Logger, WireValue } from '@brine/core'
import { NatsServerProcess, freeLoopbackPort } from '@brine/testkit'
import { deadline } from '@brine/transport-compliance'
import { expect } from 'vitest'
import { Master, MemoryJobStore } from '../src/index.js'

export const WAIT_MS = 10_000

/** Cleanups run in reverse order after each test. */
export const cleanups: Array<() => Promise<unknown>> = []
export async function runCleanups(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
}

/** A short temp dir (unix socket paths must stay under 107 bytes), removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'bm-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

export async function masterConfig(dir: string, overrides: Record<string, unknown>): Promise<MasterConfig> {
  // A NATS master of a test names no broker of its own: it goes on the file's nats-server.
  const nats = typeof overrides['transport'] === 'string' && overrides['nats_servers'] === undefined ? (await natsFor(overrides['transport'])).config : {}
  return {
    ...defaultsFor('master'),
    ...nats,
    interface: '127.0.0.1',
    publish_port: await freeLoopbackPort(),
    ret_port: await freeLoopbackPort(),
    pki_dir: join(dir, 'pki'),
    cachedir: join(dir, 'cache'),
    sock_dir: join(dir, 's'),
    worker_threads: 0,
    ...overrides,
  } as MasterConfig
}

/** Records every bus event and waits for one by tag. */
export class EventLog {
  readonly events: BusEvent[] = []
  readonly #waiters: Array<{ tag: string; resolve: (event: BusEvent) => void }> = []
  constructor(master: Master) {
    master.bus.subscribe((event) => {
      this.events.push(event)
      for (const waiter of this.#waiters.filter((w) => w.tag === event.tag)) {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1)
        waiter.resolve(event)
      }
    })
  }
  tagged(tag: string): BusEvent[] {
    return this.events.filter((event) => event.tag === tag)
  }
  next(tag: string): Promise<BusEvent> {
    const seen = this.events.find((event) => event.tag === tag)
    if (seen !== undefined) return Promise.resolve(seen)
    return deadline(new Promise((resolve) => this.#waiters.push({ tag, resolve })), WAIT_MS, `bus event ${tag}`)
  }
}

/** Counts subscriptions seen by a publish server (TCP: the id; ZeroMQ: its hash, both not 'broadcast'). */
export function watchSubscribers(server: PublishServer): (count: number) => Promise<void> {
  let seen = 0
  const waiters: Array<{ count: number; resolve: () => void }> = []
  void (async () => {
    for await (const event of server.events()) {
      if (event.type !== 'peer-subscribe' || event.topic === 'broadcast') continue
      seen++
      for (const waiter of waiters.filter((w) => w.count <= seen)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve()
      }
    }
  })()
  return (count) =>
    count <= seen ? Promise.resolve() : deadline(new Promise<void>((resolve) => waiters.push({ count, resolve })), WAIT_MS, `${count} subscriber(s)`)
}

export interface MasterAddress {
  host: string
  publishPort: number
  retPort: number
  /** The broker a NATS master is on (a NATS fleet's `fleet.broker`). */
  broker?: BrokerOptions
}

/** Where hand-made clients reach `master`: its ports on loopback, and on NATS the broker it is on. */
export function addressOf(master: Master): MasterAddress {
  const { opts } = master
  const servers = opts.transport === 'nats' ? (opts as { nats_servers?: string[] }).nats_servers : undefined
  return { host: '127.0.0.1', publishPort: opts.publish_port, retPort: opts.ret_port, ...(servers === undefined ? {} : { broker: { servers } }) }
}

/**
 * How long a test's request may wait for the master's answer: a failure bound, not a timing. Requests that go to the
 * master's worker threads timed out at 5 s in a clean clone run beside other benches on this 2-core machine.
 */
const REQUEST_BOUND_MS = 30_000

/** A minion made of crypt and a transport: enough to drive the master's protocol by hand. */
export class FakeMinion {
  readonly keys: KeyPair = generateKeys()
  readonly received: WireValue[] = []
  session: SessionKey | undefined
  masterPub: PublicKeys | undefined
  box: PeerBox | undefined
  #waiters: Array<() => void> = []
  private constructor(
    readonly id: string,
    readonly pkiDir: string,
    readonly request: RequestClient,
    readonly publish: PublishClient,
  ) {}

  static async start(transportName: string, id: string, address: MasterAddress, pkiDir: string): Promise<FakeMinion> {
    const transport = await loadTransport(transportName)
    const broker = address.broker === undefined ? {} : { broker: address.broker }
    const request = transport.createRequestClient({ host: address.host, port: address.retPort, timeout: REQUEST_BOUND_MS, ...broker })
    const publish = transport.createPublishClient({ host: address.host, port: address.publishPort, id, ...broker })
    const minion = new FakeMinion(id, pkiDir, request, publish)
    cleanups.push(
      () => request.close(),
      () => publish.close(),
    )
    await request.start()
    await publish.start()
    void (async () => {
      for await (const load of publish) {
        minion.received.push(load)
        for (const wake of minion.#waiters.splice(0)) wake()
      }
    })()
    return minion
  }

  /** `_auth` (signed at `now`, default this host's clock); on acceptance keeps the session key and the master's keys. Returns the reply's result. */
  async auth(now?: number): Promise<{ ok: boolean; reason?: string }> {
    const request = buildAuthRequest(this.id, this.keys, now)
    const reply = await this.request.send({ enc: 'clear', load: request })
    const result = await acceptAuthReply(reply, request, this.keys, { pkiDir: this.pkiDir })
    if (!result.ok) return { ok: false, reason: result.reason }
    this.session = result.session
    this.masterPub = result.masterPub
    this.box = new PeerBox({ id: this.id, role: 'minion', secretKey: this.keys.box.secretKey, peerPublicKey: result.masterPub.box })
    return { ok: true }
  }

  /** Waits for the `count`th publish (1-based) and returns it raw. */
  async nthPublish(count: number): Promise<WireValue> {
    while (this.received.length < count) {
      await deadline(new Promise<void>((resolve) => this.#waiters.push(resolve)), WAIT_MS, `publish #${count} at minion ${this.id}`)
    }
    return this.received[count - 1]
  }

  open(envelope: WireValue): Record<string, unknown> {
    return openPublish(envelope, this.session!, this.masterPub!.sign) as Record<string, unknown>
  }

  /** Sends a sealed inner load (sealed with `box`, default this minion's) and opens the sealed reply. */
  async sealed(load: Record<string, unknown>, box: PeerBox = this.box!): Promise<Record<string, unknown>> {
    const reply = await this.request.send(box.seal(load))
    return box.open(reply) as Record<string, unknown>
  }

  returnJob(jid: string, value: unknown = true): Promise<Record<string, unknown>> {
    return this.sealed({ cmd: '_return', id: this.id, jid, fun: 'test.ping', fun_args: [], return: value, retcode: 0, success: true })
  }
}

/** A clear request client, as the local client sends. */
export async function clearClient(transportName: string, address: MasterAddress): Promise<RequestClient> {
  const transport = await loadTransport(transportName)
  const client = transport.createRequestClient({
    host: address.host,
    port: address.retPort,
    timeout: REQUEST_BOUND_MS,
    ...(address.broker === undefined ? {} : { broker: address.broker }),
  })
  cleanups.push(() => client.close())
  await client.start()
  return client
}

let natsServer: Promise<NatsServerProcess> | undefined

/**
 * The nats-server of this test file's NATS cases, started on first use (a test file's afterAll calls
 * {@link stopNatsServer}). The master keys for it and the broker options for hand-made clients.
 */
export async function natsFor(transport: string): Promise<{ config: Record<string, unknown>; broker?: BrokerOptions }> {
  if (transport !== 'nats') return { config: {} }
  const server = await (natsServer ??= NatsServerProcess.start())
  return { config: { nats_servers: [server.url] }, broker: { servers: [server.url] } }
}

export async function stopNatsServer(): Promise<void> {
  const server = natsServer
  natsServer = undefined
  await (await server)?.close()
}

/**
 * A started master over a temp dir. Its job cache is an injected MemoryJobStore, whose records are readable as
 * soon as they are handed over (local_cache's once on disk); test/job-cache.test.ts covers the master opening
 * the cache `master_job_cache` names.
 */
export async function startMaster(
  dir: string,
  overrides: Record<string, unknown>,
  options: { logger?: Logger; jobs?: MemoryJobStore; workerScript?: URL; workerStartTasks?: number } = {},
): Promise<{ master: Master; events: EventLog }> {
  const master = new Master(await masterConfig(dir, overrides), { jobs: new MemoryJobStore(), ...options })
  cleanups.push(() => master.stop())
  const events = new EventLog(master)
  await master.start()
  return { master, events }
}

/** A started master (auto_accept) with fake minions `ids`, each subscribed to its publish server and authenticated. */
export async function startMasterWithMinions(
  dir: string,
  transport: string,
  ids: readonly string[],
): Promise<{ master: Master; events: EventLog; minions: FakeMinion[] }> {
  const { master, events } = await startMaster(dir, { transport, auto_accept: true })
  const address = addressOf(master)
  const subscribers = watchSubscribers(master.endpoints[0]!.publish)
  const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
  await subscribers(ids.length)
  for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
  return { master, events, minions }
}
