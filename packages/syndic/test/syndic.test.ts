import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { defaultsFor, type MasterConfig, type MinionConfig, type SyndicConfig } from '@brine/config'
import { tags, type BusEvent } from '@brine/protocol'
import { Master, rootCaller, type MasterOptions } from '@brine/master'
import { Minion } from '@brine/minion'
import { deadline } from '@brine/testkit'
import { masterConfig, natsFor, stopNatsServer } from '../../master/test/helpers.js'
import { Syndic, type SyndicEvent } from '../src/index.js'

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

afterAll(stopNatsServer)
const WAIT_MS = 20_000

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'bsy-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** Every event of a master's bus, and a bounded wait for one. */
class Bus {
  readonly events: BusEvent[] = []
  readonly #watchers = new Set<() => void>()
  constructor(master: Master) {
    master.bus.subscribe((event) => {
      this.events.push(event)
      for (const watcher of this.#watchers) watcher()
    })
  }
  until(predicate: (event: BusEvent) => boolean, what: string): Promise<BusEvent> {
    return deadline(
      new Promise<BusEvent>((resolve) => {
        const check = (): void => {
          const found = this.events.find(predicate)
          if (found === undefined) return
          this.#watchers.delete(check)
          resolve(found)
        }
        this.#watchers.add(check)
        check()
      }),
      WAIT_MS,
      what,
    )
  }
  count(tag: string): number {
    return this.events.filter((event) => event.tag === tag).length
  }
}

const masterOpts = async (dir: string, transport: string, extra: Record<string, unknown> = {}): Promise<MasterConfig> =>
  masterConfig(dir, { transport, auto_accept: true, ...(await natsFor(transport)).config, ...extra })

async function startMaster(opts: MasterConfig, options: MasterOptions = {}): Promise<{ master: Master; bus: Bus }> {
  const master = new Master(opts, options)
  const bus = new Bus(master)
  cleanups.push(() => master.stop())
  await master.start()
  return { master, bus }
}

async function startMinion(dir: string, id: string, master: MasterConfig, bus: Bus): Promise<Minion> {
  const opts = {
    ...defaultsFor('minion'),
    id,
    master: '127.0.0.1',
    master_port: master.ret_port,
    publish_port: master.publish_port,
    transport: master.transport,
    nats_servers: master.nats_servers,
    pki_dir: join(dir, id, 'pki'),
    cachedir: join(dir, id, 'cache'),
    sock_dir: join(dir, id, 's'),
    acceptance_wait_time: 0.2,
    random_reauth_delay: 0.2,
  } as MinionConfig
  const minion = new Minion(opts)
  cleanups.push(() => minion.stop())
  await minion.start()
  await bus.until((event) => event.tag === tags.minionStart(id), `minion ${id} to start`)
  return minion
}

/** A top master (order_masters) and a syndic node's master with minion m1, in a temp dir; the lower master's clock may be moved. */
async function startNode(transport: string, options: { top?: Record<string, unknown>; lower?: Record<string, unknown>; lowerNow?: () => number } = {}) {
  const dir = await tempDir()
  const topOpts = await masterOpts(join(dir, 'top'), transport, { order_masters: true, ...options.top })
  const lowerOpts = await masterOpts(join(dir, 'lower'), transport, options.lower)
  const top = await startMaster(topOpts)
  const lower = await startMaster(lowerOpts, options.lowerNow === undefined ? {} : { now: options.lowerNow })
  await startMinion(dir, 'm1', lowerOpts, lower.bus)
  return { dir, topOpts, lowerOpts, top, lower }
}

function syndicOpts(lower: MasterConfig, top: MasterConfig, dir: string): SyndicConfig {
  return {
    ...defaultsFor('syndic'),
    ...lower,
    id: 'syn1',
    pki_dir: join(dir, 'syndic-pki'),
    syndic_master: '127.0.0.1',
    syndic_master_port: top.ret_port,
    syndic_master_publish_port: top.publish_port,
    syndic_transport: top.transport,
    syndic_event_forward_timeout: 0.1,
    acceptance_wait_time: 0.2,
    random_reauth_delay: 0.2,
    return_retry_timer: 0.5,
    return_retry_timer_max: 0.5,
  } as unknown as SyndicConfig
}

/**
 * Starts the syndic and, once the top has accepted its key (auto_accept), marks it a syndic's there as the
 * operator's `brine-key --accept-syndic syn1` does: only then does the syndic's start event (asked again
 * until it is taken) reach the top's bus.
 */
async function startSyndic(opts: SyndicConfig, top: { master: Master; bus: Bus }, mark = 0): Promise<Syndic> {
  const syndic = new Syndic(opts)
  cleanups.push(() => syndic.stop())
  await syndic.start()
  const after = (event: BusEvent): boolean => top.bus.events.indexOf(event) >= mark
  await top.bus.until(
    (event) => after(event) && event.tag === tags.auth && event.data['id'] === 'syn1' && event.data['act'] === 'accept',
    'the top to accept syn1',
  )
  expect((await top.master.service.wheel(rootCaller(), { fun: 'key.accept_syndic', match: 'syn1' })).return).toEqual({ syndics: ['syn1'] })
  await top.bus.until((event) => after(event) && event.tag === tags.syndicStart('syn1'), 'salt/syndic/syn1/start at the top')
  return syndic
}

/** The first syndic event matching, bounded. */
async function syndicEvent(syndic: Syndic, predicate: (event: SyndicEvent) => boolean, what: string): Promise<SyndicEvent> {
  return deadline(
    (async () => {
      for await (const event of syndic.events()) if (predicate(event)) return event
      throw new Error(`the syndic stopped before ${what}`)
    })(),
    WAIT_MS,
    what,
  )
}

const topJob = (fun: string, arg: unknown[] = []) => ({ tgt: '*', tgt_type: 'glob' as const, fun, arg, kwarg: {}, ret: '', user: 'root' })

describe.each(TRANSPORTS)('the syndic over %s', (transport) => {
  it('passes a job from the top down with the same jid and brings announcements and returns back up, each return once', async () => {
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport)
    await startMinion(dir, 'm2', lowerOpts, lower.bus)
    const syndic = await startSyndic(syndicOpts(lowerOpts, topOpts, dir), top)

    const reply = await top.master.service.publish(rootCaller(), topJob('test.echo', ['up']))
    expect(reply).toMatchObject({ minions: [], syndics: { syn1: [] } })
    const announced = await top.bus.until((event) => event.tag === tags.syndicJobNew('syn1', reply.jid), 'the announcement')
    expect(announced.data).toMatchObject({ minions: ['m1', 'm2'], syndic_pending: [] })
    for (const id of ['m1', 'm2']) {
      expect((await top.bus.until((event) => event.tag === tags.jobReturn(reply.jid, id), `${id}'s return at the top`)).data).toMatchObject({
        return: 'up',
        fun: 'test.echo',
        fun_args: ['up'],
      })
    }
    // The lower master ran the same jid, and the job is finished with: nothing left open.
    expect(lower.bus.count(`salt/job/${reply.jid}/new`)).toBe(1)
    await syndicEvent(syndic, (event) => event.type === 'batch-forwarded' && event.returns === 2, 'the batch of 2 returns acknowledged')
    expect(syndic.openJobs).toBe(0)
    // The next job's returns: the first job's were not sent again meanwhile.
    // It carries metadata: passed down with the job, echoed by the minions below, and in the returns at the top.
    const metadata = { ticket: 8 }
    const next = await top.master.service.publish(rootCaller(), { ...topJob('test.ping'), metadata })
    for (const id of ['m1', 'm2']) {
      expect((await top.bus.until((event) => event.tag === tags.jobReturn(next.jid, id), 'the next job')).data).toMatchObject({ return: true, metadata })
      expect((await lower.bus.until((event) => event.tag === tags.jobReturn(next.jid, id), 'the next job below')).data).toMatchObject({ metadata })
    }
    expect(top.bus.count(tags.jobReturn(reply.jid, 'm1')) + top.bus.count(tags.jobReturn(reply.jid, 'm2'))).toBe(2)
  })

  it('keeps its returns while the top has not accepted it as a syndic, and delivers them once the operator does', async () => {
    const { dir, topOpts, lowerOpts, top } = await startNode(transport)
    const syndic = new Syndic(syndicOpts(lowerOpts, topOpts, dir))
    cleanups.push(() => syndic.stop())
    await syndic.start()
    await top.bus.until(
      (event) => event.tag === tags.auth && event.data['id'] === 'syn1' && event.data['act'] === 'accept',
      'the top to accept syn1 as a minion',
    )

    // Not a syndic's key yet: to the top it is an ordinary minion (expected to return), and no syndic is waited for.
    const reply = await top.master.service.publish(rootCaller(), topJob('test.echo', ['kept']))
    expect(reply).toMatchObject({ minions: ['syn1'], syndics: {} })
    await syndicEvent(syndic, (event) => event.type === 'batch-spooled' && event.returns === 1, "m1's return spooled, refused by the top")
    expect(top.bus.count(tags.jobReturn(reply.jid, 'm1'))).toBe(0)
    expect(top.bus.count(tags.syndicStart('syn1'))).toBe(0)

    await top.master.service.wheel(rootCaller(), { fun: 'key.accept_syndic', match: 'syn1' })
    await top.bus.until((event) => event.tag === tags.syndicStart('syn1'), 'salt/syndic/syn1/start, asked again')
    expect((await top.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's spooled return at the top")).data).toMatchObject({
      return: 'kept',
    })
    await syndicEvent(syndic, (event) => event.type === 'batch-forwarded' && event.fromSpool, 'the spooled batch acknowledged')
    expect(top.bus.count(tags.jobReturn(reply.jid, 'm1'))).toBe(1)
  })

  it('spools the returns while the top master is down and delivers them once it is back, stored once', async () => {
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport)
    const syndic = await startSyndic(syndicOpts(lowerOpts, topOpts, dir), top)

    const reply = await top.master.service.publish(rootCaller(), topJob('test.sleep', [1]))
    await top.bus.until((event) => event.tag === tags.syndicJobNew('syn1', reply.jid), 'the announcement')
    await top.master.stop()
    await syndicEvent(syndic, (event) => event.type === 'batch-spooled' && event.returns === 1, 'the return spooled')
    // The return's batch (and the announcement's, if its acknowledgement was lost as the master stopped).
    expect(syndic.spooledBatches).toBeGreaterThan(0)

    // The same master again: same config, keys and job cache.
    const again = await startMaster(topOpts)
    const back = await again.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's return at the restarted top")
    expect(back.data).toMatchObject({ id: 'm1', return: true, fun: 'test.sleep' })
    await syndicEvent(syndic, (event) => event.type === 'batch-forwarded' && event.fromSpool && syndic.spooledBatches === 0, 'the whole spool delivered')
    expect(Object.keys((await again.master.jobs.getJob(reply.jid))!.returns)).toEqual(['m1'])
  })

