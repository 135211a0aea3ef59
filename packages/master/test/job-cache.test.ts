import { existsSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { SaveJobOptions } from '@brine/common'
import { LocalJobCache, PostgresJobCache } from '@brine/returners'
import { Master, MasterStateError, MemoryJobStore } from '../src/index.js'
import { addressOf, cleanups, EventLog, FakeMinion, masterConfig, runCleanups, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

// A real server, set up by `npm run postgres` (scripts/ensure-postgres.sh). Missing server = failure, never a skip.
const PG_URL = process.env['BRINE_TEST_PG_URL'] ?? 'postgres://brine:brine@127.0.0.1:5432/brine_test'

async function started(overrides: Record<string, unknown>, options: ConstructorParameters<typeof Master>[1] = {}): Promise<{ master: Master; dir: string }> {
  const dir = await tempDir()
  const master = new Master(await masterConfig(dir, { transport: 'tcp', auto_accept: true, ...overrides }), options)
  cleanups.push(() => master.stop())
  await master.start()
  return { master, dir }
}

/** Publishes test.ping to one fake minion and stores its return through the master. */
async function oneJob(master: Master, dir: string, id: string): Promise<string> {
  const minion = await FakeMinion.start(
    'tcp',
    id,
    { host: '127.0.0.1', publishPort: master.opts.publish_port, retPort: master.opts.ret_port },
    join(dir, `m-${id}`),
  )
  await watchSubscribers(master.endpoints[0]!.publish)(1)
  expect(await minion.auth()).toEqual({ ok: true })
  const caller = await master.service.authorize({ cmd: 'publish', key: master.rootKey })
  const { jid, minions } = await master.service.publish(caller, { tgt: id, tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' })
  expect(minions).toEqual([id])
  await minion.nthPublish(1)
  expect(await minion.returnJob(jid, 'pong')).toEqual({ ok: true })
  return jid
}

describe('the master opens the job cache master_job_cache names', () => {
  it('local_cache under cachedir by default: returns survive the master', async () => {
    const { master, dir } = await started({})
    expect(master.jobs).toBeInstanceOf(LocalJobCache)
    expect(existsSync(join(master.opts.cachedir, 'jobs', '.lock'))).toBe(true)
    const jid = await oneJob(master, dir, 'web1')
    await master.stop()
    // The master closed its cache (lock gone); another owner reads what it stored.
    expect(existsSync(join(master.opts.cachedir, 'jobs', '.lock'))).toBe(false)
    const reopened = await new LocalJobCache({ cachedir: master.opts.cachedir }).open()
    cleanups.push(() => reopened.close())
    const job = await reopened.getJob(jid)
    expect(job?.minions).toEqual(['web1'])
    expect(job?.returns['web1']).toMatchObject({ return: 'pong', retcode: 0, success: true })
  })

  it('a second master on the same cachedir stops at the lock, naming it, and frees the ports it had taken', async () => {
    const { master, dir } = await started({})
    const second = new Master(await masterConfig(await tempDir(), { transport: 'tcp', auto_accept: true, cachedir: master.opts.cachedir }))
    cleanups.push(() => second.stop())
    await expect(second.start()).rejects.toMatchObject({
      name: 'JobCacheError',
      message: expect.stringMatching(/is in use by pid \d+ \(remove .*\.lock only if/),
    })
    for (const port of [second.opts.ret_port, second.opts.publish_port]) {
      const server = createServer()
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve))
      await new Promise((resolve) => server.close(resolve))
    }
    // The first master keeps its cache and goes on storing returns.
    expect(await master.jobs.getJob(await oneJob(master, dir, 'web1'))).toMatchObject({ minions: ['web1'] })
  })

  it('postgres when configured', async () => {
    const { master, dir } = await started({ master_job_cache: 'postgres', 'postgres.url': PG_URL })
    expect(master.jobs).toBeInstanceOf(PostgresJobCache)
    const jid = await oneJob(master, dir, `pg-${process.pid}`)
    // Another connection to the same database sees what the master stored.
    const other = await new PostgresJobCache({ connection: { url: PG_URL } }).open()
    cleanups.push(() => other.close())
    expect((await other.getJob(jid))?.returns[`pg-${process.pid}`]).toMatchObject({ return: 'pong', retcode: 0, success: true })
  })

  it('an injected cache is used as it is; before start() the master has no cache to show', async () => {
    const dir = await tempDir()
    const bare = new Master(await masterConfig(dir, { transport: 'tcp' }))
    expect(() => bare.jobs).toThrow(MasterStateError)
    expect(() => bare.service).toThrow(/master.service is available once start\(\) has resolved/)
    const jobs = new MemoryJobStore()
    const { master } = await started({}, { jobs })
    expect(master.jobs).toBe(jobs)
    expect(existsSync(join(master.opts.cachedir, 'jobs'))).toBe(false)
    await expect(master.start()).rejects.toThrow(MasterStateError)
  })

  it('a bad master_job_cache stops the start with the ConfigError naming the key', async () => {
    const dir = await tempDir()
    const master = new Master(await masterConfig(dir, { transport: 'tcp', master_job_cache: 'mysql' }))
    cleanups.push(() => master.stop())
    await expect(master.start()).rejects.toMatchObject({ name: 'ConfigError', key: 'master_job_cache' })
  })
})

/** Holds every FileHandle.datasync of this process until `release`: the disk's sync, made as slow as a test needs. */
async function holdSyncs(dir: string): Promise<{ release: () => void; restore: () => void }> {
  const probe = await open(join(dir, 'probe'), 'w')
  const prototype = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
  await probe.close()
  const original = prototype.datasync
  let release = (): void => {}
  const released = new Promise<void>((resolve) => (release = resolve))
  prototype.datasync = async function (this: unknown): Promise<void> {
    await released
    return original.call(this)
  }
  return { release, restore: () => (prototype.datasync = original) }
}

describe.each(TRANSPORTS)('local_cache over %s', (transport) => {
  it("saves a published job lazily (nobody waits for its sync, so it may share its first return's) and stores the return", async () => {
    const saved: Array<{ jid: string; lazy: boolean | undefined }> = []
    class RecordingStore extends MemoryJobStore {
      override async saveJob(jid: string, load: Record<string, unknown>, minions: readonly string[], options?: SaveJobOptions): Promise<void> {
        saved.push({ jid, lazy: options?.lazy })
        return super.saveJob(jid, load, minions)
      }
    }
    const jobs = new RecordingStore()
    const { master, dir } = await started({ transport }, { jobs })
    const minion = await FakeMinion.start(transport, 'web1', addressOf(master), join(dir, 'm-web1'))
    await watchSubscribers(master.endpoints[0]!.publish)(1)
    expect(await minion.auth()).toEqual({ ok: true })
    const caller = await master.service.authorize({ cmd: 'publish', key: master.rootKey })
    const { jid } = await master.service.publish(caller, { tgt: 'web1', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' })
    await minion.nthPublish(1)
    expect(await minion.returnJob(jid, 'pong')).toEqual({ ok: true })
    expect(saved).toEqual([{ jid, lazy: true }])
    expect((await jobs.getJob(jid))?.returns['web1']).toMatchObject({ return: 'pong' })
  })

  it("fires a return's event once its record is written; the minion's acknowledgement waits for the disk's sync", async () => {
    const { master, dir } = await started({ transport })
    const events = new EventLog(master)
    const minion = await FakeMinion.start(transport, 'web1', addressOf(master), join(dir, 'm-web1'))
    await watchSubscribers(master.endpoints[0]!.publish)(1)
    expect(await minion.auth()).toEqual({ ok: true })
    const caller = await master.service.authorize({ cmd: 'publish', key: master.rootKey })
    const { jid } = await master.service.publish(caller, { tgt: 'web1', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' })
    await minion.nthPublish(1)
    // The job's own record first: the return's write queues behind it.
    await master.service.settle()
    const sync = await holdSyncs(dir)
    try {
      let acknowledged = false
      const ack = minion.returnJob(jid, 'pong').finally(() => (acknowledged = true))
      expect((await events.next(`salt/job/${jid}/ret/web1`)).data).toMatchObject({ return: 'pong', success: true })
      // Readable from the cache already (a client catching up finds it), and not acknowledged until durable.
      expect((await master.jobs.getJob(jid))?.returns['web1']).toMatchObject({ return: 'pong' })
      expect(acknowledged).toBe(false)
      sync.release()
      expect(await ack).toEqual({ ok: true })
    } finally {
      sync.release()
      sync.restore()
    }
    expect(events.tagged(`salt/job/${jid}/ret/web1`)).toHaveLength(1)
  })
})
