import nacl from 'tweetnacl'
import { describe, expect, it } from 'vitest'
import { decode, encode } from '@brine/core'
import {
  boxSharedKey,
  CryptCache,
  DecryptError,
  generateKeys,
  InvalidMinionIdError,
  MinionBoxes,
  MinionNotAcceptedError,
  PeerBox,
  PkiStore,
  publicKeysOf,
} from '../src/index.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()
const master = generateKeys()
const web1 = generateKeys()
const web2 = generateKeys()
const ret = { cmd: '_return', id: 'web1', jid: '20261122170903123456', fun: 'test.ping', return: true, retcode: 0, success: true }

async function masterSide(): Promise<{ boxes: MinionBoxes; store: PkiStore }> {
  const store = await PkiStore.open(await tempDir())
  await store.submit('web1', publicKeysOf(web1), { autoAccept: true })
  await store.submit('web2', publicKeysOf(web2), { autoAccept: true })
  const boxes = new MinionBoxes(master.box.secretKey, async (id) => (await store.acceptedKeys(id))?.box)
  return { boxes, store }
}

const minionBox = (id: string, keys = web1, cache?: CryptCache): PeerBox =>
  new PeerBox({ id, role: 'minion', secretKey: keys.box.secretKey, peerPublicKey: master.box.publicKey, ...(cache === undefined ? {} : { cache }) })

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  )

