/**
 * A master built in the test from @brine/crypt and a real transport's servers: just enough of
 * docs/protocol.md (clear `_auth`, sealed requests acknowledged with a sealed `{ok: true}`,
 * sealed and signed publishes) to drive a real Minion over real sockets.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach } from 'vitest'
import { loadTransport } from '@brine/common'
import { loadConfig, type MinionConfig } from '@brine/config'
import { handleAuth, loadOrCreateKeys, MinionBoxes, PkiStore, sealPublish, SessionKeys, type KeyPair } from '@brine/crypt'
import type { BrokerOptions, EndpointStats, PublishServer, RequestServer, Transport } from '@brine/transport'
import type { WireValue } from '@brine/core'
import { freeLoopbackPort, NatsServerProcess } from '@brine/testkit'
import { deadline } from './modules-fixture.js'
import type { Minion } from '../src/minion.js'
import { Changes } from './changes.js'

export interface SealedLoad {
  id: string
  load: Record<string, unknown>
}

export class StandInMaster {
  readonly transport: Transport
  readonly keys: KeyPair
  readonly store: PkiStore
  readonly session = new SessionKeys()
  readonly boxes: MinionBoxes
  readonly host: string
  readonly retPort: number
  publishPort: number
  /** The publish port its auth replies name (default: the real one). */
  reportedPublishPort: number | undefined
  autoAccept: boolean
  /** Every sealed request opened, in arrival order. */
  readonly received: SealedLoad[] = []
  /** Each `_auth` reply's `ret`/`reason`. */
  readonly authReplies: string[] = []
  /** This master's clock (ms since the epoch): what its auth replies say and its publishes are stamped with. */
  now: () => number = Date.now
  /** How long its publishes stay valid, ms. */
  publishTtlMs = 60_000
  /** The session lifetime its auth replies name, ms (0: none). */
  sessionTtlMs = 0
  subscribes = 0
  /** What a sealed request's acknowledgement carries besides `ok: true` (default nothing), by load. */
  answer: (load: Record<string, unknown>) => Record<string, unknown> = () => ({})
  /** An error to answer an `_auth` with instead of handling it (default none), asked at each one. */
  refuseAuth: () => Error | undefined = () => undefined
  /** An error to answer a sealed request with, once opened, instead of taking it (default none), asked at each one. */
  refuseSealed: (load: Record<string, unknown>) => Error | undefined = () => undefined
  /**
   * What a sealed request's acknowledgement waits for once it is opened and taken (default nothing), asked at each one:
   * a master slow to take a request in.
   */
  holdSealed: (load: Record<string, unknown>) => Promise<void> | undefined = () => undefined
  /** The sealed loads refused by {@link refuseSealed}, in arrival order. */
  readonly refused: Record<string, unknown>[] = []
  #publisher!: PublishServer
  #requests: RequestServer | undefined
  readonly #changes = new Changes()

  /** The broker a NATS stand-in is on. */
  broker: BrokerOptions | undefined

  private constructor(transport: Transport, keys: KeyPair, store: PkiStore, host: string, retPort: number, publishPort: number, autoAccept: boolean) {
    this.transport = transport
    this.host = host
    this.keys = keys
    this.store = store
    this.retPort = retPort
    this.publishPort = publishPort
    this.autoAccept = autoAccept
    this.boxes = new MinionBoxes(keys.box.secretKey, async (id) => (await store.acceptedKeys(id))?.box)
  }

  /**
   * A master on `host` (default 127.0.0.1; any 127.0.0.0/8 address is loopback on Linux, so two
   * masters can share a port pair on two addresses) with its keys under `dir`/`name`-pki.
   */
  static async start(
    transportName: string,
    dir: string,
    options: { autoAccept: boolean; host?: string; name?: string; retPort?: number; publishPort?: number },
  ): Promise<StandInMaster> {
    const transport = await loadTransport(transportName)
    const pki = join(dir, `${options.name ?? 'master'}-pki`)
    const { keys } = await loadOrCreateKeys(pki, 'master')
    const store = await PkiStore.open(pki)
    const master = new StandInMaster(
      transport,
      keys,
      store,
      options.host ?? '127.0.0.1',
      options.retPort ?? (await freeLoopbackPort()),
      options.publishPort ?? (await freeLoopbackPort()),
      options.autoAccept,
    )
    master.broker = await brokerFor(transportName)
    await master.#startPublisher()
    await master.startRequests()
    return master
  }

  async #startPublisher(): Promise<void> {
    this.#publisher = this.transport.createPublishServer({ host: this.host, port: this.publishPort, ...this.#broker() })
    await this.#publisher.start()
    void this.#watchSubscribes(this.#publisher)
  }

  #broker(): { broker?: BrokerOptions } {
    return this.broker === undefined ? {} : { broker: this.broker }
  }

  /** Moves the publish server to `port` (a master restarted with another publish_port). */
  async movePublisher(port: number): Promise<void> {
    await this.#publisher.close()
    this.publishPort = port
    await this.#startPublisher()
  }

  async #watchSubscribes(publisher: PublishServer): Promise<void> {
    for await (const event of publisher.events()) {
      if (event.type === 'peer-subscribe') {
        this.subscribes++
        this.#notify()
      }
    }
  }

  #notify(): void {
    this.#changes.notify()
  }

  /** Resolves once `check()` returns something other than undefined; fails naming `what` after `ms`. */
  until<T>(check: () => T | undefined, what: string, ms = 8000): Promise<T> {
    return this.#changes.until(check, what, ms)
  }

  /** The sealed loads of `cmd` received so far (optionally of one jid). */
  loads(cmd: string, jid?: string): Record<string, unknown>[] {
    return this.received.filter((entry) => entry.load.cmd === cmd && (jid === undefined || entry.load.jid === jid)).map((entry) => entry.load)
  }

  waitForLoad(cmd: string, jid?: string, ms?: number): Promise<Record<string, unknown>> {
    return this.until(() => this.loads(cmd, jid)[0], `${cmd}${jid === undefined ? '' : ` of job ${jid}`} at the master`, ms)
  }

  waitSubscribed(count = 1): Promise<number> {
    return this.until(() => (this.subscribes >= count ? this.subscribes : undefined), `${count} publish subscription(s)`)
  }

  async #handle(request: WireValue): Promise<WireValue> {
    const { enc, load } = request as { enc?: unknown; load?: unknown }
    if (enc === 'clear') {
      const refusal = this.refuseAuth()
      if (refusal !== undefined) {
        this.authReplies.push(refusal.name)
        this.#notify()
        throw refusal
      }
      const outcome = await handleAuth(load, this.store, this.session, this.keys, {
        autoAccept: this.autoAccept,
        now: this.now(),
        publishPort: this.reportedPublishPort ?? this.publishPort,
        sessionTtlMs: this.sessionTtlMs,
      })
      this.authReplies.push(outcome.reply.ret ? 'accepted' : outcome.reply.reason)
      this.#notify()
      return outcome.reply
    }
    const opened = await this.boxes.open(request)
    const refusal = this.refuseSealed(opened.load as Record<string, unknown>)
    if (refusal !== undefined) {
      this.refused.push(opened.load as Record<string, unknown>)
      this.#notify()
      throw refusal
    }
    this.received.push({ id: opened.id, load: opened.load as Record<string, unknown> })
    this.#notify()
    await this.holdSealed(opened.load as Record<string, unknown>)
    return this.boxes.seal(opened.id, { ok: true, ...this.answer(opened.load as Record<string, unknown>) })
  }

  /** (Re)binds the request server on the same port. */
  async startRequests(): Promise<void> {
    const server = this.transport.createRequestServer({ host: this.host, port: this.retPort, ...this.#broker() })
    server.handle((request) => this.#handle(request))
    await server.start()
    this.#requests = server
  }

  /** The request server's counters (`coalesced`: tries of a request that came again while it was in hand). */
  requestStats(): EndpointStats | undefined {
    return this.#requests?.stats()
  }

  /** Takes the request server down (the master "goes away" for returns and auth). */
  async stopRequests(): Promise<void> {
    await this.#requests?.close()
    this.#requests = undefined
  }

  /** `load` as this master publishes it: stamped with its issue time and expiry (unless the load sets them). */
  stamped(load: Record<string, unknown>): Record<string, unknown> {
    const now = this.now()
    return { issued: now, expire: now + this.publishTtlMs, ...load }
  }

  /** Seals and signs `load` (stamped) under the current session key and publishes it. */
  async publish(load: Record<string, unknown>, topics?: string[]): Promise<void> {
    await this.publishRaw(sealPublish(this.stamped(load), this.session.current(), this.keys.sign.secretKey), topics)
  }

  async publishRaw(envelope: WireValue, topics?: string[]): Promise<void> {
    await this.#publisher.publish(envelope, topics === undefined ? {} : { topics })
  }

  async close(): Promise<void> {
    await Promise.all([this.#requests?.close(), this.#publisher.close()])
  }
}

let jidCounter = 0
/** A fresh jid in Salt's format (unique within this test process). */
export function nextJid(): string {
  const now = new Date()
  const stamp = now
    .toISOString()
    .replace(/[-:TZ.]/g, '')
    .slice(0, 14)
  return `${stamp}${String(++jidCounter).padStart(6, '0')}`
}

/** Salt's publish load for `fun`. */
export function job(fun: string, arg: unknown[] = [], target: { tgt?: string | string[]; tgt_type?: string } = {}): Record<string, unknown> {
  return { jid: nextJid(), fun, arg, tgt: target.tgt ?? '*', tgt_type: target.tgt_type ?? 'glob', ret: '', user: 'root' }
}

let natsServer: Promise<NatsServerProcess> | undefined

/** The broker of this test file's NATS cases (one nats-server, started on first use); nothing for the socket transports. */
export async function brokerFor(transportName: string): Promise<BrokerOptions | undefined> {
  if (transportName !== 'nats') return undefined
  return { servers: [(await (natsServer ??= NatsServerProcess.start())).url] }
}

/**
 * Kills the file's nats-server and starts it again on the same address: on NATS a link's connections are the
 * broker's, so this, not a master's restart, is what makes its clients reconnect.
 */
export async function restartNatsServer(): Promise<void> {
  const server = await natsServer
  if (server === undefined) throw new Error('no nats-server was started in this file')
  await server.stop()
  await server.restart()
}

/** Stops the file's nats-server, if one was started (a test file's afterAll). */
export async function stopNatsServer(): Promise<void> {
  const server = natsServer
  natsServer = undefined
  await (await server)?.close()
}

/**
 * A minion's config for the tests: `id` against `master` with quick timers (auth, acceptance
 * wait, return retries, reconnect), its keys in `<dir>/<name>-pki` and its cache in
 * `<dir>/<name>-cache` (`name` defaults to the id). A master given without `publishPort` leaves
 * `publish_port` out: the minion learns it from the auth reply.
 */
export async function testMinionConfig(
  transportName: string,
  dir: string,
  master: { host: string; retPort: number; publishPort?: number },
  id: string,
  options: { name?: string; extra?: Record<string, unknown> } = {},
): Promise<MinionConfig> {
  const name = options.name ?? id
  const { opts } = await loadConfig('minion', {
    configDir: join(dir, `${name}-etc`),
    overrides: {
      id,
      transport: transportName,
      // A NATS minion goes on this file's nats-server unless the caller names the broker its master is on.
      ...(transportName === 'nats' && options.extra?.['nats_servers'] === undefined ? { nats_servers: (await brokerFor(transportName))!.servers } : {}),
      master: master.host,
      master_port: master.retPort,
      ...(master.publishPort === undefined ? {} : { publish_port: master.publishPort }),
      pki_dir: join(dir, `${name}-pki`),
      cachedir: join(dir, `${name}-cache`),
      acceptance_wait_time: 0.1,
      random_reauth_delay: 0.1,
      auth_timeout: 1,
      return_retry_timer: 0.3,
      return_retry_timer_max: 0.3,
      return_retry_tries: 2,
      recon_default: 50,
      recon_max: 300,
      ...options.extra,
    },
  })
  return opts
}

/** What one test of a real Minion against a stand-in master holds: a temp dir, the master and the minion. */
export interface StandInFixture {
  dir: string
  master: StandInMaster | undefined
  minion: Minion | undefined
}

/**
 * Registers per-test setup and teardown (call inside a describe): a fresh temp dir before each test;
 * after it, the minion stopped, the master closed and the dir removed.
 */
export function useStandInFixture(prefix: string): StandInFixture {
  const fixture: StandInFixture = { dir: '', master: undefined, minion: undefined }
  beforeEach(async () => {
    fixture.dir = await mkdtemp(join(tmpdir(), prefix))
  })
  afterEach(async () => {
    await fixture.minion?.stop()
    await fixture.master?.close()
    fixture.minion = undefined
    fixture.master = undefined
    await rm(fixture.dir, { recursive: true, force: true })
  })
  return fixture
}
