/**
 * The minion over its links, on every transport: `master: [a, b]` with `master_type: str` (a
 * link, a pin file and a spool per master; a jid published by both runs once and returns to each;
 * a return goes to the master whose publish it answers), `master_type: failover` (one master at a
 * time, the alive check, returns owed to a dead master delivered when it is back, failback, a
 * `master_finger` per master), and jobs that change their own arguments while other
 * minions of the same process, sharing one publish cache, run the same publish.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ConfigError } from '@brine/config'
import { CryptCache, fingerprint, masterPinFile, publicKeysOf } from '@brine/crypt'
import { silentLogger } from '@brine/core'
import type { MinionEvent } from '@brine/link'
import { Minion, type MinionOptions } from '../src/minion.js'
import type { ModuleDefinition } from '../src/modules/types.js'
import { deadline } from './modules-fixture.js'
import { Recorder } from './recorder.js'
import { job, StandInMaster, stopNatsServer, testMinionConfig } from './stand-in-master.js'

afterAll(stopNatsServer)

/** A module that changes the list, the dict and the keyword argument it is given, as Python code may. */
const mutate: ModuleDefinition = {
  change: {
    doc: 'Appends to items, sets mapping.by and appends to extra, then returns all three.',
    args: ['items', 'mapping', 'extra'],
    defaults: { extra: null },
    run: async ([items, mapping, extra], _kwargs, ctx) => {
      ;(items as unknown[]).push(ctx.id)
      ;(mapping as Record<string, unknown>).by = ctx.id
      ;(mapping as { nested: unknown[] }).nested.push(ctx.id)
      ;(extra as unknown[] | null)?.push(ctx.id)
      return { items, mapping, extra }
    },
  },
}

/** The master a test minion's config names: its host and ports (a publish port left out is learnt from the auth reply). */
type MinionTo = { host: string; retPort: number; publishPort?: number }