describe('sealed minion requests', () => {
  it('never reuses a nonce, across many refills of the nonce pool, nor without one', async () => {
    const { boxes } = await masterSide()
    const pooled = minionBox('web1', web1, new CryptCache())
    const unpooled = minionBox('web1')
    const nonces = new Set<string>()
    for (let index = 0; index < 2000; index++) {
      const sealed = (index % 4 === 3 ? unpooled : pooled).seal({ ...ret, index })
      expect(sealed.nonce).toHaveLength(24)
      nonces.add(Buffer.from(sealed.nonce).toString('hex'))
      if (index % 500 === 0) expect((await boxes.open(decode(encode(sealed)))).load).toEqual({ ...ret, index })
    }
    expect(nonces.size).toBe(2000)
  })

  it("computes nacl's box.before exactly (native X25519, then HSalsa20), and refuses a low-order peer key", () => {
    // Many random pairs: one byte of difference anywhere (a clamping or an HSalsa20 constant) would show.
    for (let index = 0; index < 256; index++) {
      const a = nacl.box.keyPair()
      const b = nacl.box.keyPair()
      expect(boxSharedKey(b.publicKey, a.secretKey)).toEqual(nacl.box.before(b.publicKey, a.secretKey))
      expect(boxSharedKey(a.publicKey, b.secretKey)).toEqual(boxSharedKey(b.publicKey, a.secretKey))
    }
    expect(() => boxSharedKey(new Uint8Array(32), web1.box.secretKey)).toThrow(DecryptError)
    // Through a cache: the same bytes, agreed once (the same array comes back), and a low-order key still refused.
    const cache = new CryptCache()
    const once = boxSharedKey(web1.box.publicKey, master.box.secretKey, cache)
    expect(once).toEqual(nacl.box.before(web1.box.publicKey, master.box.secretKey))
    expect(boxSharedKey(web1.box.publicKey, master.box.secretKey, cache)).toBe(once)
    expect(() => boxSharedKey(new Uint8Array(32), master.box.secretKey, cache)).toThrow(DecryptError)
  })

  it("a swarm's shared cache imports the master's public key once for all its minions' boxes, each agreed exactly", () => {
    const cache = new CryptCache()
    const peer = cache.agreementKey(master.box.publicKey)
    for (let index = 0; index < 20; index++) {
      const minion = nacl.box.keyPair()
      expect(boxSharedKey(master.box.publicKey, minion.secretKey, cache)).toEqual(nacl.box.before(master.box.publicKey, minion.secretKey))
    }
    // The same key object throughout (an equal array elsewhere finds it too), and another peer's key is a key of its own.
    expect(cache.agreementKey(new Uint8Array(master.box.publicKey))).toBe(peer)
    expect(cache.agreementKey(web1.box.publicKey)).not.toBe(peer)
    // Bounded: beyond `agreementKeys` the least recently used goes, and is imported again when needed.
    const small = new CryptCache({ agreementKeys: 2 })
    const first = small.agreementKey(master.box.publicKey)
    small.agreementKey(web1.box.publicKey)
    small.agreementKey(web2.box.publicKey)
    expect(small.agreementKey(master.box.publicKey)).not.toBe(first)
    expect(boxSharedKey(master.box.publicKey, web1.box.secretKey, small)).toEqual(nacl.box.before(master.box.publicKey, web1.box.secretKey))
  })

  it('a box from a shared key computed elsewhere (a worker) opens what the minion sealed', async () => {
    const shared = boxSharedKey(web1.box.publicKey, master.box.secretKey)
    const box = new PeerBox({ id: 'web1', role: 'master', peerPublicKey: web1.box.publicKey, sharedKey: shared })
    expect(box.open(decode(encode(minionBox('web1').seal(ret))))).toEqual(ret)
    expect(() => new PeerBox({ id: 'web1', role: 'master', peerPublicKey: web1.box.publicKey, sharedKey: new Uint8Array(5) })).toThrow(
      /shared key must be 32 bytes/,
    )
  })

  it("the master opens a minion's sealed return and learns who sent it", async () => {
    const { boxes } = await masterSide()
    const sealed = decode(encode(minionBox('web1').seal(ret)))
    const opened = await boxes.open(sealed)
    expect(opened.id).toBe('web1')
    expect(opened.load).toEqual(ret)
    // And answers it the other way.
    const reply = await boxes.seal('web1', { ok: true })
    expect(minionBox('web1').open(decode(encode(reply)))).toEqual({ ok: true })
  })

  it("one minion cannot forge another's return", async () => {
    const { boxes } = await masterSide()
    // web2 seals with its own secret key but claims to be web1.
    const forged = minionBox('web1', web2).seal({ ...ret, return: 'forged' })
    const error = await rejection(boxes.open(forged))
    expect(error).toBeInstanceOf(DecryptError)
    expect((error as Error).message).toContain('"web1"')
    // Re-labelling a genuine web2 message as web1 fails as well.
    const relabelled = { ...minionBox('web2', web2).seal(ret), id: 'web1' }
    expect(await rejection(boxes.open(relabelled))).toBeInstanceOf(DecryptError)
  })

  it('refuses a master message reflected back as if a minion sent it', async () => {
    const { boxes } = await masterSide()
    const reply = await boxes.seal('web1', { cmd: '_return', return: 'reflected' })
    expect(await rejection(boxes.open(reply))).toBeInstanceOf(DecryptError)
  })

  it('refuses a tampered box, unaccepted minions and invalid ids', async () => {
    const { boxes, store } = await masterSide()
    const sealed = minionBox('web1').seal(ret)
    const tampered = { ...sealed, box: sealed.box.slice() }
    tampered.box[0]! ^= 1
    expect(await rejection(boxes.open(tampered))).toBeInstanceOf(DecryptError)
    await store.delete('web1')
    expect(await rejection(boxes.open(sealed))).toBeInstanceOf(MinionNotAcceptedError)
    expect(await rejection(boxes.open({ ...sealed, id: '../minions/web2' }))).toBeInstanceOf(InvalidMinionIdError)
  })

  it("opens a known minion's request without waiting only while its accepted key is the box's, with the same checks", async () => {
    const store = await PkiStore.open(await tempDir())
    await store.submit('web1', publicKeysOf(web1), { autoAccept: true })
    const boxes = new MinionBoxes(master.box.secretKey, async (id) => (await store.acceptedKeys(id))?.box, {
      lookupNow: (id) => store.acceptedKeysNow(id)?.box,
    })
    const sealed = decode(encode(minionBox('web1').seal(ret)))
    // No box yet: nothing opened now; open derives it.
    expect(boxes.openNow(sealed)).toBeUndefined()
    expect((await boxes.open(sealed)).load).toEqual(ret)
    const opened = boxes.openNow(sealed)
    expect(opened).toMatchObject({ id: 'web1', load: ret })
    expect(opened?.box).toBeInstanceOf(PeerBox)
    // The same refusals as open, thrown.
    const tampered = { ...minionBox('web1').seal(ret), box: minionBox('web1').seal(ret).box.slice() }
    tampered.box[0]! ^= 1
    expect(() => boxes.openNow(tampered)).toThrow(DecryptError)
    expect(() => boxes.openNow(minionBox('web1', web2).seal(ret))).toThrow(DecryptError)
    // The key no longer accepted: nothing opened now, and open refuses.
    await store.delete('web1')
    expect(boxes.openNow(sealed)).toBeUndefined()
    expect(await rejection(boxes.open(sealed))).toBeInstanceOf(MinionNotAcceptedError)
    // Accepted again under another key: the old box is not used; open derives the new one.
    await store.submit('web1', publicKeysOf(web2), { autoAccept: true, signedAt: Date.now() + 1 })
    const byNewKey = minionBox('web1', web2).seal(ret)
    expect(boxes.openNow(byNewKey)).toBeUndefined()
    expect((await boxes.open(byNewKey)).load).toEqual(ret)
    expect(boxes.openNow(byNewKey)?.load).toEqual(ret)
    expect(() => boxes.openNow(sealed)).toThrow(DecryptError)
    // Without lookupNow nothing is opened this way.
    expect((await masterSide()).boxes.openNow(sealed)).toBeUndefined()
  })

  it('can bound the age of a message', () => {
    const master1 = new PeerBox({ id: 'web1', role: 'master', secretKey: master.box.secretKey, peerPublicKey: web1.box.publicKey })
    const sealed = minionBox('web1').seal(ret, 1_000_000)
    expect(master1.open(sealed, { maxAgeMs: 60_000, now: 1_030_000 })).toEqual(ret)
    expect(() => master1.open(sealed, { maxAgeMs: 60_000, now: 1_100_000 })).toThrow(DecryptError)
  })
})

