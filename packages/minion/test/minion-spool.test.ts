/** The return spool on disk and the daemon's small helpers (rate-limited logging, start events). */
import { readdirSync, statSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loadConfig } from '@brine/config'
import { type ReturnLoad } from '@brine/protocol'
import { silentLogger } from '@brine/core'
import { RateLimitedLog, minionStartEvents, SpoolFileError, ReturnSpool, spoolDir } from '@brine/link'
import { Minion } from '../src/minion.js'

const ret = (jid: string): ReturnLoad => ({ cmd: '_return', id: 'm1', jid, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true })

describe('ReturnSpool', () => {
  let dir: string
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-spool-'))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('writes one 0600 file per jid in a 0700 directory and lists them oldest jid first', async () => {
    const spool = new ReturnSpool(spoolDir(dir), silentLogger)
    expect(await spool.list()).toEqual([]) // no directory yet
    await spool.write(ret('20240101000000000002'))
    const first = await spool.write(ret('20240101000000000001'))
    await spool.write({ ...ret('20240101000000000002'), return: 'again' }) // same jid replaces
    expect(statSync(spool.dir).mode & 0o777).toBe(0o700)
    expect(statSync(first).mode & 0o777).toBe(0o600)
    const files = await spool.list()
    expect(files.map((file) => file.slice(spool.dir.length + 1))).toEqual(['20240101000000000001.msgpack', '20240101000000000002.msgpack'])
    expect((await spool.read(files[1] as string)).return).toBe('again')
    expect(readdirSync(spool.dir).filter((name) => name.startsWith('.'))).toEqual([]) // no temporary files left
    await spool.remove(first)
    await spool.remove(first) // already gone is fine
    expect(await spool.list()).toHaveLength(1)
  })

  it('makes its directory again when it was removed after an earlier write', async () => {
    const spool = new ReturnSpool(spoolDir(dir), silentLogger)
    await spool.write(ret('20240101000000000001'))
    await rm(spool.dir, { recursive: true, force: true })
    const file = await spool.write(ret('20240101000000000002'))
    expect(statSync(spool.dir).mode & 0o777).toBe(0o700)
    expect(await spool.list()).toEqual([file])
  })

  it('keeps a jid that is not a plain name inside the spool directory', async () => {
    const spool = new ReturnSpool(dir, silentLogger)
    const file = await spool.write(ret('../../etc/passwd'))
    expect(file.startsWith(`${dir}/x`)).toBe(true)
    expect((await spool.read(file)).jid).toBe('../../etc/passwd')
  })

  it('refuses and quarantines a file that is not a return', async () => {
    const spool = new ReturnSpool(dir, silentLogger)
    const bad = join(dir, '20240101000000000009.msgpack')
    await writeFile(bad, 'not msgpack at all \xc1')
    await expect(spool.read(bad)).rejects.toBeInstanceOf(SpoolFileError)
    await spool.quarantine(bad)
    expect(await spool.list()).toEqual([])
    expect(readdirSync(dir)).toEqual(['20240101000000000009.msgpack.bad'])
  })
})

describe('daemon helpers', () => {
  it('logs a burst of the same problem, then one line per interval with the count suppressed', () => {
    const log = new RateLimitedLog(1000, 2)
    const lines: number[] = []
    for (let i = 0; i < 5; i++) log.log('bad', (suppressed) => lines.push(suppressed), 0)
    log.log('bad', (suppressed) => lines.push(suppressed), 1000)
    expect(lines).toEqual([0, 0, 3])
  })

  it('a failed start() rejects, rejects `authenticated` too, and leaves stop() harmless', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-minion-start-'))
    try {
      const { opts } = await loadConfig('minion', {
        configDir: join(dir, 'etc'),
        overrides: { id: 'm1', pki_dir: join(dir, 'pki'), cachedir: join(dir, 'cache') },
      })
      const minion = new Minion({ ...opts, transport: 'carrier-pigeon' as 'tcp' }, { logger: silentLogger })
      await expect(minion.start()).rejects.toThrow(/carrier-pigeon/)
      await expect(minion.authenticated).rejects.toThrow(/carrier-pigeon/)
      await minion.stop()
      await minion.stop()
      await expect(minion.start()).rejects.toThrow(/closed/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it("builds Salt's start events", () => {
    const events = minionStartEvents('web1', new Date(2024, 0, 5, 9, 3, 7))
    expect(events).toEqual([
      {
        tag: 'salt/minion/web1/start',
        data: { data: 'Minion web1 started at Fri Jan  5 09:03:07 2024', cmd: '_minion_event', id: 'web1', pretag: null, tag: 'salt/minion/web1/start' },
      },
      {
        tag: 'minion_start',
        data: { data: 'Minion web1 started at Fri Jan  5 09:03:07 2024', cmd: '_minion_event', id: 'web1', pretag: null, tag: 'minion_start' },
      },
    ])
  })
})
