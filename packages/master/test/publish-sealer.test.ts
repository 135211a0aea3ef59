import { afterEach, describe, expect, it } from 'vitest'
import { generateKeys, openPublish, SessionKeys } from '@brine/crypt'
import { InlinePool, INLINE_SEAL_MAX_BYTES, PublishSealer, ThreadPool, type RequestPool } from '../src/index.js'

// The pool runs the built worker script, as the master does (worker-pool.test.ts checks it is there).
const script = new URL('../dist/request-worker.js', import.meta.url)
const JID = '20261127000000000000'

describe('PublishSealer', () => {
  const pools: RequestPool[] = []
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()))
  })

  it('seals a small publish on the calling thread and a large one on a worker thread; the minion opens both', async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 1, script, masterKeys: master })
    pools.push(pool)
    const sealer = new PublishSealer({ pool, signSecret: master.sign.secretKey })
    const session = new SessionKeys().current()
    const small = { jid: JID, fun: 'test.ping', arg: [], tgt: '*', tgt_type: 'glob' }
    const large = { jid: JID, fun: 'test.echo', arg: ['x'.repeat(INLINE_SEAL_MAX_BYTES)], tgt: '*', tgt_type: 'glob' }

    expect(openPublish(await sealer.seal(JID, small, session), session, master.sign.publicKey)).toEqual(small)
    expect(sealer.stats()).toEqual({ inline: 1, pooled: 0 })
    expect(pool.stats().offThread).toEqual({})

    expect(openPublish(await sealer.seal(JID, large, session), session, master.sign.publicKey)).toEqual(large)
    expect(sealer.stats()).toEqual({ inline: 1, pooled: 1 })
    expect(pool.stats().offThread).toEqual({ 'seal-publish': 1 })
  })

  it('seals every publish on the calling thread with worker_threads 0, and under the session it is given', async () => {
    const master = generateKeys()
    const pool = new InlinePool(master)
    pools.push(pool)
    const sealer = new PublishSealer({ pool, signSecret: master.sign.secretKey, inlineMaxBytes: 10 })
    const sessions = new SessionKeys()
    const before = sessions.current()
    const load = { jid: JID, fun: 'test.echo', arg: ['more than ten bytes'] }
    const first = await sealer.seal(JID, load, before)
    const after = sessions.rotate()
    const second = await sealer.seal(JID, load, after)
    expect(sealer.stats()).toEqual({ inline: 2, pooled: 0 })
    expect(openPublish(first, before, master.sign.publicKey)).toEqual(load)
    expect(openPublish(second, after, master.sign.publicKey)).toEqual(load)
    expect(() => openPublish(second, before, master.sign.publicKey)).toThrow(/generation|session/i)
  })
})
