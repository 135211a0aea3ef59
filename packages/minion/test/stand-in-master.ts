/**
 * A master built in the test from @brine/crypt and a real transport's servers: just enough of
 * docs/protocol.md (clear `_auth`, sealed requests acknowledged with a sealed `{ok: true}`,
 * sealed and signed publishes) to drive a real Minion over real sockets.
 */
import { join } from 'node:path'
import { loadTransport } from '@brine/common'
import { handleAuth, loadOrCreateKeys, MinionBoxes, PkiStore, sealPublish, SessionKeys, type KeyPair } from '@brine/crypt'
import type { PublishServer, RequestServer, Transport, WireValue } from '@brine/transport'
import { freeLoopbackPort } from '@brine/testkit'
import { deadline } from './modules-fixture.js'


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
  readonly retPort: number
  readonly publishPort: number
  autoAccept: boolean
  /** Every sealed request opened, in arrival order. */
  readonly received: SealedLoad[] = []
  /** Each `_auth` reply's `ret`/`reason`. */
  readonly authReplies: string[] = []
  subscribes = 0
  #publisher!: PublishServer
  #requests: RequestServer | undefined
  readonly #waiters = new Set<() => void>()

  private constructor(transport: Transport, keys: KeyPair, store: PkiStore, retPort: number, publishPort: number, autoAccept: boolean) {
    this.transport = transport
    this.keys = keys
    this.store = store
    this.retPort = retPort
    this.publishPort = publishPort
    this.autoAccept = autoAccept
    this.boxes = new MinionBoxes(keys.box.secretKey, async (id) => (await store.acceptedKeys(id))?.box)
  }

  static async start(transportName: string, dir: string, options: { autoAccept: boolean }): Promise<StandInMaster> {
    const transport = await loadTransport(transportName)
    const pki = join(dir, 'master-pki')
    const { keys } = await loadOrCreateKeys(pki, 'master')
    const store = await PkiStore.open(pki)
    const master = new StandInMaster(transport, keys, store, await freeLoopbackPort(), await freeLoopbackPort(), options.autoAccept)
    master.#publisher = transport.createPublishServer({ host: '127.0.0.1', port: master.publishPort })
    await master.#publisher.start()
    void master.#watchSubscribes()
    await master.startRequests()
    return master
  }

  async #watchSubscribes(): Promise<void> {
    for await (const event of this.#publisher.events()) {
      if (event.type === 'peer-subscribe') {
        this.subscribes++
        this.#notify()
      }
    }
  }

  #notify(): void {
    for (const waiter of this.#waiters) waiter()
  }

  /** Resolves once `check()` returns something other than undefined; fails naming `what` after `ms`. */
  async until<T>(check: () => T | undefined, what: string, ms = 8000): Promise<T> {
    let wake: () => void = () => {}
    const waiter = (): void => wake()
    this.#waiters.add(waiter)
    try {
      return await deadline(
        (async () => {
          for (;;) {
            const value = check()
            if (value !== undefined) return value
            await new Promise<void>((resolve) => (wake = resolve))
          }
        })(),
        ms,
        what,
      )
    } finally {
      this.#waiters.delete(waiter)
    }
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
      const outcome = await handleAuth(load, this.store, this.session, this.keys, { autoAccept: this.autoAccept })
      this.authReplies.push(outcome.reply.ret ? 'accepted' : outcome.reply.reason)
      this.#notify()
      return outcome.reply
    }
    const opened = await this.boxes.open(request)
    this.received.push({ id: opened.id, load: opened.load as Record<string, unknown> })
    this.#notify()
    return this.boxes.seal(opened.id, { ok: true })
  }

  /** (Re)binds the request server on the same port. */
  async startRequests(): Promise<void> {
    const server = this.transport.createRequestServer({ host: '127.0.0.1', port: this.retPort })
    server.handle((request) => this.#handle(request))
    await server.start()
    this.#requests = server
  }

  /** Takes the request server down (the master "goes away" for returns and auth). */
  async stopRequests(): Promise<void> {
    await this.#requests?.close()
    this.#requests = undefined
  }

  /** Seals and signs `load` under the current session key and publishes it. */
  async publish(load: Record<string, unknown>, topics?: string[]): Promise<void> {
    await this.publishRaw(sealPublish(load, this.session.current(), this.keys.sign.secretKey), topics)
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
  const stamp = now.toISOString().replace(/[-:TZ.]/g, '').slice(0, 14)
  return `${stamp}${String(++jidCounter).padStart(6, '0')}`
}

/** Salt's publish load for `fun`. */
export function job(fun: string, arg: unknown[] = [], target: { tgt?: string | string[]; tgt_type?: string } = {}): Record<string, unknown> {
  return { jid: nextJid(), fun, arg, tgt: target.tgt ?? '*', tgt_type: target.tgt_type ?? 'glob', ret: '', user: 'root' }
}