  it('a syndic that restarts reads back from its master the returns stored while it was away', async () => {
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport)
    const opts = syndicOpts(lowerOpts, topOpts, dir)
    const first = await startSyndic(opts, top)

    const reply = await top.master.service.publish(rootCaller(), topJob('test.sleep', [1]))
    await top.bus.until((event) => event.tag === tags.syndicJobNew('syn1', reply.jid), 'the announcement')
    await first.stop()
    // m1 returns to the lower master while no syndic reads its bus.
    await lower.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's return at the lower master")
    expect(top.bus.count(tags.jobReturn(reply.jid, 'm1'))).toBe(0)

    const mark = top.bus.events.length
    const second = await startSyndic(opts, top, mark)
    const reconciled = await syndicEvent(second, (event) => event.type === 'reconciled', 'the open job read back')
    expect(reconciled).toMatchObject({ jobs: 1, returns: 1 })
    expect((await top.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's return at the top")).data).toMatchObject({ return: true })
    await syndicEvent(second, (event) => event.type === 'batch-forwarded' && event.returns === 1, 'the read-back return acknowledged')
    expect(second.openJobs).toBe(0)
  })

  it('keeps passing jobs down after its own master restarted with a new root key', async () => {
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport)
    const syndic = await startSyndic(syndicOpts(lowerOpts, topOpts, dir), top)
    const oldKey = lower.master.rootKey
    await lower.master.stop()
    const again = await startMaster(lowerOpts)
    expect(again.master.rootKey).not.toBe(oldKey)
    const reply = await top.master.service.publish(rootCaller(), topJob('test.ping'))
    expect(
      await syndicEvent(syndic, (event) => event.type === 'relayed' && event.jid === reply.jid, 'the job passed down to the restarted master'),
    ).toMatchObject({ minions: ['m1'] })
    expect(again.bus.count(`salt/job/${reply.jid}/new`)).toBe(1)
  })