describe('shared keys derived ahead of a minion request (MinionBoxes.hold)', () => {
  async function counted(): Promise<{ boxes: MinionBoxes; derived: string[] }> {
    const store = await PkiStore.open(await tempDir())
    await store.submit('web1', publicKeysOf(web1), { autoAccept: true })
    await store.submit('web2', publicKeysOf(web2), { autoAccept: true })
    const derived: string[] = []
    const boxes = new MinionBoxes(master.box.secretKey, async (id) => (await store.acceptedKeys(id))?.box, {
      deriveSharedKey: async (id, peerPublicKey) => {
        derived.push(id)
        return boxSharedKey(peerPublicKey, master.box.secretKey)
      },
    })
    return { boxes, derived }
  }

  it('a request waiting for a held key, and one after it is in, open with it: nothing derived per request', async () => {
    const { boxes, derived } = await counted()
    let deliver!: (key: Uint8Array) => void
    boxes.hold('web1', web1.box.publicKey, new Promise((resolve) => (deliver = resolve)))
    const first = boxes.open(minionBox('web1').seal(ret))
    deliver(boxSharedKey(web1.box.publicKey, master.box.secretKey))
    expect((await first).load).toEqual(ret)
    boxes.hold('web2', web2.box.publicKey, Promise.resolve(boxSharedKey(web2.box.publicKey, master.box.secretKey)))
    await new Promise((resolve) => setImmediate(resolve))
    expect(boxes.knows('web2')).toBe(true)
    expect((await boxes.open(minionBox('web2', web2).seal({ ...ret, id: 'web2' }))).load).toMatchObject({ id: 'web2' })
    expect(derived).toEqual([])
  })

  it('a key held for another public key than the accepted one, or one whose derivation failed, is not used: the request derives its own', async () => {
    const { boxes, derived } = await counted()
    const stranger = generateKeys()
    boxes.hold('web1', stranger.box.publicKey, Promise.resolve(boxSharedKey(stranger.box.publicKey, master.box.secretKey)))
    boxes.hold('web2', web2.box.publicKey, Promise.reject(new Error('worker gone')))
    expect((await boxes.open(minionBox('web1').seal(ret))).load).toEqual(ret)
    expect((await boxes.open(minionBox('web2', web2).seal({ ...ret, id: 'web2' }))).load).toMatchObject({ id: 'web2' })
    expect(derived.sort()).toEqual(['web1', 'web2'])
  })
})
