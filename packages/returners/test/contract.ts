import { afterEach, describe, expect, it } from 'vitest'
import type { JobCache } from '@brine/common'
import type { ReturnLoad } from '@brine/protocol'

/** A fresh, empty store; `another()` opens a second cache on the same store (another master), where the backend allows one. */
export interface CacheFixture {
  cache: JobCache
  another?: () => Promise<JobCache>
  cleanup(): Promise<void>
}

export interface ContractOptions {
  /** Several caches (masters) may write one store at once: PostgreSQL yes, local_cache no (it locks its directory). */
  sharedStore: boolean
}

/** A jid for `iso` (UTC, to the second) with `micro` as its microseconds: no clock, no sleeps. */
export function jidAt(iso: string, micro = 0): string {
  const date = new Date(iso)
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0')
  return `${pad(date.getUTCFullYear(), 4)}${pad(date.getUTCMonth() + 1)}${pad(date.getUTCDate())}${pad(date.getUTCHours())}${pad(date.getUTCMinutes())}${pad(date.getUTCSeconds())}${pad(micro, 6)}`
}

export function ret(jid: string, id: string, value: unknown = true): ReturnLoad {
  return { cmd: '_return', id, jid, fun: 'test.ping', fun_args: [], return: value, retcode: 0, success: true }
}

