/**
 * A return bigger than max_frame_bytes reaches the master over both transports, cut below the limit
 * with a marker and its retcode kept (it used to fail the send and the spool and be lost).
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { silentLogger } from '@brine/transport'
import { Minion } from '../src/minion.js'
import { spoolDir } from '../src/spool.js'
import { deadline } from './modules-fixture.js'
import { Recorder } from './recorder.js'
import type { MinionEvent } from '../src/lifecycle.js'
import { job, StandInMaster, testMinionConfig } from './stand-in-master.js'

const ID = 'big-returner'
const LIMIT = 1024 * 1024

describe.each(['zeromq', 'tcp'])('big returns over %s', (transportName) => {
  let dir: string
  let master: StandInMaster | undefined
  let minion: Minion | undefined

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-big-return-'))
  })
  afterEach(async () => {
    await minion?.stop()
    await master?.close()
    minion = undefined
    master = undefined
    await rm(dir, { recursive: true, force: true })
  })

  it('a 3 MB cmd.run output under max_frame_bytes 1 MiB arrives truncated with the marker, retcode kept, nothing spooled', async () => {
    master = await StandInMaster.start(transportName, dir, { autoAccept: true })
    const opts = await testMinionConfig(transportName, dir, master, ID, { extra: { max_frame_bytes: LIMIT } })
    minion = new Minion(opts, { logger: silentLogger })
    const recorder = new Recorder<MinionEvent>(minion)
    await minion.start()
    await deadline(minion.authenticated, 8000, 'first authentication')
    await master.waitSubscribed()

    const run = job('cmd.run', ['head -c 3000000 /dev/zero | tr "\\0" y; exit 7'], { tgt: [ID], tgt_type: 'list' })
    await master.publish(run, [ID])
    const ret = await master.waitForLoad('_return', run.jid as string, 20_000)
    expect(ret).toMatchObject({ fun: 'cmd.run', retcode: 7, success: false })
    const text = ret.return as string
    expect(text.startsWith('yyyy')).toBe(true)
    expect(text).toMatch(/\n\[brine: truncated by the minion: 3000000 bytes, the first \d+ kept, to fit max_frame_bytes \(1048576\)\]$/)
    expect(Buffer.byteLength(text)).toBeLessThan(LIMIT)
    const returned = await recorder.waitFor('returned', (event) => event.jid === run.jid, 'the acknowledgement of the return')
    expect(returned.fromSpool).toBe(false)
    expect(recorder.of('spooled')).toEqual([])
    expect(await readdir(spoolDir(opts.cachedir)).catch(() => [])).toEqual([])
  })
})
