/**
 * A real Minion against a stand-in master over both transports, at the edges: it checks its own id
 * with the master's rule before it starts (a bad id used to start and retry `_auth` forever) and
 * authenticates under the NFC form of its configured id; a return bigger than max_frame_bytes
 * reaches the master cut below the limit with a marker and its retcode kept (it used to fail the
 * send and the spool and be lost); a large return the master is slow to acknowledge is sent once, its try given
 * time for its size (it used to be sent again each return_retry_timer, then spooled and sent once more).
 */
import { readdir } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidMinionIdError } from '@brine/crypt'
import { silentLogger } from '@brine/core'
import { type MinionEvent, spoolDir } from '@brine/link'
import { Minion } from '../src/minion.js'
import { deadline } from './modules-fixture.js'
import { Recorder } from './recorder.js'
import { job, StandInMaster, stopNatsServer, testMinionConfig, useStandInFixture } from './stand-in-master.js'

const LIMIT = 1024 * 1024

afterAll(stopNatsServer)

describe.each(['zeromq', 'tcp', 'nats'])('a minion at the edges over %s', (transportName) => {
  const fixture = useStandInFixture('brine-minion-edge-')

  async function accepted(
    id: string,
    extra: Record<string, unknown> = {},
  ): Promise<{ master: StandInMaster; minion: Minion; recorder: Recorder<MinionEvent> }> {
    const master = (fixture.master = await StandInMaster.start(transportName, fixture.dir, { autoAccept: true }))
    const opts = await testMinionConfig(transportName, fixture.dir, master, id, { name: 'minion', extra })
    const minion = (fixture.minion = new Minion(opts, { logger: silentLogger }))
    const recorder = new Recorder<MinionEvent>(minion)
    await minion.start()
    await deadline(minion.authenticated, 8000, 'first authentication')
    await master.waitSubscribed()
    return { master, minion, recorder }
  }

  it.each([
    ['a/b', 'contains a path separator'],
    ['m'.repeat(300), 'is 300 bytes long; the limit is 237'],
    ['m'.repeat(238), 'is 238 bytes long; the limit is 237'],
    ['web\u200b1', 'invisible or direction-changing character (U+200B)'],
    ['web1\u202e', 'U+202E'],
  ])('refuses the id %j before connecting: %s', async (id, reason) => {
    const master = (fixture.master = await StandInMaster.start(transportName, fixture.dir, { autoAccept: true }))
    const opts = await testMinionConfig(transportName, fixture.dir, master, id, { name: 'bad' })
    const error = (() => {
      try {
        fixture.minion = new Minion(opts, { logger: silentLogger })
      } catch (caught) {
        return caught
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(InvalidMinionIdError)
    expect((error as Error).message).toContain(reason)
    // Nothing reached the master: no _auth, no pending key.
    expect(master.authReplies).toEqual([])
    expect(await master.store.list()).toMatchObject({ minions_pre: [], minions: [] })
  })

  it('authenticates a decomposed id (e + U+0301) as its NFC form and answers jobs targeted at it', async () => {
    const { master, minion } = await accepted('cafe\u0301')
    expect(minion.id).toBe('caf\u00e9')
    expect((await master.store.list()).minions).toEqual(['caf\u00e9'])
    const ping = job('test.ping', [], { tgt: ['caf\u00e9'], tgt_type: 'list' })
    await master.publish(ping, ['caf\u00e9'])
    expect(await master.waitForLoad('_return', ping.jid as string)).toMatchObject({ id: 'caf\u00e9', return: true })
  })

  it('a 3 MB cmd.run output under max_frame_bytes 1 MiB arrives truncated with the marker, retcode kept, nothing spooled', async () => {
    const { master, minion, recorder } = await accepted('big-returner', { max_frame_bytes: LIMIT })
    const run = job('cmd.run', ['head -c 3000000 /dev/zero | tr "\\0" y; exit 7'], { tgt: ['big-returner'], tgt_type: 'list' })
    await master.publish(run, ['big-returner'])
    const ret = await master.waitForLoad('_return', run.jid as string, 20_000)
    expect(ret).toMatchObject({ fun: 'cmd.run', retcode: 7, success: false })
    const text = ret.return as string
    expect(text.startsWith('yyyy')).toBe(true)
    expect(text).toMatch(/\n\[brine: truncated by the minion: 3000000 bytes, the first \d+ kept, to fit max_frame_bytes \(1048576\)\]$/)
    expect(Buffer.byteLength(text)).toBeLessThan(LIMIT)
    const returned = await recorder.waitFor('returned', (event) => event.jid === run.jid, 'the acknowledgement of the return')
    expect(returned.fromSpool).toBe(false)
    expect(recorder.of('spooled')).toEqual([])
    expect(await readdir(spoolDir(minion.opts.cachedir)).catch(() => [])).toEqual([])
  })

  it('an 8 MB return the master is slow to acknowledge reaches it once: no second try, no spool', async () => {
    const { master, minion, recorder } = await accepted('slow-taker')
    const run = job('cmd.run', ['head -c 8000000 /dev/zero | tr "\\0" y'], { tgt: ['slow-taker'], tgt_type: 'list' })
    // The master acknowledges the return 1.5 s after it took it in: five times the minion's return_retry_timer (0.3 s,
    // 2 tries), well within the second a try is given per MiB of the return.
    let held = 0
    master.holdSealed = (load) => (load.cmd === '_return' && load.jid === run.jid && held++ === 0 ? sleep(1500) : undefined)
    await master.publish(run, ['slow-taker'])
    const returned = await recorder.waitFor('returned', (event) => event.jid === run.jid, 'the acknowledgement of the return', 60_000)
    expect(returned.fromSpool).toBe(false)
    expect(recorder.of('spooled')).toEqual([])
    // Opened once, and no try of it came again while it was held (the transport would have coalesced it: counted here).
    expect(master.loads('_return', run.jid as string)).toHaveLength(1)
    expect(master.requestStats()?.coalesced).toBe(0)
    expect((master.loads('_return', run.jid as string)[0]!.return as string).length).toBe(8_000_000)
    expect(await readdir(spoolDir(minion.opts.cachedir)).catch(() => [])).toEqual([])
  }, 120_000)
})
