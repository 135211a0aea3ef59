import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createLogger } from '@brine/core'
import { checkReturners, LocalJobCache, MinionReturners, returnerNames, UnknownReturnerError, type ReturnedJob } from '../src/index.js'
import { jidAt, ret } from './contract.js'

const cleanups: Array<() => Promise<unknown>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'brine-minion-returners-'))
  cleanups.push(() => rm(dir, { recursive: true, force: true }))
  return dir
}

const job = (jid: string, returners: string): ReturnedJob => ({
  jid,
  fun: 'test.echo',
  arg: ['kept'],
  tgt: 'web1',
  tgt_type: 'glob',
  user: 'root',
  ret: returners,
})

describe("a job's returner names", () => {
  it("splits Salt's comma list, each name once; '' names none", () => {
    expect(returnerNames('')).toEqual([])
    expect(returnerNames('local_cache, local_cache,,redis')).toEqual(['local_cache', 'redis'])
  })

  it('refuses a name Brine has no returner for, naming it and the available ones', () => {
    expect(() => checkReturners('')).not.toThrow()
    expect(() => checkReturners('local_cache')).not.toThrow()
    const error = (() => {
      try {
        checkReturners('local_cache,redis')
      } catch (caught) {
        return caught
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(UnknownReturnerError)
    expect((error as UnknownReturnerError).returner).toBe('redis')
    expect((error as Error).message).toBe("unknown returner 'redis' (available: local_cache)")
  })
})

describe('MinionReturners', () => {
  it("stores the return and the job's load in the minion's own local_cache, and logs an unknown name without losing the rest", async () => {
    const cachedir = await tempDir()
    const lines: string[] = []
    const returners = new MinionReturners({ cachedir, logger: createLogger({ level: 'error', write: (line) => lines.push(line) }) })
    const jid = jidAt(new Date().toISOString(), 1)
    await returners.send(job(jid, 'local_cache,redis'), { ...ret(jid, 'web1', 'kept'), fun: 'test.echo', fun_args: ['kept'] })
    // Nothing named: nothing opened or written.
    await returners.send(job(jidAt(new Date().toISOString(), 2), ''), ret(jidAt(new Date().toISOString(), 2), 'web1'))
    await returners.close()
    expect(lines.join('')).toContain('returner redis of job ' + jid + ": unknown returner 'redis' (available: local_cache)")

    const cache = await new LocalJobCache({ cachedir }).open()
    cleanups.push(() => cache.close())
    const stored = await cache.getJob(jid)
    expect(stored?.load).toEqual({ jid, fun: 'test.echo', arg: ['kept'], tgt: 'web1', tgt_type: 'glob', user: 'root', ret: 'local_cache,redis' })
    expect(stored?.minions).toEqual(['web1'])
    expect(stored?.returns['web1']).toMatchObject({ jid, id: 'web1', fun: 'test.echo', return: 'kept', retcode: 0, success: true })
    expect(await cache.listJobs()).toHaveLength(1)
  })

  it('logs a returner that cannot store the return, and opens it again for the next one', async () => {
    const dir = await tempDir()
    // A file where the cache directory should be: local_cache cannot open.
    const cachedir = join(dir, 'cache')
    await writeFile(cachedir, 'not a directory')
    const lines: string[] = []
    const returners = new MinionReturners({ cachedir, logger: createLogger({ level: 'error', write: (line) => lines.push(line) }) })
    const jid = jidAt(new Date().toISOString(), 3)
    await expect(returners.send(job(jid, 'local_cache'), ret(jid, 'web1'))).resolves.toBeUndefined()
    expect(lines.join('')).toContain(`returner local_cache: the return of job ${jid} was not stored`)

    await rm(cachedir)
    const next = jidAt(new Date().toISOString(), 4)
    await returners.send(job(next, 'local_cache'), ret(next, 'web1'))
    await returners.close()
    const cache = await new LocalJobCache({ cachedir }).open()
    cleanups.push(() => cache.close())
    expect((await cache.getJob(next))?.returns['web1']).toMatchObject({ return: true })
  })

  it('close() waits for the returns being sent, and nothing is sent after it', async () => {
    const cachedir = await tempDir()
    const returners = new MinionReturners({ cachedir })
    const jid = jidAt(new Date().toISOString(), 5)
    const sending = returners.send(job(jid, 'local_cache'), ret(jid, 'web1'))
    await returners.close()
    await sending
    const late = jidAt(new Date().toISOString(), 6)
    await returners.send(job(late, 'local_cache'), ret(late, 'web1'))
    const cache = await new LocalJobCache({ cachedir }).open()
    cleanups.push(() => cache.close())
    expect((await cache.getJob(jid))?.returns['web1']).toMatchObject({ return: true })
    expect(await cache.getJob(late)).toBeUndefined()
  })
})