  it("does not pass down a job whose master_id is its own master's", async () => {
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport, { top: { master_id: 'loop' }, lower: { master_id: 'loop' } })
    const syndic = await startSyndic(syndicOpts(lowerOpts, topOpts, dir), top)
    const reply = await top.master.service.publish(rootCaller(), topJob('test.ping'))
    expect(await syndicEvent(syndic, (event) => event.type === 'relay-skipped', 'the job skipped')).toMatchObject({
      jid: reply.jid,
      reason: "master_id loop is this master's",
    })
    expect(lower.bus.count(`salt/job/${reply.jid}/new`)).toBe(0)
  })

  it("with its master's clock two minutes behind the top's: passes the top's jid down (within clock_skew), its master stamps the job in its own clock and stores its minions' returns; the top's publish port comes from the auth reply", async () => {
    // The lower master's jobs are valid 60 s in its own clock; the top's jid is 120 s ahead of that clock.
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport, { lower: { publish_ttl: 60 }, lowerNow: () => Date.now() - 120_000 })
    const { syndic_master_publish_port: _told, ...opts } = syndicOpts(lowerOpts, topOpts, dir) as SyndicConfig & { syndic_master_publish_port?: number }
    expect(opts.syndic_master_publish_port).toBeUndefined()
    await startSyndic(opts as SyndicConfig, top)

    const reply = await top.master.service.publish(rootCaller(), topJob('test.echo', ['skewed']))
    const below = await lower.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's return at the lower master")
    expect(below.data).toMatchObject({ jid: reply.jid, return: 'skewed' })
    expect(Object.keys((await lower.master.jobs.getJob(reply.jid))!.returns)).toEqual(['m1'])
    expect((await top.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's return at the top")).data).toMatchObject({ return: 'skewed' })
  })

  it("refuses to pass down a job whose jid is beyond its master's clock_skew, and tells the top it has no minion for it", async () => {
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport, { lower: { clock_skew: 60 }, lowerNow: () => Date.now() - 120_000 })
    const syndic = await startSyndic(syndicOpts(lowerOpts, topOpts, dir), top)

    const reply = await top.master.service.publish(rootCaller(), topJob('test.ping'))
    const failed = await syndicEvent(syndic, (event) => event.type === 'relay-failed' && event.jid === reply.jid, 'the relay refused')
    expect(failed).toMatchObject({ message: expect.stringMatching(/more than 60000 ms \(clock_skew\) ahead of the master's clock/) as string })
    expect((await top.bus.until((event) => event.tag === tags.syndicJobNew('syn1', reply.jid), 'the empty announcement')).data).toMatchObject({
      minions: [],
      syndic_pending: [],
    })
    expect(lower.bus.count(`salt/job/${reply.jid}/new`)).toBe(0)
  })

  it("with its master's clock two minutes ahead of the top's and publish_ttl 60: the job is stamped again in that clock, so its minions run it", async () => {
    // Had the top's expiry (its now + 60 s) travelled down, it would have passed a minute ago in this clock.
    const { dir, topOpts, lowerOpts, top, lower } = await startNode(transport, {
      top: { publish_ttl: 60 },
      lower: { publish_ttl: 60 },
      lowerNow: () => Date.now() + 120_000,
    })
    await startSyndic(syndicOpts(lowerOpts, topOpts, dir), top)

    const reply = await top.master.service.publish(rootCaller(), topJob('test.echo', ['fresh']))
    expect((await top.bus.until((event) => event.tag === tags.jobReturn(reply.jid, 'm1'), "m1's return at the top")).data).toMatchObject({ return: 'fresh' })
    expect(lower.bus.count(tags.jobReturn(reply.jid, 'm1'))).toBe(1)
  })
})
