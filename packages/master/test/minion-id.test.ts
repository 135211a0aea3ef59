/**
 * The master applies the one minion id rule (crypt's) to `_auth` over the wire: an id that cannot be a
 * key file with its temporary suffix is refused with the rule's reason, before any path is built
 * (238–255-byte ids used to pass and then fail with a raw ENAMETOOLONG naming a server path).
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { buildAuthRequest } from '@brine/crypt'
import { addressOf, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

describe.each(['zeromq', 'tcp', 'nats'])('minion ids at _auth over %s', (transport) => {
  it('accepts an id of exactly 237 bytes and refuses 238–255 bytes, look-alikes and decomposed ids with the reason, writing nothing', async () => {
    const dir = await tempDir()
    const { master } = await startMaster(dir, { transport, auto_accept: true })
    const address = addressOf(master)

    const longest = 'm'.repeat(237)
    const ok = await FakeMinion.start(transport, longest, address, join(dir, 'ok-pki'))
    expect(await ok.auth()).toEqual({ ok: true })

    for (const [id, reason] of [
      ['m'.repeat(238), 'is 238 bytes long; the limit is 237'],
      ['m'.repeat(255), 'is 255 bytes long; the limit is 237'],
      ['web\u200b1', 'invisible or direction-changing character (U+200B)'],
      ['cafe\u0301', 'normalization form C (NFC)'],
    ] as const) {
      const minion = await FakeMinion.start(transport, id, address, join(dir, `bad-pki-${id.length}`))
      const reply = (await minion.request.send({ enc: 'clear', load: buildAuthRequest(id, minion.keys) })) as {
        ret?: unknown
        reason?: unknown
        message?: unknown
      }
      expect(reply).toMatchObject({ ret: false, reason: 'invalid id' })
      expect(reply.message).toContain(reason)
      expect(reply.message).not.toContain(dir)
      expect(reply.message).not.toContain('ENAMETOOLONG')
    }
    const pki = master.opts.pki_dir
    expect(await readdir(join(pki, 'minions'))).toEqual([longest])
    expect(await readdir(join(pki, 'minions_pre'))).toEqual([])
  })
})
