import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { SyndicJobEntry } from '@brine/protocol'
import { BatchSpool, SyndicFileError, SyndicSpoolFullError } from '../src/index.js'

const dirs: string[] = []
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true })
})
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'bs-'))
  dirs.push(dir)
  return dir
}

const batch = (jid: string, minions: string[]): SyndicJobEntry[] => [
  { jid, fun: 'test.ping', minions, returns: Object.fromEntries(minions.map((id) => [id, { return: true, retcode: 0, success: true, fun_args: [] }])) },
]

describe('the syndic batch spool', () => {
  it('keeps batches on disk (0600, in a 0700 directory) and gives them back oldest first, also to a new spool on the same directory', async () => {
    const dir = join(await tempDir(), 'spool')
    const spool = new BatchSpool(dir, 1 << 20)
    const first = await spool.write(batch('20260101000000000001', ['a', 'b']))
    await spool.write(batch('20260101000000000002', ['c']))
    expect((await stat(dir)).mode & 0o777).toBe(0o700)
    expect((await stat(first)).mode & 0o777).toBe(0o600)
    expect(spool.size).toBe(2)

    const again = new BatchSpool(dir, 1 << 20)
    const oldest = await again.oldest()
    expect(oldest?.jobs[0]?.jid).toBe('20260101000000000001')
    expect(Object.keys(oldest?.jobs[0]?.returns ?? {})).toEqual(['a', 'b'])
    await again.remove(oldest!.file)
    expect((await again.oldest())?.jobs[0]?.jid).toBe('20260101000000000002')
    // A batch written after a restart still sorts after the ones left before it.
    await again.write(batch('20260101000000000003', ['d']))
    const names = (await readdir(dir)).sort()
    expect(names).toHaveLength(2)
    expect(names[1]! > names[0]!).toBe(true)
  })

  it('refuses a batch past syndic_spool_max_bytes with SyndicSpoolFullError naming the directory and the limit, and takes batches again once one is removed', async () => {
    const dir = join(await tempDir(), 'spool')
    const one = batch('20260101000000000001', ['a'])
    const probe = new BatchSpool(join(dir, 'probe'), 1 << 20)
    const size = (await stat(await probe.write(one))).size
    const spool = new BatchSpool(dir, size * 2)
    const kept = await spool.write(one)
    await spool.write(one)
    const error = await spool.write(one).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(SyndicSpoolFullError)
    expect((error as SyndicSpoolFullError).message).toContain(dir)
    expect((error as SyndicSpoolFullError).message).toContain(`syndic_spool_max_bytes ${size * 2}`)
    expect(spool.size).toBe(2)
    await spool.remove(kept)
    await spool.write(one)
    expect(spool.bytes).toBe(size * 2)
  })

  it('sets an unreadable file aside as .bad and reports it, so it does not block the batches after it', async () => {
    const dir = join(await tempDir(), 'spool')
    const spool = new BatchSpool(dir, 1 << 20)
    await spool.open()
    await writeFile(join(dir, '0000000000000001.msgpack'), Buffer.from([0xc1, 0xc1]))
    const reopened = new BatchSpool(dir, 1 << 20)
    await reopened.write(batch('20260101000000000002', ['b']))
    await expect(reopened.oldest()).rejects.toBeInstanceOf(SyndicFileError)
    expect((await reopened.oldest())?.jobs[0]?.jid).toBe('20260101000000000002')
    expect(await readdir(dir)).toContain('0000000000000001.msgpack.bad')
  })
})
