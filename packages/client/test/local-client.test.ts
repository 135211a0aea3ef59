import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { FIND_JOB_LIST_MAX, loadTransport } from '@brine/common'
import { loadConfig, type MasterConfig } from '@brine/config'
import { PermissionDeniedError, type PublishLoad } from '@brine/protocol'
import { createRootKey, rootKeyPath, RootKeyError } from '@brine/crypt'
import { deadline } from '@brine/transport-compliance'
import type { RequestServer } from '@brine/transport'
import { freeLoopbackPort } from '@brine/testkit'
// Tests only: the real bus, so the client reads what a master would write.
import { EventBus } from '../../master/src/event-bus.js'
import { natsFor, stopNatsServer } from '../../master/test/helpers.js'
import type { CliReturn } from '../src/job.js'
import { LocalClient } from '../src/local-client.js'

const cleanups: Array<() => Promise<unknown>> = []
afterAll(stopNatsServer)
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

type Publish = Omit<PublishLoad, 'key'> & { key: string }
/** Decides the reply to one publish; may fire events on the bus first. */
type Script = (load: Publish, bus: EventBus, count: number) => { jid: string; minions: string[] }

/** Answers one runner request (`jobs.list_job`); absent, runner requests are refused. */
type Runner = (load: { fun: string; arg: unknown[] }) => unknown

interface StandIn {
  client: LocalClient
  opts: MasterConfig
  key: string
  /** Writes a new root key, as a restarted master does; the stand-in refuses the old one from then on. */
  renewKey: () => Promise<string>
  publishes: Publish[]
  runs: Array<{ fun: string; arg: unknown[] }>
  bus: EventBus
}

let jidCounter = 0
const nextJid = (): string => `20260101000000${String(++jidCounter).padStart(6, '0')}`

function fireReturn(bus: EventBus, jid: string, id: string, value: unknown, extra: Record<string, unknown> = {}): void {
  bus.fire(`salt/job/${jid}/ret/${id}`, { cmd: '_return', id, jid, fun: 'test.ping', fun_args: [], return: value, retcode: 0, success: true, ...extra })
}

