import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { silentLogger } from '@brine/core'
import type { ReturnLoad } from '@brine/protocol'
import { ReturnSpool, SPOOL_WRITES_AT_ONCE, type SpoolFileWriter } from '../src/spool.js'

const returnLoad = (jid: string, id: string): ReturnLoad =>
  ({ cmd: '_return', id, jid, fun: 'test.ping', return: true, success: true, retcode: 0 }) as ReturnLoad

describe('the return spool under a burst', () => {
  it('writes at most SPOOL_WRITES_AT_ONCE files at once over every spool of the process, and writes each one', async () => {
    let open = 0
    let mostOpen = 0
    const written: string[] = []
    // A writer that stays "open" for a few turns of the event loop, as a write, its fsync and rename do.
    const writeFile: SpoolFileWriter = async (file) => {
      open++
      mostOpen = Math.max(mostOpen, open)
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve))
      written.push(file)
      open--
    }
    // Twenty minions of one process, each spooling fifty returns the master refused at once.
    const root = await mkdtemp(join(tmpdir(), 'brine-spool-writes-'))
    const spools = Array.from({ length: 20 }, (_, index) => new ReturnSpool(join(root, `m${index}`), silentLogger, writeFile))
    const writes = spools.flatMap((spool, index) =>
      Array.from({ length: 50 }, (_, job) => spool.write(returnLoad(`2026112700000000${String(job).padStart(4, '0')}`, `m${index}`))),
    )
    const files = await Promise.all(writes.map((write) => write.catch((error: unknown) => error)))
    expect(files.filter((file) => typeof file !== 'string')).toEqual([])
    expect(new Set(written).size).toBe(1000)
    expect(mostOpen).toBe(SPOOL_WRITES_AT_ONCE)
    await rm(root, { recursive: true, force: true })
  })
})
