/**
 * The minion checks its own id with the master's rule before it starts (a bad id used to start and
 * retry `_auth` forever), and authenticates under the NFC form of its configured id.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { InvalidMinionIdError } from '@brine/crypt'
import { silentLogger } from '@brine/transport'
import { Minion } from '../src/minion.js'
import { deadline } from './modules-fixture.js'
import { job, StandInMaster, testMinionConfig } from './stand-in-master.js'

describe.each(['zeromq', 'tcp'])('a minion id over %s', (transportName) => {
  let dir: string
  let master: StandInMaster | undefined
  let minion: Minion | undefined

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-minion-id-'))
  })
  afterEach(async () => {
    await minion?.stop()
    await master?.close()
    minion = undefined
    master = undefined
    await rm(dir, { recursive: true, force: true })
  })

  it.each([
    ['a/b', 'contains a path separator'],
    ['m'.repeat(300), 'is 300 bytes long; the limit is 237'],
    ['m'.repeat(238), 'is 238 bytes long; the limit is 237'],
    ['web\u200b1', 'invisible or direction-changing character (U+200B)'],
    ['web1\u202e', 'U+202E'],
  ])('refuses %j before connecting: %s', async (id, reason) => {
    master = await StandInMaster.start(transportName, dir, { autoAccept: true })
    const opts = await testMinionConfig(transportName, dir, master, id, { name: 'bad' })
    const error = (() => {
      try {
        minion = new Minion(opts, { logger: silentLogger })
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
    master = await StandInMaster.start(transportName, dir, { autoAccept: true })
    const opts = await testMinionConfig(transportName, dir, master, 'cafe\u0301', { name: 'nfd' })
    minion = new Minion(opts, { logger: silentLogger })
    expect(minion.id).toBe('caf\u00e9')
    await minion.start()
    await deadline(minion.authenticated, 8000, 'first authentication')
    expect((await master.store.list()).minions).toEqual(['caf\u00e9'])
    await master.waitSubscribed()
    const ping = job('test.ping', [], { tgt: ['caf\u00e9'], tgt_type: 'list' })
    await master.publish(ping, ['caf\u00e9'])
    const ret = await master.waitForLoad('_return', ping.jid as string)
    expect(ret).toMatchObject({ id: 'caf\u00e9', return: true })
  })
})