/** A stand-in master: a RequestServer answering publishes by `script`, the real event bus, a root key. */
async function standIn(transportName: string, script: Script, runner?: Runner): Promise<StandIn> {
  const dir = await mkdtemp(join(tmpdir(), 'brine-lc-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  const cachedir = join(dir, 'cache')
  const sockDir = join(dir, 'sock')
  let key = await createRootKey(rootKeyPath(cachedir))
  const renewKey = async (): Promise<string> => (key = await createRootKey(rootKeyPath(cachedir)))
  const bus = new EventBus({ sockDir })
  await bus.start()
  cleanups.push(() => bus.close())
  const transport = await loadTransport(transportName)
  // On a broker the port names the service's subjects and binds nothing: a free one keeps files' stand-ins apart.
  const nats = await natsFor(transportName)
  const server: RequestServer = transport.createRequestServer({
    host: '127.0.0.1',
    port: nats.broker === undefined ? 0 : await freeLoopbackPort(),
    ...(nats.broker === undefined ? {} : { broker: nats.broker }),
  })
  const publishes: Publish[] = []
  const runs: Array<{ fun: string; arg: unknown[] }> = []
  server.handle(async (request) => {
    const { enc, load } = request as { enc: string; load: Publish }
    if (enc === 'clear' && (load.cmd as string) === 'runner' && load.key === key && runner !== undefined) {
      const run = load as unknown as { fun: string; arg: unknown[] }
      runs.push({ fun: run.fun, arg: run.arg })
      return { jid: nextJid(), return: runner(run) as never, success: true }
    }
    if (enc !== 'clear' || load.cmd !== 'publish') throw new Error('unexpected request')
    if (load.key !== key) throw new PermissionDeniedError('publish', 'the root key is missing or wrong')
    publishes.push(load)
    return script(load, bus, publishes.length)
  })
  await server.start()
  cleanups.push(() => server.close())
  const port = Number(server.address.split(':').pop())
  const { opts } = await loadConfig('master', {
    configDir: join(dir, 'etc'),
    overrides: {
      transport: transportName,
      interface: '127.0.0.1',
      ret_port: port,
      cachedir,
      sock_dir: sockDir,
      timeout: 5,
      gather_job_timeout: 10,
      ...nats.config,
    },
  })
  const client = new LocalClient({ opts })
  cleanups.push(() => client.close())
  return { client, opts, key, renewKey, publishes, runs, bus }
}

async function collect(iterable: AsyncIterable<CliReturn>): Promise<CliReturn[]> {
  const out: CliReturn[] = []
  for await (const item of iterable) out.push(item)
  return out
}

describe.each(['zeromq', 'tcp', 'nats'])('LocalClient over %s', (transportName) => {
  it('publishes with the root key and gathers returns from the bus', async () => {
    const { client, publishes } = await standIn(transportName, (load, bus) => {
      const jid = nextJid()
      // Fired before the publish is even answered: the client must already be listening.
      fireReturn(bus, jid, 'web1', true)
      fireReturn(bus, jid, 'db1', true, { out: 'nested' })
      return { jid, minions: ['web1', 'db1'] }
    })
    const result = await deadline(client.cmd('*', 'test.ping', [], { kwarg: { a: 1 }, timeout: 30_000 }), 10_000, 'cmd to return')
    expect(result).toEqual({ web1: true, db1: true })
    expect(publishes[0]).toMatchObject({ cmd: 'publish', tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: { a: 1 }, ret: '', timeout: 30 })
    expect(typeof publishes[0]?.user).toBe('string')
  })

  it("asks the bus for its jobs' returns only: a job's new event and audit line are not written to its connection", async () => {
    const { client, bus } = await standIn(transportName, (load, bus) => {
      const jid = nextJid()
      bus.fire(`salt/job/${jid}/new`, { jid, minions: ['web1'] })
      bus.fire('brine/audit/publish', { jid })
      fireReturn(bus, jid, 'web1', true)
      return { jid, minions: ['web1'] }
    })
    await client.connect()
    await deadline(
      (async () => {
        while (bus.narrowedSubscriberCount === 0) await new Promise((resolve) => setImmediate(resolve))
      })(),
      5000,
      "the bus to read the client's subscription",
    )
    expect(await deadline(client.cmd('*', 'test.ping', [], { timeout: 30_000 }), 10_000, 'cmd to return')).toEqual({ web1: true })
    expect(bus.skipped).toBe(2)
  })

  it('publishes with the root key it was given, without reading one from cachedir', async () => {
    const { opts, key, publishes } = await standIn(transportName, () => ({ jid: nextJid(), minions: [] }))
    const elsewhere = await mkdtemp(join(tmpdir(), 'brine-lc-nokey-'))
    cleanups.push(() => rm(elsewhere, { recursive: true, force: true }))
    // A cachedir with no .root_key: reading it would fail with RootKeyError.
    const client = new LocalClient({ opts: { ...opts, cachedir: elsewhere }, rootKey: key })
    cleanups.push(() => client.close())
    expect(await deadline(client.cmdAsync('*', 'test.ping'), 10_000, 'the publish to be answered')).toBe('')
    expect(publishes).toHaveLength(1)
    expect(publishes[0]?.key).toBe(key)
  })

  it('reads the root key again when a restarted master refuses the one it read, and sends the request once more', async () => {
    const { client, key, renewKey, publishes } = await standIn(transportName, () => ({ jid: nextJid(), minions: [] }))
    expect(await deadline(client.cmdAsync('*', 'test.ping'), 10_000, 'the first publish')).toBe('')
    const renewed = await renewKey()
    expect(await deadline(client.cmdAsync('*', 'test.ping'), 10_000, 'the publish after the key changed')).toBe('')
    expect(publishes.map((load) => load.key)).toEqual([key, renewed])
  })

  it('cmdIter yields Salt-shaped returns; cmdAsync gives the jid, or "" when nothing matched', async () => {
    let matched = true
    const { client } = await standIn(transportName, (_load, bus) => {
      const jid = nextJid()
      if (!matched) return { jid: '', minions: [] }
      fireReturn(bus, jid, 'web1', 'hello', { retcode: 3, out: 'txt' })
      return { jid, minions: ['web1'] }
    })
    const items = []
    for await (const item of client.cmdIter('web1', 'cmd.run', ['echo hello'], { tgtType: 'list' })) items.push(item)
    expect(items).toEqual([{ web1: { ret: 'hello', retcode: 3, jid: expect.any(String), out: 'txt' } }])
    expect(await client.cmdAsync('web1', 'test.ping')).toMatch(/^\d{20}$/)
    matched = false
    expect(await client.cmdAsync('nobody', 'test.ping')).toBe('')
  })

  it('extends the wait while find_job says the job is still running', async () => {
    let mainJid = ''
    const { client, publishes } = await standIn(transportName, (load, bus, count) => {
      const jid = nextJid()
      if (load.fun === 'saltutil.find_job') {
        if (count === 2) {
          // First round: slow is still running the job.
          fireReturn(bus, jid, 'slow', { jid: mainJid, fun: 'test.sleep' }, { fun: 'saltutil.find_job' })
        } else {
          // Second round: by now the real return has arrived.
          fireReturn(bus, mainJid, 'slow', 'done')
          fireReturn(bus, jid, 'slow', {}, { fun: 'saltutil.find_job' })
        }
        return { jid, minions: ['slow'] }
      }
      mainJid = jid
      fireReturn(bus, jid, 'web1', true)
      return { jid, minions: ['web1', 'slow'] }
    })
    const job = await client.runJob('*', 'test.sleep', [1], { listen: true })
    const { jid } = job
    const items = await deadline(collect(job.returns({ timeout: 50, gatherJobTimeout: 200 })), 10_000, 'the returns')
    expect(items.map((item) => [item.id, item.status])).toEqual([
      ['web1', 'returned'],
      ['slow', 'returned'],
    ])
    const findJobs = publishes.filter((load) => load.fun === 'saltutil.find_job')
    expect(findJobs).toHaveLength(2)
    expect(findJobs[0]).toMatchObject({ tgt: ['slow'], tgt_type: 'list', arg: [jid] })
  })

  it("asks 1,200 missing minions find_job without naming them all to each: by a glob job's own target, a list job's ids in lists of at most FIND_JOB_LIST_MAX", async () => {
    const minions = Array.from({ length: 1200 }, (_, index) => `m${index}`)
    const { client, publishes } = await standIn(transportName, (load) => {
      const jid = nextJid()
      if (load.fun === 'saltutil.find_job') return { jid, minions: load.tgt_type === 'list' ? (load.tgt as string[]) : minions }
      return { jid, minions }
    })
    for (const [tgt, tgtType] of [
      ['m*', 'glob'],
      [minions, 'list'],
    ] as const) {
      const job = await client.runJob(tgt, 'test.ping', [], { tgtType, listen: true })
      const items = await deadline(collect(job.returns({ timeout: 50, gatherJobTimeout: 100 })), 10_000, 'the returns')
      expect(items.filter((item) => item.status === 'missing').map((item) => item.id)).toEqual(minions)
    }
    const findJobs = publishes.filter((load) => load.fun === 'saltutil.find_job')
    expect(findJobs[0]).toMatchObject({ tgt: 'm*', tgt_type: 'glob' })
    expect(findJobs.slice(1).map((load) => [load.tgt_type, (load.tgt as string[]).length])).toEqual([
      ['list', FIND_JOB_LIST_MAX],
      ['list', FIND_JOB_LIST_MAX],
      ['list', 200],
    ])
    expect(findJobs.slice(1).flatMap((load) => load.tgt)).toEqual(minions)
  })

  it('reports a minion that never answers, and one that is not running the job, as missing', async () => {
    const { client } = await standIn(transportName, (load, bus) => {
      const jid = nextJid()
      if (load.fun === 'saltutil.find_job') {
        fireReturn(bus, jid, 'idle', {}, { fun: 'saltutil.find_job' })
        return { jid, minions: load.tgt as string[] }
      }
      fireReturn(bus, jid, 'web1', true)
      return { jid, minions: ['web1', 'ghost', 'idle'] }
    })
    const job = await client.runJob('*', 'test.ping', [], { listen: true })
    const { jid } = job
    const items = await deadline(collect(job.returns({ timeout: 50, gatherJobTimeout: 100 })), 10_000, 'the returns')
    expect(items).toEqual([
      expect.objectContaining({ id: 'web1', status: 'returned', ret: true }),
      { id: 'ghost', status: 'missing', jid },
      { id: 'idle', status: 'missing', jid },
    ])
  })

  it('yields a return the master stored but whose event never arrived, from the job cache, once per job, keeping retcode and success', async () => {
    // The stand-in stores `quiet`'s and `failed`'s returns (list_job answers them) but fires no event: a reader that fell behind.
    const { client, runs } = await standIn(
      transportName,
      (load, bus) => {
        const jid = nextJid()
        if (load.fun === 'saltutil.find_job') return { jid, minions: [] }
        fireReturn(bus, jid, 'web1', true)
        return { jid, minions: ['web1', 'quiet', 'ghost', 'failed'] }
      },
      (run) => ({
        jid: run.arg[0],
        Function: 'test.ping',
        Result: {
          web1: { return: true, retcode: 0, success: true },
          quiet: { return: 'stored' },
          failed: { return: 'boom', retcode: 2, success: false },
          other: { return: 'not asked for' },
        },
      }),
    )
    const job = await client.runJob('*', 'test.ping', [], { listen: true })
    const { jid } = job
    const items = await deadline(collect(job.returns({ timeout: 50, gatherJobTimeout: 100 })), 10_000, 'the returns')
    expect(items).toEqual([
      expect.objectContaining({ id: 'web1', status: 'returned', ret: true }),
      { id: 'quiet', status: 'returned', ret: 'stored', retcode: 0, jid, fromCache: true },
      { id: 'failed', status: 'returned', ret: 'boom', retcode: 2, success: false, jid, fromCache: true },
      { id: 'ghost', status: 'missing', jid },
    ])
    expect(runs).toEqual([{ fun: 'jobs.list_job', arg: [jid] }])
    expect(items[0]).not.toHaveProperty('fromCache')
  })

  it("reads list_job's outputter hint with a stored return, and reports missing as before when the lookup is refused", async () => {
    let refuse = false
    const { client } = await standIn(
      transportName,
      (load) => ({ jid: nextJid(), minions: load.fun === 'saltutil.find_job' ? [] : ['quiet'] }),
      (run) => {
        if (refuse) throw new Error('job cache unavailable')
        return { jid: run.arg[0], Result: { quiet: { return: { 'file_|-x_|-x_|-managed': { result: true } }, out: 'highstate' } } }
      },
    )
    const first = await client.runJob('*', 'state.apply', [], { listen: true })
    expect(await deadline(collect(first.returns({ timeout: 50, gatherJobTimeout: 100 })), 10_000, 'the returns')).toEqual([
      { id: 'quiet', status: 'returned', ret: { 'file_|-x_|-x_|-managed': { result: true } }, retcode: 0, jid: first.jid, out: 'highstate', fromCache: true },
    ])
    refuse = true
    const second = await client.runJob('*', 'state.apply', [], { listen: true })
    expect(await deadline(collect(second.returns({ timeout: 50, gatherJobTimeout: 100 })), 10_000, 'the returns')).toEqual([
      { id: 'quiet', status: 'missing', jid: second.jid },
    ])
  })

  it('ends the wait when the signal aborts, without markers', async () => {
    const { client } = await standIn(transportName, () => ({ jid: nextJid(), minions: ['ghost'] }))
    const controller = new AbortController()
    const job = await client.runJob('*', 'test.ping', [], { signal: controller.signal, listen: true })
    const gathering = collect(job.returns({ timeout: 60_000, signal: controller.signal }))
    controller.abort()
    expect(await deadline(gathering, 5000, 'the aborted wait to end')).toEqual([])
  })

  it("cmdSubset runs the function on a random pick of the minions whose sys.list_functions names it (Salt's cmd_subset)", async () => {
    const functions: Record<string, unknown> = {
      m1: ['test.ping', 'cmd.run'],
      m2: ['cmd.run'],
      m3: ['test.ping'],
      m4: "'sys.list_functions' is not available.",
    }
    const { client, publishes } = await standIn(transportName, (load, bus) => {
      const jid = nextJid()
      const ids = load.fun === 'sys.list_functions' ? Object.keys(functions) : (load.tgt as string[])
      for (const id of ids) fireReturn(bus, jid, id, load.fun === 'sys.list_functions' ? functions[id] : `ran on ${id}`)
      return { jid, minions: ids }
    })
    const picked = await deadline(
      client.cmdSubset('m*', 'test.ping', ['x'], { subset: 2, kwarg: { k: 1 }, ret: 'local_cache', timeout: 30_000 }),
      10_000,
      'cmdSubset',
    )
    // Only m1 and m3 have test.ping; the look-up carries the target, not the job's arguments or returners.
    expect(picked).toEqual({ m1: 'ran on m1', m3: 'ran on m3' })
    expect(publishes[0]).toMatchObject({ tgt: 'm*', tgt_type: 'glob', fun: 'sys.list_functions', arg: [], kwarg: {}, ret: '' })
    expect(publishes[1]).toMatchObject({ tgt_type: 'list', fun: 'test.ping', arg: ['x'], kwarg: { k: 1 }, ret: 'local_cache' })
    expect([...(publishes[1]?.tgt as string[])].sort()).toEqual(['m1', 'm3'])
    const one = await client.subsetOf('m*', 'test.ping', 1, { timeout: 30_000 })
    expect(one).toHaveLength(1)
    expect(['m1', 'm3']).toContain(one[0])
    // No minion has it: nothing published after the look-up.
    expect(await client.cmdSubset('m*', 'no.such', [], { timeout: 30_000 })).toEqual({})
    expect(publishes.map((load) => load.fun)).toEqual(['sys.list_functions', 'test.ping', 'sys.list_functions', 'sys.list_functions'])
  })
})

describe('LocalClient config', () => {
  it('says how to fix an unreadable root key', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-lc-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const { opts } = await loadConfig('master', { configDir: dir, overrides: { cachedir: join(dir, 'cache'), sock_dir: join(dir, 'sock') } })
    const client = new LocalClient({ opts })
    const error = await client.cmd('*', 'test.ping').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RootKeyError)
    expect((error as Error).message).toMatch(/\.root_key.*is the master running, and are you its user/)
  })
})
