/**
 * The minion over its links, on both transports: `master: [a, b]` with `master_type: str` (a
 * link, a pin file and a spool per master; a jid published by both runs once; a return goes to
 * the master whose publish it answers), and jobs that change their own arguments while other
 * minions of the same process, sharing one publish cache, run the same publish.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CryptCache, masterPinFile } from '@brine/crypt'
import { silentLogger } from '@brine/transport'
import type { MinionEvent } from '../src/lifecycle.js'
import { Minion, type MinionOptions } from '../src/minion.js'
import type { ModuleDefinition } from '../src/modules/types.js'
import { deadline } from './modules-fixture.js'
import { Recorder } from './recorder.js'
import { job, StandInMaster, testMinionConfig } from './stand-in-master.js'

/** A module that changes the list, the dict and the keyword argument it is given, as Python code may. */
const mutate: ModuleDefinition = {
  change: {
    doc: 'Appends to items, sets mapping.by and appends to extra, then returns all three.',
    args: ['items', 'mapping', 'extra'],
    defaults: { extra: null },
    run: async ([items, mapping, extra], _kwargs, ctx) => {
      ;(items as unknown[]).push(ctx.id)
      ;(mapping as Record<string, unknown>).by = ctx.id
      ;((mapping as { nested: unknown[] }).nested).push(ctx.id)
      ;(extra as unknown[] | null)?.push(ctx.id)
      return { items, mapping, extra }
    },
  },
}

describe.each(['zeromq', 'tcp'])('minion links over %s', (transportName) => {
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

  async function startMinion(id: string, to: StandInMaster, extra: Record<string, unknown> = {}, options: MinionOptions = {}): Promise<{ minion: Minion; recorder: Recorder<MinionEvent> }> {
    const opts = await testMinionConfig(transportName, dir, to, id, { extra })
    const minion = new Minion(opts, { logger: silentLogger, ...options })
    minions.push(minion)
    const recorder = new Recorder(minion)
    await minion.start()
    return { minion, recorder }
  }

  it('master_type str: one link per master, each with its own pin and spool; a jid published by both runs once and returns where it came from', async () => {
    const one = await startMaster({ name: 'one' })
    const two = await startMaster({ name: 'two', host: '127.0.0.2', retPort: one.retPort, publishPort: one.publishPort })
    const { minion, recorder } = await startMinion('multi', one, { master: ['127.0.0.1', '127.0.0.2'], master_type: 'str' })
    const names = [`127.0.0.1:${one.retPort}`, `127.0.0.2:${one.retPort}`]
    expect(minion.links.map((link) => link.master)).toEqual(names)
    for (const name of names) await recorder.waitFor('authenticated', (event) => event.master === name, `authenticated with ${name}`)
    await Promise.all([one.waitSubscribed(), two.waitSubscribed()])
    // Each master got the grains and the start event; each key is pinned in a file of its own.
    for (const master of [one, two]) {
      expect((await master.waitForLoad('_grains')).id).toBe('multi')
      expect(await master.waitForLoad('_minion_event')).toMatchObject({ id: 'multi' })
    }
    const pki = join(dir, 'multi-pki')
    expect(existsSync(join(pki, masterPinFile('127.0.0.1', one.retPort)))).toBe(true)
    expect(existsSync(join(pki, masterPinFile('127.0.0.2', one.retPort)))).toBe(true)
    expect(existsSync(join(pki, 'minion_master.pub'))).toBe(false)

    // The same jid from both masters: it runs once, and its return goes to the master that published it first.
    const both = job('test.echo', ['once'])
    await one.publish(both)
    expect((await one.waitForLoad('_return', both.jid as string)).return).toBe('once')
    await two.publish(both)
    const repeat = await recorder.waitFor('publish-ignored', (event) => event.jid === both.jid, 'the repeated jid ignored')
    expect(repeat).toMatchObject({ master: names[1], reason: 'duplicate jid' })
    expect(recorder.of('job-received').filter((event) => event.jid === both.jid)).toEqual([{ type: 'job-received', master: names[0], jid: both.jid, fun: 'test.echo' }])

    // A job only the second master publishes returns to the second master only.
    const onlyTwo = job('test.echo', ['second'])
    await two.publish(onlyTwo)
    expect((await two.waitForLoad('_return', onlyTwo.jid as string)).return).toBe('second')
    await recorder.waitFor('returned', (event) => event.jid === onlyTwo.jid, 'the second master acknowledging')
    expect(one.loads('_return', onlyTwo.jid as string)).toEqual([])
    expect(two.loads('_return', both.jid as string)).toEqual([])

    // While the second master is away its returns spool in its own directory; the first is untouched.
    await two.stopRequests()
    const away = job('test.echo', ['spooled'])
    await two.publish(away)
    const spooled = await recorder.waitFor('spooled', (event) => event.jid === away.jid, 'the return spooled for the second master')
    expect(spooled.master).toBe(names[1])
    expect(spooled.file).toBe(join(dir, 'multi-cache', 'minion', 'spool', `127.0.0.2-${one.retPort}`, `${away.jid as string}.msgpack`))
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