describe.each(['zeromq', 'tcp', 'nats'])('minion links over %s', (transportName) => {
  let dir: string
  const masters: StandInMaster[] = []
  const minions: Minion[] = []

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-minion-links-'))
  })

  afterEach(async () => {
    await Promise.all(minions.splice(0).map((minion) => minion.stop()))
    await Promise.all(masters.splice(0).map((master) => master.close()))
    await rm(dir, { recursive: true, force: true })
  })

  async function startMaster(options: { host?: string; name?: string; retPort?: number; publishPort?: number } = {}): Promise<StandInMaster> {
    const master = await StandInMaster.start(transportName, dir, { autoAccept: true, ...options })
    masters.push(master)
    return master
  }

  /**
   * Two masters apart. On the socket transports the second binds the first one's ports on 127.0.0.2 (all of 127/8
   * is loopback); on a broker two masters on one port pair would be one queue group, so the second takes ports of
   * its own on the first one's broker and each `master` entry names its port (`host:port`), as Salt reads it.
   */
  async function twoMasters(): Promise<{
    one: StandInMaster
    two: StandInMaster
    entries: [string, string]
    at: [{ host: string; port: number }, { host: string; port: number }]
    minionTo: MinionTo
  }> {
    const one = await startMaster({ name: 'one' })
    if (transportName === 'nats') {
      const two = await startMaster({ name: 'two' })
      // Their publish ports differ too: the minion's config names none, and each link subscribes where its master's auth reply says.
      const minionTo = { host: one.host, retPort: one.retPort }
      return {
        one,
        two,
        entries: [`127.0.0.1:${one.retPort}`, `127.0.0.1:${two.retPort}`],
        at: [
          { host: '127.0.0.1', port: one.retPort },
          { host: '127.0.0.1', port: two.retPort },
        ],
        minionTo,
      }
    }
    const two = await startMaster({ name: 'two', host: '127.0.0.2', retPort: one.retPort, publishPort: one.publishPort })
    return {
      one,
      two,
      entries: ['127.0.0.1', '127.0.0.2'],
      at: [
        { host: '127.0.0.1', port: one.retPort },
        { host: '127.0.0.2', port: one.retPort },
      ],
      minionTo: one,
    }
  }

  async function startMinion(
    id: string,
    to: MinionTo,
    extra: Record<string, unknown> = {},
    options: MinionOptions = {},
  ): Promise<{ minion: Minion; recorder: Recorder<MinionEvent> }> {
    const opts = await testMinionConfig(transportName, dir, to, id, { extra })
    const minion = new Minion(opts, { logger: silentLogger, ...options })
    minions.push(minion)
    const recorder = new Recorder(minion)
    await minion.start()
    return { minion, recorder }
  }

  it('master_type str: one link per master, each with its own pin and spool; a jid published by both runs once and returns to each', async () => {
    const { one, two, entries, at, minionTo } = await twoMasters()
    const { minion, recorder } = await startMinion('multi', minionTo, { master: entries, master_type: 'str' })
    const names = at.map(({ host, port }) => `${host}:${port}`)
    expect(minion.links.map((link) => link.master)).toEqual(names)
    for (const name of names) await recorder.waitFor('authenticated', (event) => event.master === name, `authenticated with ${name}`)
    await Promise.all([one.waitSubscribed(), two.waitSubscribed()])
    // Each master got the grains and the start event; each key is pinned in a file of its own.
    for (const master of [one, two]) {
      expect((await master.waitForLoad('_grains')).id).toBe('multi')
      expect(await master.waitForLoad('_minion_event')).toMatchObject({ id: 'multi' })
    }
    const pki = join(dir, 'multi-pki')
    expect(existsSync(join(pki, masterPinFile(at[0].host, at[0].port)))).toBe(true)
    expect(existsSync(join(pki, masterPinFile(at[1].host, at[1].port)))).toBe(true)
    expect(existsSync(join(pki, 'minion_master.pub'))).toBe(false)

    // The same jid from both masters: it runs once, and each master that published it gets its return.
    const both = job('test.echo', ['once'])
    await one.publish(both)
    expect((await one.waitForLoad('_return', both.jid as string)).return).toBe('once')
    await two.publish(both)
    expect((await two.waitForLoad('_return', both.jid as string)).return).toBe('once')
    const joined = await recorder.waitFor('job-joined', (event) => event.jid === both.jid, 'the repeated jid joined')
    expect(joined).toEqual({ type: 'job-joined', master: names[1], jid: both.jid, fun: 'test.echo', returned: true })
    expect(recorder.of('job-received').filter((event) => event.jid === both.jid)).toEqual([
      { type: 'job-received', master: names[0], jid: both.jid, fun: 'test.echo' },
    ])
    // A master publishing the jid again gets nothing more.
    await one.publish(both)
    const repeat = await recorder.waitFor('publish-ignored', (event) => event.jid === both.jid, 'the repeat from the first master ignored')
    expect(repeat).toMatchObject({ master: names[0], reason: 'duplicate jid' })
    expect([one.loads('_return', both.jid as string), two.loads('_return', both.jid as string)].map((loads) => loads.length)).toEqual([1, 1])

    // A job only the second master publishes returns to the second master only.
    const onlyTwo = job('test.echo', ['second'])
    await two.publish(onlyTwo)
    expect((await two.waitForLoad('_return', onlyTwo.jid as string)).return).toBe('second')
    await recorder.waitFor('returned', (event) => event.jid === onlyTwo.jid, 'the second master acknowledging')
    expect(one.loads('_return', onlyTwo.jid as string)).toEqual([])

    // While the second master is away its returns spool in its own directory; the first is untouched.
    await two.stopRequests()
    const away = job('test.echo', ['spooled'])
    await two.publish(away)
    const spooled = await recorder.waitFor('spooled', (event) => event.jid === away.jid, 'the return spooled for the second master')
    expect(spooled.master).toBe(names[1])
    expect(spooled.file).toBe(join(dir, 'multi-cache', 'minion', 'spool', `${at[1].host}-${at[1].port}`, `${away.jid as string}.msgpack`))
  })

  it('master_type failover: one master at a time; a dead one is left at the alive check, its returns spooled and delivered when it is back, and master_failback returns to it', async () => {
    const { one, two, entries, at, minionTo } = await twoMasters()
    const names = at.map(({ host, port }) => `${host}:${port}`)
    const { minion, recorder } = await startMinion('fo', minionTo, {
      master: entries,
      master_type: 'failover',
      master_alive_interval: 0.2,
      master_failback: true,
      master_failback_interval: 0.3,
    })
    expect(await recorder.waitFor('master-selected')).toEqual({ type: 'master-selected', master: names[0], reason: 'start' })
    // Announced to the master it uses (Salt's start event after each tune-in); the other never heard from it.
    expect(await one.waitForLoad('_minion_event')).toMatchObject({ id: 'fo' })
    expect(two.authReplies).toEqual([])
    expect(minion.links.map((link) => link.master)).toEqual([names[0]])
    await one.waitSubscribed()

    // A job runs on the first master; that master's request server goes away while it runs.
    const slow = job('test.sleep', [0.6])
    await one.publish(slow)
    await recorder.waitFor('job-received', (event) => event.jid === slow.jid, 'the slow job started')
    await one.stopRequests()
    expect(await recorder.waitFor('master-dead')).toEqual({ type: 'master-dead', master: names[0] })
    expect(await recorder.waitFor('master-selected', (event) => event.reason === 'master-dead')).toEqual({
      type: 'master-selected',
      master: names[1],
      previous: names[0],
      reason: 'master-dead',
    })
    expect(await two.waitForLoad('_minion_event')).toMatchObject({ id: 'fo' })
    await two.waitSubscribed()
    // Jobs from the second master run now; the return of the first master's job is spooled for the first master.
    const onTwo = job('test.echo', ['on two'])
    await two.publish(onTwo)
    expect((await two.waitForLoad('_return', onTwo.jid as string)).return).toBe('on two')
    const spooled = await recorder.waitFor('spooled', (event) => event.jid === slow.jid, 'the slow return spooled')
    expect(spooled.master).toBe(names[0])
    expect(two.loads('_return', slow.jid as string)).toEqual([])

    // The first master is back: the link kept for it delivers the spooled return once, then failback uses it again.
    await one.startRequests()
    expect((await one.waitForLoad('_return', slow.jid as string)).return).toBe(true)
    expect(await recorder.waitFor('master-selected', (event) => event.reason === 'failback')).toEqual({
      type: 'master-selected',
      master: names[0],
      previous: names[1],
      reason: 'failback',
    })
    await recorder.waitFor('master-released', (event) => event.master === names[1], 'the link to the second master closed')
    expect(minion.links.map((link) => link.master)).toEqual([names[0]])
    const back = job('test.echo', ['back'])
    await one.publish(back)
    expect((await one.waitForLoad('_return', back.jid as string)).return).toBe('back')
    // One return (ZeroMQ may also hand over tries it had queued while the master was away; they are the same
    // return, which the master stores and fires once per jid and minion).
    expect(new Set(one.loads('_return', slow.jid as string).map((load) => JSON.stringify(load))).size).toBe(1)
    expect(recorder.of('job-received').map((event) => event.jid)).toEqual([slow.jid, onTwo.jid, back.jid])
  })

  it('master_finger per master: a master whose key does not match its own fingerprint is passed over', async () => {
    const { one, two, entries, at, minionTo } = await twoMasters()
    const names = at.map(({ host, port }) => `${host}:${port}`)
    const { recorder } = await startMinion('fingers', minionTo, {
      master: entries,
      master_type: 'failover',
      // The first master's entry is the second master's fingerprint: wrong for the first.
      master_finger: { [entries[0]]: fingerprint(publicKeysOf(two.keys)), [entries[1]]: fingerprint(publicKeysOf(two.keys)) },
    })
    const unavailable = await recorder.waitFor('master-unavailable')
    expect(unavailable.master).toBe(names[0])
    expect(unavailable.reason).toMatch(/^MasterKeyMismatchError: /)
    expect(await recorder.waitFor('master-selected')).toEqual({ type: 'master-selected', master: names[1], reason: 'start' })
    expect(existsSync(join(dir, 'fingers-pki', masterPinFile(at[0].host, at[0].port)))).toBe(false)
    expect(existsSync(join(dir, 'fingers-pki', masterPinFile(at[1].host, at[1].port)))).toBe(true)
  })

  it('refuses failover over a single master given as a string, and a master_finger list that does not fit', async () => {
    const master = await startMaster()
    const opts = await testMinionConfig(transportName, dir, master, 'bad', {})
    expect(() => new Minion({ ...opts, master_type: 'failover' }, { logger: silentLogger })).toThrow(
      "master_type failover needs master to be a list of masters to fail over between (master: [127.0.0.1, other]), got the single master '127.0.0.1'",
    )
    expect(() => new Minion({ ...opts, master: ['127.0.0.1', '127.0.0.2'], master_finger: ['aa'] }, { logger: silentLogger })).toThrow(ConfigError)
  })

  it('a job may change its list, dict and keyword arguments; another minion of the process running the same publish sees the originals', async () => {
    const master = await startMaster()
    const cache = new CryptCache()
    const first = await startMinion('first', master, {}, { modules: { mutate }, cryptCache: cache })
    const second = await startMinion('second', master, {}, { modules: { mutate }, cryptCache: cache })
    await deadline(Promise.all([first.minion.authenticated, second.minion.authenticated]), 8000, 'both minions authenticated')
    await master.waitSubscribed(2)

    const arg = [[1, 2], { a: 1, nested: ['n'] }]
    const change: Record<string, unknown> = { ...job('mutate.change', arg), kwarg: { extra: ['x'] } }
    await master.publish(change)
    const returns = await master.until(() => {
      const found = master.loads('_return', change.jid as string)
      return found.length === 2 ? found : undefined
    }, 'both returns of mutate.change')
    for (const id of ['first', 'second']) {
      expect(returns.find((ret) => ret.id === id)).toEqual({
        cmd: '_return',
        id,
        jid: change.jid,
        fun: 'mutate.change',
        fun_args: arg,
        return: { items: [1, 2, id], mapping: { a: 1, nested: ['n', id], by: id }, extra: ['x', id] },
        retcode: 0,
        success: true,
      })
    }
    // They did share one opened publish: the second minion took the first one's from the cache.
    expect(cache.stats().reusedPublishes).toBeGreaterThanOrEqual(1)
  })
})