/** The JobCache contract every backend passes. */
export function jobCacheContract(name: string, make: () => Promise<CacheFixture>, options: ContractOptions): void {
  describe(`${name}: JobCache contract`, () => {
    let fixture: CacheFixture | undefined
    const open = async (): Promise<CacheFixture> => (fixture = await make())
    afterEach(async () => {
      await fixture?.cleanup()
      fixture = undefined
    })

    it('saves a job and its returns and reads them back; an unknown jid is undefined', async () => {
      const { cache } = await open()
      const jid = jidAt('2024-03-01T10:00:00Z', 1)
      const load = { jid, fun: 'test.ping', arg: [], tgt: 'web*', tgt_type: 'glob', user: 'root' }
      await cache.saveJob(jid, load, ['web1', 'web2'])
      expect(await cache.saveReturn(jid, 'web1', ret(jid, 'web1', { ok: [1, 'two'] }))).toBe(true)
      const job = await cache.getJob(jid)
      expect(job).toEqual({ jid, load, minions: ['web1', 'web2'], returns: { web1: ret(jid, 'web1', { ok: [1, 'two'] }) } })
      expect(await cache.getJob(jidAt('2024-03-01T10:00:00Z', 2))).toBeUndefined()
    })

    it('stores a (jid, id) return once: false and nothing stored the second time', async () => {
      const { cache } = await open()
      const jid = jidAt('2024-03-01T10:00:00Z', 3)
      await cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m1'])
      expect(await cache.saveReturn(jid, 'm1', ret(jid, 'm1', 'first'))).toBe(true)
      expect(await cache.saveReturn(jid, 'm1', ret(jid, 'm1', 'second'))).toBe(false)
      expect((await cache.getJob(jid))?.returns).toEqual({ m1: ret(jid, 'm1', 'first') })
    })

    it('keeps returns for a jid it never saw saved, as a job with an empty load', async () => {
      const { cache } = await open()
      const jid = jidAt('2024-03-02T00:00:00Z', 4)
      expect(await cache.saveReturn(jid, 'lost', ret(jid, 'lost'))).toBe(true)
      expect(await cache.getJob(jid)).toEqual({ jid, load: {}, minions: [], returns: { lost: ret(jid, 'lost') } })
      expect(await cache.listJobs()).toEqual([{ jid, load: {}, minions: [] }])
      // The load arriving later (published by a slower path) fills the record in.
      await cache.saveJob(jid, { jid, fun: 'cmd.run' }, ['lost'])
      expect(await cache.getJob(jid)).toEqual({ jid, load: { jid, fun: 'cmd.run' }, minions: ['lost'], returns: { lost: ret(jid, 'lost') } })
    })

    it('round-trips binary data and strings with NUL in loads and returns', async () => {
      const { cache } = await open()
      const jid = jidAt('2024-03-03T00:00:00Z', 5)
      const load = { jid, fun: 'cp.recv', arg: [Buffer.from([0, 1, 2, 255]), 'a\u0000b'] }
      await cache.saveJob(jid, load, ['m'])
      await cache.saveReturn(jid, 'm', ret(jid, 'm', { data: Buffer.from('bin'), text: 'x\u0000y' }))
      const job = await cache.getJob(jid)
      expect(job?.load).toEqual(load)
      expect(Buffer.isBuffer((job?.load['arg'] as unknown[])[0])).toBe(true)
      expect(job?.returns['m']?.return).toEqual({ data: Buffer.from('bin'), text: 'x\u0000y' })
    })

    it('lists jobs newest first with fun, target, user, time range and limit filters', async () => {
      const { cache } = await open()
      const a = jidAt('2024-01-01T08:00:00Z', 1)
      const b = jidAt('2024-01-02T09:00:00Z', 2)
      const c = jidAt('2024-01-02T10:00:00Z', 3)
      const d = jidAt('2024-01-05T11:00:00Z', 4)
      await cache.saveJob(a, { jid: a, fun: 'test.ping', tgt: 'web*', user: 'root' }, ['web1'])
      await cache.saveJob(b, { jid: b, fun: 'cmd.run', tgt: ['db1', 'web2'], tgt_type: 'list', user: 'alice' }, ['db1', 'web2'])
      await cache.saveJob(c, { jid: c, fun: 'test.version', tgt: 'db*', user: 'root' }, ['db1'])
      await cache.saveJob(d, { jid: d, fun: 'state.apply', tgt: '*', user: 'alice' }, [])
      const jids = async (filter: Parameters<JobCache['listJobs']>[0]): Promise<string[]> => (await cache.listJobs(filter)).map((j) => j.jid)

      expect(await jids({})).toEqual([d, c, b, a])
      expect(await cache.listJobs({ limit: 1 })).toEqual([{ jid: d, load: { jid: d, fun: 'state.apply', tgt: '*', user: 'alice' }, minions: [] }])
      expect(await jids({ fun: 'test.*' })).toEqual([c, a])
      expect(await jids({ target: 'web2' })).toEqual([b])
      expect(await jids({ target: 'db*' })).toEqual([c, b])
      expect(await jids({ user: 'alice' })).toEqual([d, b])
      expect(await jids({ startTime: new Date('2024-01-02T09:00:00Z'), endTime: new Date('2024-01-02T10:00:00Z') })).toEqual([c, b])
      expect(await jids({ startTime: new Date('2024-01-02T09:00:01Z') })).toEqual([d, c])
      expect(await jids({ endTime: new Date('2024-01-02T09:59:59Z') })).toEqual([b, a])
      expect(await jids({ user: 'root', limit: 1 })).toEqual([c])
      expect(await jids({ fun: 'nothing.*' })).toEqual([])
    })

    it('prunes jobs (and their returns) that started before the cutoff, including on the boundary day', async () => {
      const { cache } = await open()
      const old = jidAt('2024-02-01T12:00:00Z', 1)
      const early = jidAt('2024-02-03T08:00:00Z', 2)
      const late = jidAt('2024-02-03T12:00:00Z', 3)
      const recent = jidAt('2024-02-04T00:00:00Z', 4)
      for (const jid of [old, early, late, recent]) {
        await cache.saveJob(jid, { jid, fun: 'test.ping' }, ['m'])
        await cache.saveReturn(jid, 'm', ret(jid, 'm'))
      }
      expect(await cache.prune(new Date('2024-02-03T10:00:00Z'))).toBe(2)
      expect(await cache.getJob(old)).toBeUndefined()
      expect(await cache.getJob(early)).toBeUndefined()
      expect((await cache.listJobs()).map((j) => j.jid)).toEqual([recent, late])
      expect((await cache.getJob(late))?.returns).toEqual({ m: ret(late, 'm') })
      expect(await cache.prune(new Date('2024-02-03T10:00:00Z'))).toBe(0)
      // A pruned job's return arriving late is stored again (the store does not remember deletions).
      expect(await cache.saveReturn(early, 'm', ret(early, 'm'))).toBe(true)
    })

    it('names its newest jid (a job or a return), none when empty, and a new one after pruning that', async () => {
      const { cache } = await open()
      expect(await cache.newestJid()).toBeUndefined()
      const older = jidAt('2024-05-01T00:00:00Z', 1)
      const newer = jidAt('2024-05-03T00:00:00Z', 2)
      const returnOnly = jidAt('2024-05-02T00:00:00Z', 3)
      await cache.saveJob(newer, { jid: newer, fun: 'test.ping' }, ['m'])
      await cache.saveJob(older, { jid: older, fun: 'test.ping' }, ['m'])
      await cache.saveReturn(returnOnly, 'm', ret(returnOnly, 'm'))
      expect(await cache.newestJid()).toBe(newer)
      expect(await cache.prune(new Date('2024-05-04T00:00:00Z'))).toBe(3)
      expect(await cache.newestJid()).toBeUndefined()
      const later = jidAt('2024-05-05T00:00:00Z', 4)
      await cache.saveReturn(later, 'm', ret(later, 'm'))
      expect(await cache.newestJid()).toBe(later)
    })

    it('one cache saving the same returns twice concurrently stores each once, with exactly one true', async () => {
      const { cache } = await open()
      const jids = [jidAt('2024-04-01T00:00:00Z', 1), jidAt('2024-04-02T00:00:00Z', 2)]
      const ids = Array.from({ length: 20 }, (_, i) => `minion-${i}`)
      const pairs = jids.flatMap((jid) => ids.map((id) => [jid, id] as const))
      const write = (order: (typeof pairs)[number][]) => Promise.all(order.map(([jid, id]) => cache.saveReturn(jid, id, ret(jid, id, `${jid}/${id}`))))
      const [first, second] = await Promise.all([write(pairs), write([...pairs].reverse())])
      const reversed = [...second].reverse()
      pairs.forEach((_, i) => expect([first[i], reversed[i]].filter(Boolean)).toHaveLength(1))
      for (const jid of jids) {
        const job = await cache.getJob(jid)
        expect(Object.keys(job?.returns ?? {}).sort()).toEqual([...ids].sort())
        for (const id of ids) expect(job?.returns[id]).toEqual(ret(jid, id, `${jid}/${id}`))
      }
    })

    if (options.sharedStore) {
      it('two caches on one store writing the same returns concurrently store each once, with exactly one true', async () => {
        const { cache, another } = await open()
        if (another === undefined) throw new Error(`${name}: a shared-store fixture must provide another()`)
        const other = await another()
        try {
          const jids = [jidAt('2024-04-01T00:00:00Z', 1), jidAt('2024-04-02T00:00:00Z', 2)]
          const ids = Array.from({ length: 20 }, (_, i) => `minion-${i}`)
          const pairs = jids.flatMap((jid) => ids.map((id) => [jid, id] as const))
          const write = (c: JobCache, order: (typeof pairs)[number][]) =>
            Promise.all(order.map(([jid, id]) => c.saveReturn(jid, id, ret(jid, id, `${jid}/${id}`))))
          const [first, second] = await Promise.all([write(cache, pairs), write(other, [...pairs].reverse())])
          const reversed = [...second].reverse()
          pairs.forEach((_, i) => expect([first[i], reversed[i]].filter(Boolean)).toHaveLength(1))
          for (const jid of jids) {
            const job = await other.getJob(jid)
            expect(Object.keys(job?.returns ?? {}).sort()).toEqual([...ids].sort())
            for (const id of ids) expect(job?.returns[id]).toEqual(ret(jid, id, `${jid}/${id}`))
          }
        } finally {
          await other.close()
        }
      })
    }
  })
}
