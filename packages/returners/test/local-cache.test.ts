import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { statSync } from 'node:fs'
import { appendFile, mkdir, mkdtemp, open, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createLogger, type Logger } from '@brine/core'
import { deadline } from '@brine/transport-compliance'
import { FutureJidError, LocalJobCache } from '../src/index.js'
import { bootId, processStartTicks } from '../src/process-identity.js'
import { jidAt, jobCacheContract, ret } from './contract.js'

const here = fileURLToPath(new URL('.', import.meta.url))
const packagesDir = join(here, '..', '..')

async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'brine-local-cache-'))
}

jobCacheContract(
  'LocalJobCache',
  async () => {
    const cachedir = await tempDir()
    const cache = await new LocalJobCache({ cachedir }).open()
    return {
      cache,
      cleanup: async () => {
        await cache.close()
        await rm(cachedir, { recursive: true, force: true })
      },
    }
  },
  { sharedStore: false },
)

jobCacheContract(
  'LocalJobCache (index rebuilt in the background)',
  async () => {
    const cachedir = await tempDir()
    const cache = await new LocalJobCache({ cachedir, indexInBackground: true }).open()
    return {
      cache,
      cleanup: async () => {
        await cache.close()
        await rm(cachedir, { recursive: true, force: true })
      },
    }
  },
  { sharedStore: false },
)

describe('LocalJobCache indexInBackground', () => {
  it('answers calls made at once after open() from the rebuilt index', async () => {
    const cachedir = await tempDir()
    try {
      const jids = Array.from({ length: 20 }, (_, index) => jidAt('2024-07-03T00:00:00Z', index + 1))
      const first = await new LocalJobCache({ cachedir }).open()
      for (const jid of jids) {
        await first.saveJob(jid, { jid, fun: 'test.ping' }, ['a', 'b'])
        await Promise.all(['a', 'b'].map((id) => first.saveReturn(jid, id, ret(jid, id))))
      }
      await first.close()
      const cache = await new LocalJobCache({ cachedir, indexInBackground: true }).open()
      try {
        // Issued before the index can have been rebuilt: each waits for it.
        const [again, job, listed] = await Promise.all([cache.saveReturn(jids[0]!, 'a', ret(jids[0]!, 'a')), cache.getJob(jids[19]!), cache.listJobs()])
        expect(again).toBe(false)
        expect(job?.returns).toEqual({ a: ret(jids[19]!, 'a'), b: ret(jids[19]!, 'b') })
        expect(listed).toHaveLength(20)
        await expect(cache.ready()).resolves.toBeUndefined()
      } finally {
        await cache.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('rejects every call, naming the reason, when the index cannot be rebuilt', async () => {
    const cachedir = await tempDir()
    try {
      // A directory where a segment file should be: opening it for writing fails (EISDIR).
      await mkdir(join(cachedir, 'jobs', '20240704.log'), { recursive: true })
      await expect(new LocalJobCache({ cachedir }).open()).rejects.toThrow(/EISDIR|illegal operation on a directory/)
      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir, logger, indexInBackground: true }).open()
      try {
        const jid = jidAt('2024-07-04T00:00:00Z', 1)
        await expect(cache.saveReturn(jid, 'a', ret(jid, 'a'))).rejects.toThrow(/index of .* could not be rebuilt/)
        await expect(cache.getJob(jid)).rejects.toThrow(/could not be rebuilt/)
        expect(lines.join('')).toMatch(/could not be rebuilt/)
      } finally {
        await cache.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })
})

/** A logger that keeps its lines, to assert on warnings. */
function capture(): { logger: Logger; lines: string[] } {
  const lines: string[] = []
  return { logger: createLogger({ level: 'debug', write: (line) => lines.push(line) }), lines }
}

/** Runs `body` with a fresh cachedir and a cache opened on it, closing and removing both afterwards. */
async function withCache(body: (cache: LocalJobCache, cachedir: string) => Promise<void>): Promise<void> {
  const cachedir = await tempDir()
  const cache = await new LocalJobCache({ cachedir }).open()
  try {
    await body(cache, cachedir)
  } finally {
    await cache.close()
    await rm(cachedir, { recursive: true, force: true })
  }
}

/** A pid that is certainly not running: a child that has already exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', ''])
  if (child.pid === undefined) throw new Error('could not start a child process to get a dead pid')
  return child.pid
}

/** Holds every FileHandle.datasync of this process until `release` (or fails the first with `failWith`); `calls` counts them. */
async function holdSyncs(cachedir: string, failWith?: Error): Promise<{ held: Promise<void>; release: () => void; restore: () => void; calls: () => number }> {
  const probe = await open(join(cachedir, 'probe'), 'w')
  const prototype = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
  await probe.close()
  const original = prototype.datasync
  let release = (): void => {}
  const released = new Promise<void>((resolve) => (release = resolve))
  let reached = (): void => {}
  const held = new Promise<void>((resolve) => (reached = resolve))
  let failed = false
  let calls = 0
  prototype.datasync = async function (this: unknown): Promise<void> {
    calls++
    reached()
    await released
    if (failWith !== undefined && !failed) {
      failed = true
      throw failWith
    }
    return original.call(this)
  }
  return { held, release, restore: () => (prototype.datasync = original), calls: () => calls }
}

describe('LocalJobCache on disk', () => {
  it('appends jobs and returns to cachedir/jobs/<day>.log (0600, directory 0700) and rebuilds its index on open', async () => {
    const cachedir = await tempDir()
    try {
      const cache = await new LocalJobCache({ cachedir }).open()
      const jid = jidAt('2024-05-06T07:08:09Z', 10)
      const other = jidAt('2024-05-07T00:00:00Z', 11)
      const load = { jid, fun: 'test.ping', tgt: 'm*', user: 'root' }
      await cache.saveJob(jid, load, ['m1', 'm2'])
      await cache.saveReturn(jid, 'm1', ret(jid, 'm1', { big: 'x'.repeat(5000) }))
      await cache.saveReturn(jid, 'm2', ret(jid, 'm2'))
      await cache.saveReturn(other, 'm1', ret(other, 'm1'))
      const jobs = join(cachedir, 'jobs')
      expect((await readdir(jobs)).sort()).toEqual(['.lock', '20240506.log', '20240507.log'])
      // The pid on the first line, then what tells this process from a later one with the same pid.
      expect((await readFile(join(jobs, '.lock'), 'utf8')).split('\n')[0]).toBe(String(process.pid))
      expect(await readFile(join(jobs, '.lock'), 'utf8')).toMatch(/^\d+\nstart=\d+\nboot=[0-9a-f-]+\n$/)
      expect((await stat(jobs)).mode & 0o777).toBe(0o700)
      for (const name of ['20240506.log', '20240507.log']) expect((await stat(join(jobs, name))).mode & 0o777).toBe(0o600)
      await cache.close()
      // The index persisted at close beside the segments (see 'LocalJobCache persisted index').
      expect((await readdir(jobs)).sort()).toEqual(['20240506.log', '20240507.log', 'index'])

      const again = await new LocalJobCache({ cachedir }).open()
      try {
        expect(await again.getJob(jid)).toEqual({
          jid,
          load,
          minions: ['m1', 'm2'],
          returns: { m1: ret(jid, 'm1', { big: 'x'.repeat(5000) }), m2: ret(jid, 'm2') },
        })
        expect((await again.listJobs()).map((j) => j.jid)).toEqual([other, jid])
        expect(await again.saveReturn(jid, 'm2', ret(jid, 'm2', 'again'))).toBe(false)
      } finally {
        await again.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('refuses returns dated beyond maxFutureMs for jobs it does not hold, before opening a file: 1,100 future days create no files', async () => {
    const cachedir = await tempDir()
    const now = Date.parse('2026-11-23T12:00:00Z')
    const cache = await new LocalJobCache({ cachedir, maxFutureMs: 300_000, now: () => now }).open()
    try {
      const jobs = join(cachedir, 'jobs')
      const day = 86_400_000
      const refused: unknown[] = []
      for (let days = 1; days <= 1100; days++) {
        const jid = jidAt(new Date(now + days * day).toISOString(), days)
        refused.push(await cache.saveReturn(jid, 'm1', ret(jid, 'm1')).catch((error: unknown) => error))
      }
      expect(refused.every((error) => error instanceof FutureJidError)).toBe(true)
      expect((refused[0] as FutureJidError).message).toMatch(
        /jid \d{20} is dated 2026-11-24T12:00:00\.000Z, more than 300000 ms \(clock_skew\) ahead of this master's clock/,
      )
      expect(await readdir(jobs)).toEqual(['.lock'])
      expect(await cache.newestJid()).toBeUndefined()

      // Within the skew is fine.
      const withinSkew = jidAt(new Date(now + 200_000).toISOString(), 2)
      expect(await cache.saveReturn(withinSkew, 'm1', ret(withinSkew, 'm1'))).toBe(true)
      expect((await readdir(jobs)).sort()).toEqual(['.lock', '20261123.log'])
      // A job the master published (its jids run ahead of a clock set back) is taken, and its returns with it,
      // while it is being written and after; the limit then counts from it.
      const ahead = jidAt(new Date(now + 3_600_000).toISOString(), 3)
      const [, early] = await Promise.all([cache.saveJob(ahead, { jid: ahead, fun: 'test.ping' }, ['m1']), cache.saveReturn(ahead, 'm1', ret(ahead, 'm1'))])
      expect(early).toBe(true)
      expect(await cache.saveReturn(ahead, 'm2', ret(ahead, 'm2'))).toBe(true)
      const justAfter = jidAt(new Date(now + 3_700_000).toISOString(), 4)
      expect(await cache.saveReturn(justAfter, 'm1', ret(justAfter, 'm1'))).toBe(true)
      await expect(cache.saveReturn(jidAt(new Date(now + 2 * 3_600_000).toISOString(), 5), 'm1', ret(ahead, 'm1'))).rejects.toBeInstanceOf(FutureJidError)
    } finally {
      await cache.close()
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('reads back returns interleaved with other job records, including one larger than a read span', async () => {
    await withCache(async (cache) => {
      const a = jidAt('2024-05-08T00:00:00Z', 1)
      const b = jidAt('2024-05-08T00:00:01Z', 2)
      const value = (jid: string, i: number): unknown => (jid === a && i === 7 ? 'y'.repeat(5 << 20) : `${jid}/${i}`)
      for (let i = 0; i < 30; i++) {
        await Promise.all([a, b].map((jid) => cache.saveReturn(jid, `m${i}`, ret(jid, `m${i}`, value(jid, i)))))
      }
      for (const jid of [a, b]) {
        const returns = (await cache.getJob(jid))?.returns ?? {}
        expect(Object.keys(returns)).toEqual(Array.from({ length: 30 }, (_, i) => `m${i}`))
        for (let i = 0; i < 30; i++) expect(returns[`m${i}`]?.return, `${jid} m${i}`).toEqual(value(jid, i))
      }
    })
  })

  it('reads every lookup through one kept buffer: bytes read back stay intact after later lookups, and lookups at once each get their own', async () => {
    await withCache(async (cache) => {
      const jids = Array.from({ length: 4 }, (_, index) => jidAt('2024-05-09T00:00:00Z', index + 1))
      // Binary values decode to views of the bytes they were read from: a view of a buffer read into again would change under its holder.
      const value = (jid: string, i: number): Buffer => Buffer.alloc(200 + i, `${jid}/${i}`)
      for (let i = 0; i < 25; i++) await Promise.all(jids.map((jid) => cache.saveReturn(jid, `m${i}`, ret(jid, `m${i}`, value(jid, i)))))
      const one = (await cache.getJob(jids[0]!))?.returns ?? {}
      const atOnce = await Promise.all(jids.slice(1).map(async (jid) => [jid, (await cache.getJob(jid))?.returns ?? {}] as const))
      for (const [jid, returns] of [[jids[0]!, one] as const, ...atOnce]) {
        expect(Object.keys(returns)).toHaveLength(25)
        for (let i = 0; i < 25; i++) expect(Buffer.from(returns[`m${i}`]?.return as Uint8Array), `${jid} m${i}`).toEqual(value(jid, i))
      }
    })
  })

  describe("a return's onWritten", () => {
    it('runs once the record is written and readable, before the sync the save resolves after; a duplicate meanwhile waits and answers false', async () => {
      await withCache(async (cache, cachedir) => {
        const jid = jidAt('2024-05-09T00:00:00Z', 1)
        await cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1'])
        const sync = await holdSyncs(cachedir)
        try {
          const seen: string[] = []
          let readWhenWritten: ReturnType<LocalJobCache['getJob']> | undefined
          const saving = cache.saveReturn(jid, 'm1', ret(jid, 'm1'), {
            onWritten: () => {
              seen.push('written')
              readWhenWritten = cache.getJob(jid)
            },
          })
          void saving.then(() => seen.push('saved'))
          await sync.held
          expect(seen).toEqual(['written'])
          expect((await readWhenWritten)?.returns).toEqual({ m1: ret(jid, 'm1') })
          const duplicate = cache.saveReturn(jid, 'm1', ret(jid, 'm1', 'again'), { onWritten: () => seen.push('duplicate written') })
          sync.release()
          expect(await saving).toBe(true)
          expect(await duplicate).toBe(false)
          expect(seen).toEqual(['written', 'saved'])
        } finally {
          sync.restore()
        }
        expect((await cache.getJob(jid))?.returns).toEqual({ m1: ret(jid, 'm1') })
      })
    })

    it("a job record's runs in the task that saved it when nothing else waits; the returns of the turn's later tasks share one write at its end", async () => {
      await withCache(async (cache, cachedir) => {
        const earlier = jidAt('2024-05-09T00:00:00Z', 3)
        const jid = jidAt('2024-05-09T00:00:00Z', 4)
        await cache.saveJob(earlier, { jid: earlier, fun: 'test.ping' }, ['m1', 'm2'])
        const segment = join(cachedir, 'jobs', '20240509.log')
        const order: string[] = []
        const sizeWhenWritten = new Map<string, number>()
        const shown = (what: string) => (): void => {
          order.push(`${what} written`)
          sizeWhenWritten.set(what, statSync(segment).size)
        }
        const saved: Promise<unknown>[] = []
        // Three tasks of one turn of the event loop, as the read callbacks of three connections are: immediates queued
        // together run in the same turn, each followed by its microtasks.
        await new Promise<void>((resolve) => {
          setImmediate(() => {
            saved.push(cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1'], { lazy: true, onWritten: shown('job') }))
            order.push('task 1 ends')
          })
          setImmediate(() => {
            order.push('task 2')
            saved.push(cache.saveReturn(earlier, 'm1', ret(earlier, 'm1'), { onWritten: shown('m1') }))
          })
          setImmediate(() => {
            saved.push(cache.saveReturn(earlier, 'm2', ret(earlier, 'm2'), { onWritten: shown('m2') }))
            order.push('task 3 ends')
            resolve()
          })
        })
        expect(await deadline(Promise.all(saved), 10_000, 'the three saves')).toEqual([undefined, true, true])
        expect(order).toEqual(['task 1 ends', 'job written', 'task 2', 'task 3 ends', 'm1 written', 'm2 written'])
        // The two returns went out in one write: each was shown with the other's bytes already in the file.
        expect(sizeWhenWritten.get('m1')).toBe(sizeWhenWritten.get('m2'))
        expect(sizeWhenWritten.get('job')).toBeLessThan(sizeWhenWritten.get('m1')!)
        expect(Object.keys((await cache.getJob(earlier))?.returns ?? {}).sort()).toEqual(['m1', 'm2'])
        expect((await cache.getJob(jid))?.minions).toEqual(['m1'])
      })
    })

    it('a return whose sync fails is taken out of the index again, and its save rejects', async () => {
      await withCache(async (cache, cachedir) => {
        const jid = jidAt('2024-05-09T00:00:00Z', 2)
        const sync = await holdSyncs(cachedir, new Error('EIO: the disk went away'))
        try {
          let written = 0
          const saving = cache.saveReturn(jid, 'm1', ret(jid, 'm1'), { onWritten: () => written++ })
          const outcome = saving.then(
            () => 'saved',
            (error: unknown) => (error as Error).message,
          )
          await sync.held
          expect(written).toBe(1)
          expect((await cache.getJob(jid))?.returns).toEqual({ m1: ret(jid, 'm1') })
          sync.release()
          expect(await outcome).toMatch(/EIO: the disk went away/)
          expect(await cache.getJob(jid)).toBeUndefined()
        } finally {
          sync.restore()
        }
        // Rolled back, not broken: the same return is saved (and shown) again.
        let written = 0
        expect(await cache.saveReturn(jid, 'm1', ret(jid, 'm1'), { onWritten: () => written++ })).toBe(true)
        expect(written).toBe(1)
        expect((await cache.getJob(jid))?.returns).toEqual({ m1: ret(jid, 'm1') })
      })
    })
  })

  describe("a job record's onWritten", () => {
    it('runs once the record is in its segment file, before its (lazy) sync: a copy of the files taken then, as a kill -9 would leave them, holds the job', async () => {
      await withCache(async (cache, cachedir) => {
        const jid = jidAt('2024-05-09T00:00:00Z', 3)
        const sync = await holdSyncs(cachedir)
        const copy = await tempDir()
        try {
          let saved = false
          let written = (): void => {}
          const wrote = new Promise<void>((resolve) => (written = resolve))
          const saving = cache.saveJob(jid, { jid, fun: 'cmd.run' }, ['m1'], { lazy: true, onWritten: () => written() })
          void saving.then(() => (saved = true))
          await deadline(wrote, 10_000, "the job record's onWritten")
          expect(saved).toBe(false)
          // What a process killed now leaves behind: the files as they are (the lock is that dead process's).
          await mkdir(join(copy, 'jobs'))
          for (const name of await readdir(join(cachedir, 'jobs'))) {
            if (name.endsWith('.log')) await writeFile(join(copy, 'jobs', name), await readFile(join(cachedir, 'jobs', name)))
          }
          const reopened = await new LocalJobCache({ cachedir: copy }).open()
          try {
            expect(await reopened.getJob(jid)).toEqual({ jid, load: { jid, fun: 'cmd.run' }, minions: ['m1'], returns: {} })
          } finally {
            await reopened.close()
          }
          sync.release()
          await saving
          expect(saved).toBe(true)
        } finally {
          sync.release()
          sync.restore()
          await rm(copy, { recursive: true, force: true })
        }
      })
    })
  })

  describe('batches written while earlier ones sync', () => {
    it("a return queued behind a job record's slow sync is written and shown before that sync ends; the saves resolve in order", async () => {
      await withCache(async (cache, cachedir) => {
        const jid = jidAt('2024-05-10T00:00:00Z', 1)
        const sync = await holdSyncs(cachedir)
        try {
          const resolved: string[] = []
          const job = cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1']).then(() => resolved.push('job'))
          await sync.held
          let shown = (): void => {}
          const written = new Promise<void>((resolve) => (shown = resolve))
          const saving = cache.saveReturn(jid, 'm1', ret(jid, 'm1'), { onWritten: () => shown() })
          void saving.then(() => resolved.push('return'))
          // The job record's sync is still held: only a write that does not wait for it gets here.
          await deadline(written, 10_000, "the return's write while the job record's sync is held")
          expect(resolved).toEqual([])
          expect((await cache.getJob(jid))?.returns).toEqual({ m1: ret(jid, 'm1') })
          sync.release()
          await job
          expect(await saving).toBe(true)
          expect(resolved).toEqual(['job', 'return'])
        } finally {
          sync.restore()
        }
        expect(await cache.getJob(jid)).toEqual({ jid, load: { jid, fun: 'test.ping' }, minions: ['m1'], returns: { m1: ret(jid, 'm1') } })
      })
    })

    it("holds a lazy job record's sync for the next batch: the job and its first return share one fdatasync", async () => {
      await withCache(async (cache, cachedir) => {
        const jid = jidAt('2024-05-12T00:00:00Z', 1)
        const segment = join(cachedir, 'jobs', '20240512.log')
        const sync = await holdSyncs(cachedir)
        sync.release()
        // The lazy sync's timer must not run out while the test looks (a loaded machine once let 20 ms pass): held.
        vi.useFakeTimers({ toFake: ['setTimeout'] })
        try {
          const job = cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1'], { lazy: true })
          // The job record's batch is written first, on its own.
          await deadline(
            (async () => {
              while (((await stat(segment).catch(() => undefined))?.size ?? 0) === 0) await new Promise((resolve) => setImmediate(resolve))
            })(),
            10_000,
            "the job record's write",
          )
          expect(sync.calls()).toBe(0)
          expect(await cache.saveReturn(jid, 'm1', ret(jid, 'm1'))).toBe(true)
          await job
          expect(sync.calls()).toBe(1)
          expect(await cache.getJob(jid)).toEqual({ jid, load: { jid, fun: 'test.ping' }, minions: ['m1'], returns: { m1: ret(jid, 'm1') } })
        } finally {
          vi.useRealTimers()
          sync.restore()
        }
      })
    })

    it('syncs a lazy job record that no save follows within LAZY_JOB_SYNC_MS, and one still held at close', async () => {
      const cachedir = await tempDir()
      try {
        const cache = await new LocalJobCache({ cachedir }).open()
        const sync = await holdSyncs(cachedir)
        sync.release()
        const alone = jidAt('2024-05-12T00:00:00Z', 2)
        const atClose = jidAt('2024-05-12T00:00:00Z', 3)
        let closing: Promise<void> | undefined
        try {
          await deadline(cache.saveJob(alone, { jid: alone, fun: 'test.ping' }, ['m1'], { lazy: true }), 10_000, "the lone job record's sync")
          expect(sync.calls()).toBe(1)
          expect((await cache.getJob(alone))?.minions).toEqual(['m1'])
          const last = cache.saveJob(atClose, { jid: atClose, fun: 'test.ping' }, ['m2'], { lazy: true })
          closing = cache.close()
          await deadline(Promise.all([last, closing]), 10_000, 'the held job record synced by close')
          expect(sync.calls()).toBeGreaterThanOrEqual(2)
        } finally {
          sync.restore()
          await closing
        }
        const reopened = await new LocalJobCache({ cachedir }).open()
        try {
          expect((await reopened.getJob(atClose))?.minions).toEqual(['m2'])
        } finally {
          await reopened.close()
        }
      } finally {
        await rm(cachedir, { recursive: true, force: true })
      }
    })

    it('batches written while a sync runs are made durable together by the next one: one fdatasync for all of them', async () => {
      await withCache(async (cache, cachedir) => {
        const jid = jidAt('2024-05-11T00:00:00Z', 1)
        const sync = await holdSyncs(cachedir)
        try {
          const job = cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m0', 'm1', 'm2', 'm3', 'm4'])
          await sync.held
          const ids = ['m0', 'm1', 'm2', 'm3', 'm4']
          const savings: Promise<boolean>[] = []
          for (const id of ids) {
            let shown = (): void => {}
            const written = new Promise<void>((resolve) => (shown = resolve))
            savings.push(cache.saveReturn(jid, id, ret(jid, id), { onWritten: () => shown() }))
            // Each return its own batch: written (and shown) before the next is queued.
            await deadline(written, 10_000, `return ${id} written while the job record's sync is held`)
          }
          expect(sync.calls()).toBe(1)
          sync.release()
          await job
          expect(await Promise.all(savings)).toEqual([true, true, true, true, true])
          // The job record's sync, then one that took all five batches along.
          expect(sync.calls()).toBe(2)
        } finally {
          sync.restore()
        }
        await cache.close()
        const reopened = await new LocalJobCache({ cachedir }).open()
        try {
          expect(Object.keys((await reopened.getJob(jid))?.returns ?? {}).sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4'])
        } finally {
          await reopened.close()
        }
      })
    })

    it('a sync that fails once a later batch is written rejects both and every later save, naming a restart; reopened, the log keeps what is whole', async () => {
      const cachedir = await tempDir()
      try {
        const cache = await new LocalJobCache({ cachedir }).open()
        const jid = jidAt('2024-05-10T00:00:00Z', 2)
        const sync = await holdSyncs(cachedir, new Error('EIO: the disk went away'))
        const outcome = (saving: Promise<unknown>): Promise<string> =>
          saving.then(
            () => 'saved',
            (error: unknown) => (error as Error).message,
          )
        try {
          const job = outcome(cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1']))
          await sync.held
          let shown = (): void => {}
          const written = new Promise<void>((resolve) => (shown = resolve))
          const saving = outcome(cache.saveReturn(jid, 'm1', ret(jid, 'm1'), { onWritten: () => shown() }))
          await deadline(written, 10_000, "the return's write while the job record's sync is held")
          sync.release()
          expect(await job).toMatch(/EIO: the disk went away/)
          expect(await saving).toMatch(/EIO: the disk went away.*restart to recover/)
          expect(await cache.getJob(jid)).toBeUndefined()
          await expect(cache.saveReturn(jid, 'm2', ret(jid, 'm2'))).rejects.toThrow(/restart to recover/)
        } finally {
          sync.restore()
          await cache.close()
        }
        const reopened = await new LocalJobCache({ cachedir }).open()
        try {
          expect(await reopened.getJob(jid)).toEqual({ jid, load: { jid, fun: 'test.ping' }, minions: ['m1'], returns: { m1: ret(jid, 'm1') } })
        } finally {
          await reopened.close()
        }
      } finally {
        await rm(cachedir, { recursive: true, force: true })
      }
    })
  })

  it('rejects minion ids and jids that could escape the directory, writing nothing', async () => {
    await withCache(async (cache, cachedir) => {
      const jid = jidAt('2024-05-06T07:08:09Z', 11)
      await expect(cache.saveReturn(jid, '../../evil', ret(jid, '../../evil'))).rejects.toMatchObject({ name: 'InvalidMinionIdError' })
      await expect(cache.saveReturn('20240506070809000011_/../x', 'm', ret(jid, 'm'))).rejects.toMatchObject({ name: 'JobCacheError' })
      await expect(cache.saveJob('not-a-jid', {}, [])).rejects.toMatchObject({ name: 'JobCacheError' })
      expect(await readdir(join(cachedir, 'jobs'))).toEqual(['.lock'])
    })
  })

  it('deletes the segment files of days entirely before the prune cutoff', async () => {
    await withCache(async (cache, cachedir) => {
      for (const jid of [jidAt('2024-02-01T12:00:00Z', 1), jidAt('2024-02-03T08:00:00Z', 2), jidAt('2024-02-03T12:00:00Z', 3)])
        await cache.saveReturn(jid, 'm', ret(jid, 'm'))
      expect(await cache.prune(new Date('2024-02-03T10:00:00Z'))).toBe(2)
      expect((await readdir(join(cachedir, 'jobs'))).sort()).toEqual(['.lock', '20240203.log'])
      // The day's file comes back when a return for it arrives.
      const late = jidAt('2024-02-01T13:00:00Z', 4)
      expect(await cache.saveReturn(late, 'm', ret(late, 'm'))).toBe(true)
      expect((await cache.getJob(late))?.returns).toEqual({ m: ret(late, 'm') })
    })
  })

  it('refuses a second open of the same cachedir while the first holds it, naming the pid', async () => {
    await withCache(async (cache, cachedir) => {
      const second = new LocalJobCache({ cachedir })
      await expect(second.open()).rejects.toMatchObject({
        name: 'JobCacheError',
        message: expect.stringContaining(`job cache ${join(cachedir, 'jobs')} is in use by pid ${process.pid}`),
      })
      const jid = jidAt('2024-05-06T07:08:09Z', 12)
      expect(await cache.saveReturn(jid, 'm', ret(jid, 'm'))).toBe(true) // the owner is unaffected
      await cache.close()
      const third = await new LocalJobCache({ cachedir }).open()
      try {
        expect((await third.getJob(jid))?.returns).toEqual({ m: ret(jid, 'm') })
      } finally {
        await third.close()
      }
    })
  })

  it('takes over a stale lock left by a process that is no longer running', async () => {
    const cachedir = await tempDir()
    try {
      await mkdir(join(cachedir, 'jobs'), { mode: 0o700 })
      const dead = deadPid()
      await writeFile(join(cachedir, 'jobs', '.lock'), `${dead}\n`)
      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir, logger }).open()
      try {
        expect((await readFile(join(cachedir, 'jobs', '.lock'), 'utf8')).split('\n')[0]).toBe(String(process.pid))
        expect(lines.join('')).toContain(`pid ${dead}, which is not running`)
      } finally {
        await cache.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  describe('a lock whose pid is alive but is not its owner', () => {
    let other: ChildProcess | undefined
    afterEach(() => {
      if (other?.pid !== undefined && other.exitCode === null) process.kill(other.pid, 'SIGKILL')
      other = undefined
    })
    /** A live process that is not a Brine master: what a reused pid points at after a crash and a reboot. */
    const livePid = (): number => {
      other = spawn('sleep', ['30'], { stdio: 'ignore' })
      if (other.pid === undefined) throw new Error('could not start sleep')
      return other.pid
    }
    const lockAndOpen = async (text: (pid: number) => string, mtime?: Date): Promise<string> => {
      const cachedir = await tempDir()
      const lockFile = join(cachedir, 'jobs', '.lock')
      await mkdir(join(cachedir, 'jobs'), { mode: 0o700 })
      await writeFile(lockFile, text(livePid()))
      if (mtime !== undefined) await utimes(lockFile, mtime, mtime)
      const { logger, lines } = capture()
      try {
        const cache = await new LocalJobCache({ cachedir, logger }).open()
        expect((await readFile(lockFile, 'utf8')).split('\n')[0]).toBe(String(process.pid))
        await cache.close()
      } finally {
        await rm(cachedir, { recursive: true, force: true })
      }
      return lines.join('')
    }

    it('takes it over when the pid now belongs to a process started at another time', async () => {
      const log = await lockAndOpen((pid) => `${pid}\nstart=1\nboot=${bootId()}\n`)
      expect(log).toMatch(/taking over .*\.lock left by pid \d+, which now belongs to another process/)
    })

    it('takes it over when it was written in an earlier boot', async () => {
      const log = await lockAndOpen((pid) => `${pid}\nstart=${processStartTicks(pid)}\nboot=00000000-0000-0000-0000-000000000000\n`)
      expect(log).toMatch(/left by pid \d+ before this machine last booted/)
    })

    it('takes over an older pid-only lock whose pid started after the lock was written', async () => {
      const log = await lockAndOpen((pid) => `${pid}\n`, new Date(Date.now() - 3_600_000))
      expect(log).toMatch(/left by pid \d+, which now belongs to a process started after the lock was written/)
    })

    it('still refuses a pid-only lock of a live process that started before it was written', async () => {
      const cachedir = await tempDir()
      try {
        await mkdir(join(cachedir, 'jobs'), { mode: 0o700 })
        await writeFile(join(cachedir, 'jobs', '.lock'), `${process.pid}\n`)
        await expect(new LocalJobCache({ cachedir }).open()).rejects.toMatchObject({
          name: 'JobCacheError',
          message: expect.stringContaining(`is in use by pid ${process.pid}`),
        })
      } finally {
        await rm(cachedir, { recursive: true, force: true })
      }
    })
  })

  const tails: [string, (frameStart: Buffer) => Buffer][] = [
    ['half a frame', (good) => good.subarray(0, Math.floor(good.length / 2))],
    ['garbage bytes', () => Buffer.from('garbage, not a frame')],
    ['zeros', () => Buffer.alloc(64)],
    ['a whole frame with a bad checksum', (good) => Buffer.concat([good.subarray(0, 4), Buffer.from(good.subarray(4)).fill(7, 0, 4)])],
  ]
  it.each(tails)('truncates a torn tail (%s) on open with a warning and keeps working', async (_name, tail) => {
    const cachedir = await tempDir()
    try {
      const jid = jidAt('2024-07-01T00:00:00Z', 1)
      const first = await new LocalJobCache({ cachedir }).open()
      await first.saveJob(jid, { jid, fun: 'test.ping' }, ['a', 'b'])
      await first.saveReturn(jid, 'a', ret(jid, 'a'))
      await first.close()
      const segment = join(cachedir, 'jobs', '20240701.log')
      const clean = await readFile(segment)
      // A record as the cache would write it, for the tails made from one.
      const probeDir = await tempDir()
      const probe = await new LocalJobCache({ cachedir: probeDir }).open()
      await probe.saveReturn(jid, 'b', ret(jid, 'b'))
      await probe.close()
      const record = await readFile(join(probeDir, 'jobs', '20240701.log'))
      await rm(probeDir, { recursive: true, force: true })
      await appendFile(segment, tail(record))

      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir, logger }).open()
      try {
        expect(lines.join('')).toContain('truncating the torn tail')
        expect(await readFile(segment)).toEqual(clean)
        expect(await cache.getJob(jid)).toEqual({ jid, load: { jid, fun: 'test.ping' }, minions: ['a', 'b'], returns: { a: ret(jid, 'a') } })
        expect(await cache.saveReturn(jid, 'b', ret(jid, 'b'))).toBe(true)
      } finally {
        await cache.close()
      }
      const reopened = await new LocalJobCache({ cachedir }).open()
      try {
        expect((await reopened.getJob(jid))?.returns).toEqual({ a: ret(jid, 'a'), b: ret(jid, 'b') })
      } finally {
        await reopened.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('stops at corruption in the middle of a segment, logs it, keeps a copy and goes on working', async () => {
    const cachedir = await tempDir()
    try {
      const jid = jidAt('2024-07-02T00:00:00Z', 1)
      const first = await new LocalJobCache({ cachedir }).open()
      await first.saveReturn(jid, 'a', ret(jid, 'a'))
      const segment = join(cachedir, 'jobs', '20240702.log')
      const afterA = (await stat(segment)).size
      await first.saveReturn(jid, 'b', ret(jid, 'b'))
      await first.saveReturn(jid, 'c', ret(jid, 'c'))
      await first.close()
      const bytes = await readFile(segment)
      bytes[afterA + 20] = bytes[afterA + 20]! ^ 0xff // inside b's record
      await writeFile(segment, bytes)

      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir, logger }).open()
      try {
        expect(lines.join('')).toMatch(/checksum mismatch at offset \d+ .*records after it are dropped/)
        expect((await readdir(join(cachedir, 'jobs'))).filter((n) => n.startsWith('20240702.log.corrupt-'))).toHaveLength(1)
        expect((await cache.getJob(jid))?.returns).toEqual({ a: ret(jid, 'a') })
        expect(await cache.saveReturn(jid, 'd', ret(jid, 'd'))).toBe(true)
      } finally {
        await cache.close()
      }
      const reopened = await new LocalJobCache({ cachedir }).open()
      try {
        expect((await reopened.getJob(jid))?.returns).toEqual({ a: ret(jid, 'a'), d: ret(jid, 'd') })
      } finally {
        await reopened.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  it('keeps every acknowledged return when the writing process is killed with SIGKILL', async () => {
    // The child runs the package's TypeScript source, bundled with esbuild (@brine/* from src/, npm
    // packages external), so the test needs no prior build. The bundle sits inside the repo so node
    // finds node_modules from it.
    const outdir = join(here, '.tmp')
    const outfile = join(outdir, `writer-${process.pid}.mjs`)
    await build({
      entryPoints: [join(here, 'fixtures', 'writer.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outfile,
      logLevel: 'silent',
      plugins: [
        {
          name: 'brine-src',
          setup(b) {
            b.onResolve({ filter: /^@brine\/[a-z-]+$/ }, (args) => ({ path: join(packagesDir, args.path.slice('@brine/'.length), 'src', 'index.ts') }))
            b.onResolve({ filter: /^[^./]/ }, (args) => ({ path: args.path, external: true }))
          },
        },
      ],
    })
    const cachedir = await tempDir()
    const jid = jidAt('2024-06-01T00:00:00Z', 1)
    const child = spawn(process.execPath, [outfile, cachedir, jid], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)))
    const acked: string[] = []
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out after 30 s waiting for 200 "acked" lines from the writer (got ${acked.length}); stderr: ${stderr}`)),
          30_000,
        )
        void exited.then(() => reject(new Error(`writer exited early; stderr: ${stderr}`)))
        createInterface({ input: child.stdout }).on('line', (line) => {
          if (line.startsWith('acked ')) acked.push(line.slice('acked '.length))
          if (acked.length === 200) {
            clearTimeout(timer)
            child.kill('SIGKILL') // mid-stream: 32 saves, a batch being written and the next queued, are in flight
            resolve()
          }
        })
      })
      expect(await exited).toBe('SIGKILL')
      const cache = await new LocalJobCache({ cachedir }).open()
      const job = await cache.getJob(jid)
      await cache.close()
      for (const id of acked) expect(job?.returns[id]?.return, `acked return ${id}`).toBe(id)
      expect(Object.keys(job?.returns ?? {}).length).toBeGreaterThanOrEqual(acked.length)
    } finally {
      child.kill('SIGKILL')
      await rm(outfile, { force: true })
      await rm(cachedir, { recursive: true, force: true })
    }
  })
})

/** What a process killed now would leave in `cachedir`: its segments and persisted index as they are (the lock is the dead process's), copied to `copy`. */
async function crashImage(cachedir: string, copy: string): Promise<void> {
  await mkdir(join(copy, 'jobs'), { recursive: true })
  for (const name of await readdir(join(cachedir, 'jobs'))) {
    if (name.endsWith('.log') || name === 'index') await writeFile(join(copy, 'jobs', name), await readFile(join(cachedir, 'jobs', name)))
  }
}

/** Two days of jobs as a fleet leaves them: job records, returns in arrival order, and returns for a jid never saved as a job. */
async function fillTwoDays(cache: LocalJobCache): Promise<{ jids: string[] }> {
  const jids = [jidAt('2024-08-01T10:00:00Z', 1), jidAt('2024-08-01T11:00:00Z', 2), jidAt('2024-08-02T09:00:00Z', 3), jidAt('2024-08-02T09:30:00Z', 4)]
  for (const jid of jids.slice(0, 3)) {
    await cache.saveJob(jid, { jid, fun: 'test.ping', tgt: '*', user: 'root' }, ['m3', 'm1', 'm2'])
    for (const id of ['m2', 'm3', 'm1']) await cache.saveReturn(jid, id, ret(jid, id, { jid, id }))
  }
  await cache.saveReturn(jids[3]!, 'stray', ret(jids[3]!, 'stray'))
  return { jids }
}

/** Every job the cache holds, whole, newest first: what two caches over the same log must agree on. */
async function everything(cache: LocalJobCache): Promise<unknown[]> {
  const listed = await cache.listJobs()
  return Promise.all(listed.map(async ({ jid }) => ({ job: await cache.getJob(jid), order: Object.keys((await cache.getJob(jid))?.returns ?? {}) })))
}

describe('LocalJobCache persisted index', () => {
  it('persists its index at close and reads it back on open instead of the log: the same jobs, returns and return order as a full scan', async () => {
    const cachedir = await tempDir()
    const scanned = await tempDir()
    try {
      const first = await new LocalJobCache({ cachedir }).open()
      const { jids } = await fillTwoDays(first)
      await first.close()
      expect((await readdir(join(cachedir, 'jobs'))).sort()).toEqual(['20240801.log', '20240802.log', 'index'])
      expect((await stat(join(cachedir, 'jobs', 'index'))).mode & 0o777).toBe(0o600)
      // The same log without the index: what a full scan makes of it.
      await mkdir(join(scanned, 'jobs'))
      for (const name of ['20240801.log', '20240802.log']) await writeFile(join(scanned, 'jobs', name), await readFile(join(cachedir, 'jobs', name)))

      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir, logger, indexInBackground: true }).open()
      const full = await new LocalJobCache({ cachedir: scanned }).open()
      try {
        await cache.ready()
        expect(lines.join('')).toMatch(/index of 4 job\(s\) read from \S+index, then 0 byte\(s\) of the log past it/)
        expect(await everything(cache)).toEqual(await everything(full))
        expect((await cache.getJob(jids[0]!))?.minions).toEqual(['m3', 'm1', 'm2'])
        expect(Object.keys((await cache.getJob(jids[1]!))?.returns ?? {})).toEqual(['m2', 'm3', 'm1'])
        expect(await cache.getJob(jids[3]!)).toEqual({ jid: jids[3], load: {}, minions: [], returns: { stray: ret(jids[3]!, 'stray') } })
        expect(await cache.newestJid()).toBe(jids[3])
        // Duplicates are still known, new returns go after the indexed ones.
        expect(await cache.saveReturn(jids[2]!, 'm3', ret(jids[2]!, 'm3', 'again'))).toBe(false)
        expect(await cache.saveReturn(jids[2]!, 'm4', ret(jids[2]!, 'm4'))).toBe(true)
        expect(Object.keys((await cache.getJob(jids[2]!))?.returns ?? {})).toEqual(['m2', 'm3', 'm1', 'm4'])
        expect(lines.join('')).not.toMatch(/persisted index .* is/)
      } finally {
        await cache.close()
        await full.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
      await rm(scanned, { recursive: true, force: true })
    }
  })

  it('after a run killed with SIGKILL since the index was persisted, reads the index and then only the records written past it: nothing is lost', async () => {
    const cachedir = await tempDir()
    const copy = await tempDir()
    try {
      const first = await new LocalJobCache({ cachedir }).open()
      const { jids } = await fillTwoDays(first)
      await first.close()
      const indexed = (await stat(join(cachedir, 'jobs', '20240802.log'))).size
      const second = await new LocalJobCache({ cachedir }).open()
      const later = jidAt('2024-08-03T00:00:00Z', 5)
      try {
        await second.saveReturn(jids[2]!, 'm4', ret(jids[2]!, 'm4'))
        await second.saveJob(later, { jid: later, fun: 'cmd.run' }, ['m1'])
        await second.saveReturn(later, 'm1', ret(later, 'm1'))
        await crashImage(cachedir, copy)
      } finally {
        await second.close()
      }
      const past = (await stat(join(copy, 'jobs', '20240802.log'))).size - indexed + (await stat(join(copy, 'jobs', '20240803.log'))).size
      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir: copy, logger }).open()
      try {
        expect(lines.join('')).toContain(`index of 4 job(s) read from ${join(copy, 'jobs', 'index')}, then ${past} byte(s) of the log past it`)
        expect(Object.keys((await cache.getJob(jids[2]!))?.returns ?? {})).toEqual(['m2', 'm3', 'm1', 'm4'])
        expect(await cache.getJob(later)).toEqual({ jid: later, load: { jid: later, fun: 'cmd.run' }, minions: ['m1'], returns: { m1: ret(later, 'm1') } })
        expect((await cache.listJobs()).map((job) => job.jid)).toEqual([later, ...[...jids].reverse()])
      } finally {
        await cache.close()
      }
    } finally {
      await rm(cachedir, { recursive: true, force: true })
      await rm(copy, { recursive: true, force: true })
    }
  })

  it('detects a corrupt persisted index, says so, rebuilds the index from the log and persists a good one at close', async () => {
    const cachedir = await tempDir()
    try {
      const first = await new LocalJobCache({ cachedir }).open()
      const { jids } = await fillTwoDays(first)
      await first.close()
      const path = join(cachedir, 'jobs', 'index')
      const bytes = await readFile(path)
      bytes[bytes.length - 3] = bytes[bytes.length - 3]! ^ 0xff
      await writeFile(path, bytes)
      const { logger, lines } = capture()
      const cache = await new LocalJobCache({ cachedir, logger, indexInBackground: true }).open()
      try {
        expect((await cache.getJob(jids[1]!))?.returns).toEqual(
          Object.fromEntries(['m2', 'm3', 'm1'].map((id) => [id, ret(jids[1]!, id, { jid: jids[1], id })])),
        )
        expect(lines.join('')).toMatch(/the persisted index \S+ is corrupt \(checksum mismatch\); rebuilding the index from the whole log/)
        expect(await cache.listJobs()).toHaveLength(4)
      } finally {
        await cache.close()
      }
      const again = capture()
      const reopened = await new LocalJobCache({ cachedir, logger: again.logger }).open()
      await reopened.close()
      expect(again.lines.join('')).toMatch(/index of 4 job\(s\) read from/)
    } finally {
      await rm(cachedir, { recursive: true, force: true })
    }
  })

  const changes: [string, RegExp, (jobs: string, jids: string[]) => Promise<void>, (cache: LocalJobCache, jids: string[]) => Promise<void>][] = [
    [
      'a segment shortened',
      /20240801\.log holds \d+ bytes, fewer than the \d+ it covered/,
      async (jobs) => {
        const path = join(jobs, '20240801.log')
        const bytes = await readFile(path)
        await writeFile(path, bytes.subarray(0, bytes.readUInt32BE(0) + 4)) // the first job record alone
      },
      async (cache, jids) => {
        expect(await cache.getJob(jids[0]!)).toMatchObject({ minions: ['m3', 'm1', 'm2'], returns: {} })
        expect(await cache.getJob(jids[1]!)).toBeUndefined()
      },
    ],
    [
      'a segment replaced by another log',
      /the first \d+ bytes of 20240801\.log are not those it was built from/,
      async (jobs, jids) => {
        const other = await tempDir()
        try {
          const cache = await new LocalJobCache({ cachedir: other }).open()
          for (let index = 0; index < 10; index++) await cache.saveReturn(jids[0]!, `other${index}`, ret(jids[0]!, `other${index}`, 'x'.repeat(100)))
          await cache.close()
          await writeFile(join(jobs, '20240801.log'), await readFile(join(other, 'jobs', '20240801.log')))
        } finally {
          await rm(other, { recursive: true, force: true })
        }
      },
      async (cache, jids) => {
        expect(Object.keys((await cache.getJob(jids[0]!))?.returns ?? {})).toEqual(Array.from({ length: 10 }, (_, index) => `other${index}`))
        expect(await cache.getJob(jids[1]!)).toBeUndefined()
      },
    ],
    [
      'a segment gone',
      /20240801\.log is gone/,
      async (jobs) => rm(join(jobs, '20240801.log')),
      async (cache, jids) => {
        expect((await cache.listJobs()).map((job) => job.jid)).toEqual([jids[3], jids[2]])
      },
    ],
  ]
  it.each(changes)(
    'ignores a persisted index the log no longer matches (%s), saying why, and rebuilds the index from the log',
    async (_name, why, change, check) => {
      const cachedir = await tempDir()
      try {
        const first = await new LocalJobCache({ cachedir }).open()
        const { jids } = await fillTwoDays(first)
        await first.close()
        await change(join(cachedir, 'jobs'), jids)
        const { logger, lines } = capture()
        const cache = await new LocalJobCache({ cachedir, logger }).open()
        try {
          expect(lines.join('')).toMatch(/the persisted index \S+ is stale/)
          expect(lines.join('')).toMatch(why)
          await check(cache, jids)
          expect((await cache.getJob(jids[2]!))?.minions).toEqual(['m3', 'm1', 'm2'])
        } finally {
          await cache.close()
        }
      } finally {
        await rm(cachedir, { recursive: true, force: true })
      }
    },
  )
})
