import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { decode, encode } from '@brine/core'
import {
  acceptAuthReply,
  boxSharedKey,
  buildAuthRequest,
  DecryptError,
  fingerprint,
  generateKeys,
  handleAuth,
  loadOrCreateKeys,
  CryptCache,
  MasterKeyMismatchError,
  masterPinFile,
  openAuthReply,
  openPublish,
  parsePublicKeys,
  PkiStore,
  publicKeysOf,
  ReplayError,
  sealPublish,
  SessionKeys,
  SignatureError,
  StaleSessionKeyError,
  type AuthRequest,
  type KeyPair,
} from '../src/index.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()
/** What crosses the wire: msgpack both ways, so Uint8Arrays come back as Buffers. */
const wire = <T>(value: T): T => decode(encode(value)) as T

async function setup(): Promise<{ store: PkiStore; session: SessionKeys; master: KeyPair; minion: KeyPair; minionPki: string }> {
  const store = await PkiStore.open(join(await tempDir(), 'master'))
  const { keys: master } = await loadOrCreateKeys(store.pkiDir, 'master')
  const minionPki = join(await tempDir(), 'minion')
  const { keys: minion } = await loadOrCreateKeys(minionPki, 'minion')
  return { store, session: new SessionKeys(), master, minion, minionPki }
}

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  )

describe('_auth handshake', () => {
  it('pending, then accepted: the minion opens the session key and pins the master', async () => {
    const { store, session, master, minion, minionPki } = await setup()

    const first = await handleAuth(wire(buildAuthRequest('web1', minion)), store, session, master)
    expect(first.reply).toMatchObject({ ret: false, reason: 'pending' })
    expect(first.event).toMatchObject({ act: 'pend', id: 'web1', result: true })
    expect(first.changes).toEqual([{ id: 'web1', act: 'pend', to: 'pending' }])
    const request0 = buildAuthRequest('web1', minion)
    expect(await acceptAuthReply(wire(first.reply), request0, minion, { pkiDir: minionPki })).toMatchObject({ ok: false, reason: 'pending' })

    await store.accept('web1')
    const request = buildAuthRequest('web1', minion)
    const outcome = await handleAuth(wire(request), store, session, master)
    expect(outcome.reply.ret).toBe(true)
    expect(outcome.event).toMatchObject({ act: 'accept', id: 'web1', result: true })

    const result = await acceptAuthReply(wire(outcome.reply), request, minion, { pkiDir: minionPki })
    if (!result.ok) throw new Error(`auth refused: ${result.message}`)
    expect(result.firstContact).toBe(true)
    expect(result.session.gen).toBe(session.current().gen)
    expect(Buffer.from(result.session.key)).toEqual(Buffer.from(session.current().key))
    const pinFile = join(minionPki, 'minion_master.pub')
    expect(parsePublicKeys(await readFile(pinFile, 'utf8'), pinFile)).toEqual(publicKeysOf(master))

    // The minion can now read the master's publishes.
    const publish = wire(sealPublish({ fun: 'test.ping' }, session.current(), master.sign.secretKey))
    expect(openPublish(publish, result.session, result.masterPub.sign)).toEqual({ fun: 'test.ping' })

    // Next time the pin is checked, not rewritten.
    const request2 = buildAuthRequest('web1', minion)
    const again = await acceptAuthReply(wire((await handleAuth(wire(request2), store, session, master)).reply), request2, minion, { pkiDir: minionPki })
    expect(again).toMatchObject({ ok: true, firstContact: false })
  })

  it('auto_accept accepts on first contact', async () => {
    const { store, session, master, minion } = await setup()
    const request = buildAuthRequest('web1', minion)
    const outcome = await handleAuth(wire(request), store, session, master, { autoAccept: true })
    expect(openAuthReply(wire(outcome.reply), request, minion)).toMatchObject({ ok: true })
  })

  it('hands back the box key it agreed with an accepted minion (the one the minion agrees), and none with a refusal', async () => {
    const { store, session, master, minion } = await setup()
    const pending = await handleAuth(wire(buildAuthRequest('web1', minion)), store, session, master)
    expect(pending.reply).toMatchObject({ ret: false, reason: 'pending' })
    expect(pending.sharedKey).toBeUndefined()
    const accepted = await handleAuth(wire(buildAuthRequest('web2', minion)), store, session, master, { autoAccept: true })
    expect(accepted.reply.ret).toBe(true)
    expect(Buffer.compare(accepted.sharedKey!, boxSharedKey(master.box.publicKey, minion.box.secretKey))).toBe(0)
    expect(Buffer.compare(accepted.sharedKey!, boxSharedKey(minion.box.publicKey, master.box.secretKey))).toBe(0)
  })

  it('refuses a master whose keys differ from the pinned ones', async () => {
    const { store, session, minion, minionPki } = await setup()
    const realMaster = generateKeys()
    const request = buildAuthRequest('web1', minion)
    await store.submit('web1', publicKeysOf(minion), { autoAccept: true })
    const genuine = await handleAuth(wire(request), store, session, realMaster)
    expect(await acceptAuthReply(wire(genuine.reply), request, minion, { pkiDir: minionPki })).toMatchObject({ ok: true })

    const rogue = generateKeys()
    const request2 = buildAuthRequest('web1', minion)
    const fromRogue = await handleAuth(wire(request2), store, session, rogue)
    const error = await rejection(acceptAuthReply(wire(fromRogue.reply), request2, minion, { pkiDir: minionPki }))
    expect(error).toBeInstanceOf(MasterKeyMismatchError)
    expect(error).toMatchObject({ source: 'pinned', expected: fingerprint(publicKeysOf(realMaster)), actual: fingerprint(publicKeysOf(rogue)) })
    // The pin is not replaced by the rogue's keys.
    const pinFile = join(minionPki, 'minion_master.pub')
    expect(parsePublicKeys(await readFile(pinFile, 'utf8'), pinFile)).toEqual(publicKeysOf(realMaster))
  })

  it('refuses a master whose fingerprint is not master_finger, before pinning anything', async () => {
    const { store, session, master, minion, minionPki } = await setup()
    await store.submit('web1', publicKeysOf(minion), { autoAccept: true })
    const request = buildAuthRequest('web1', minion)
    const reply = wire((await handleAuth(wire(request), store, session, master)).reply)
    const wrongFinger = fingerprint(publicKeysOf(generateKeys()))
    const error = await rejection(acceptAuthReply(reply, request, minion, { pkiDir: minionPki, masterFinger: wrongFinger }))
    expect(error).toBeInstanceOf(MasterKeyMismatchError)
    expect(error).toMatchObject({ source: 'master_finger' })
    await expect(readFile(join(minionPki, 'minion_master.pub'))).rejects.toMatchObject({ code: 'ENOENT' })
    // The right fingerprint, in any case and with or without colons, is accepted.
    const finger = fingerprint(publicKeysOf(master)).toUpperCase().replaceAll(':', '')
    expect(await acceptAuthReply(reply, request, minion, { pkiDir: minionPki, masterFinger: finger })).toMatchObject({ ok: true })
  })

  it('pins each of several masters in a file of its own, named from its address', async () => {
    const { store, session, minion, minionPki } = await setup()
    await store.submit('web1', publicKeysOf(minion), { autoAccept: true })
    const first = generateKeys()
    const second = generateKeys()
    const cache = new CryptCache()
    const firstFile = masterPinFile('10.0.0.1', 4506)
    const secondFile = masterPinFile('salt-2.example.com', 4506)
    expect([firstFile, secondFile]).toEqual(['minion_master-10.0.0.1-4506.pub', 'minion_master-salt-2.example.com-4506.pub'])
    for (const [keys, pinFile] of [
      [first, firstFile],
      [second, secondFile],
    ] as const) {
      const request = buildAuthRequest('web1', minion, Date.now(), cache)
      const reply = wire((await handleAuth(wire(request), store, session, keys, { cache: new CryptCache() })).reply)
      expect(await acceptAuthReply(reply, request, minion, { pkiDir: minionPki, pinFile, cache })).toMatchObject({ ok: true, firstContact: true })
      const path = join(minionPki, pinFile)
      expect(parsePublicKeys(await readFile(path, 'utf8'), path)).toEqual(publicKeysOf(keys))
    }
    await expect(readFile(join(minionPki, 'minion_master.pub'))).rejects.toMatchObject({ code: 'ENOENT' })
    // Each pin holds for its own master only: the second master's keys at the first address are refused.
    const request = buildAuthRequest('web1', minion)
    const reply = wire((await handleAuth(wire(request), store, session, second)).reply)
    const refused = await rejection(acceptAuthReply(reply, request, minion, { pkiDir: minionPki, pinFile: firstFile }))
    expect(refused).toBeInstanceOf(MasterKeyMismatchError)
    expect(refused).toMatchObject({ source: 'pinned', message: expect.stringContaining(join(minionPki, firstFile)) })
    // An address that is not a plain host name never becomes a path of its own.
    expect(masterPinFile('::1', 4506)).toMatch(/^minion_master-h[0-9a-f]{16}-4506\.pub$/)
    expect(masterPinFile('../../etc', 4506, 'syndic_master')).toMatch(/^syndic_master-h[0-9a-f]{16}-4506\.pub$/)
  })

  it('denies a second minion claiming an accepted id with other keys', async () => {
    const { store, session, master, minion } = await setup()
    await store.submit('web1', publicKeysOf(minion), { autoAccept: true })
    const impostor = generateKeys()
    const outcome = await handleAuth(wire(buildAuthRequest('web1', impostor)), store, session, master, { autoAccept: true })
    expect(outcome.reply).toMatchObject({ ret: false, reason: 'denied' })
    expect(outcome.event).toMatchObject({ act: 'denied', result: false })
    expect((await store.list()).minions_denied).toEqual(['web1'])
  })

  it('refuses rejected minions, bad signatures, invalid ids and malformed requests without throwing', async () => {
    const { store, session, master, minion } = await setup()
    await store.submit('web1', publicKeysOf(minion))
    await store.reject('web1')
    expect((await handleAuth(wire(buildAuthRequest('web1', minion)), store, session, master)).reply).toMatchObject({ reason: 'rejected' })

    const request = buildAuthRequest('web2', minion)
    // Claims web2 but swaps in someone else's sign key: the signature no longer verifies.
    const swapped: AuthRequest = { ...request, pub: { ...request.pub, sign: generateKeys().sign.publicKey } }
    expect((await handleAuth(wire(swapped), store, session, master)).reply).toMatchObject({ reason: 'bad signature' })
    const renamed: AuthRequest = { ...request, id: 'web3' }
    expect((await handleAuth(wire(renamed), store, session, master)).reply).toMatchObject({ reason: 'bad signature' })

    const traversal = buildAuthRequest('../../etc/passwd', minion)
    const outcome = await handleAuth(wire(traversal), store, session, master)
    expect(outcome.reply).toMatchObject({ ret: false, reason: 'invalid id' })
    expect(outcome.event).toBeUndefined()

    for (const junk of [null, 'hello', { cmd: '_auth' }, { ...request, token: new Uint8Array(3) }]) {
      expect((await handleAuth(junk, store, session, master)).reply).toMatchObject({ ret: false, reason: 'malformed' })
    }
    expect((await store.list()).minions_pre).toEqual([])
  })

  it('bounds clock skew when asked', async () => {
    const { store, session, master, minion } = await setup()
    const request = buildAuthRequest('web1', minion, 1_000_000)
    const outcome = await handleAuth(wire(request), store, session, master, { maxClockSkewMs: 60_000, now: 2_000_000 })
    expect(outcome.reply).toMatchObject({ ret: false, reason: 'stale timestamp' })
  })

  it('refuses a replayed or tampered acceptance', async () => {
    const { store, session, master, minion } = await setup()
    await store.submit('web1', publicKeysOf(minion), { autoAccept: true })
    const oldRequest = buildAuthRequest('web1', minion)
    const oldReply = wire((await handleAuth(wire(oldRequest), store, session, master)).reply)
    session.rotate()
    // A recorded reply (old session key) answered to a new request is refused.
    const newRequest = buildAuthRequest('web1', minion)
    expect(() => openAuthReply(oldReply, newRequest, minion)).toThrow(ReplayError)
    // Tampering with anything signed breaks the signature.
    if (!oldReply.ret) throw new Error('expected an acceptance')
    expect(() => openAuthReply({ ...oldReply, gen: oldReply.gen + 1 }, oldRequest, minion)).toThrow(SignatureError)
    // Another minion cannot open the session key sealed for this one.
    const other = generateKeys()
    const otherRequest = { ...oldRequest, pub: { box: other.box.publicKey, sign: other.sign.publicKey } }
    expect(() => openAuthReply(oldReply, otherRequest, other)).toThrow(SignatureError)
    expect(() => openAuthReply(oldReply, oldRequest, { ...minion, box: other.box })).toThrow(SignatureError)
  })

  it("carries the master's time, the publish port and the session's lifetime, all signed; a refusal its time as a hint", async () => {
    const { store, session, master, minion } = await setup()
    const pending = await handleAuth(wire(buildAuthRequest('web1', minion)), store, session, master, { now: 1_800_000_000_000 })
    expect(openAuthReply(wire(pending.reply), buildAuthRequest('web1', minion), minion)).toEqual({
      ok: false,
      reason: 'pending',
      message: 'key is pending acceptance on the master',
      masterTime: 1_800_000_000_000,
    })
    await store.accept('web1')
    const request = buildAuthRequest('web1', minion, 1_800_000_000_500)
    const options = { now: 1_800_000_001_000, publishPort: 4605, sessionTtlMs: 86_400_000 }
    const reply = wire((await handleAuth(wire(request), store, session, master, options)).reply)
    expect(openAuthReply(reply, request, minion)).toMatchObject({ ok: true, masterTime: 1_800_000_001_000, publishPort: 4605, sessionTtlMs: 86_400_000 })
    if (!reply.ret) throw new Error('expected an acceptance')
    for (const tampered of [
      { ...reply, time: reply.time + 3_600_000 },
      { ...reply, publish_port: 4505 },
      { ...reply, session_ttl: 0 },
    ]) {
      expect(() => openAuthReply(tampered, request, minion)).toThrow(SignatureError)
    }
    expect(() => openAuthReply({ ...reply, publish_port: 70_000 }, request, minion)).toThrow(/publish_port is not a port number/)
    // Without a port to tell (publishPort absent), the minion hears none.
    const quiet = wire((await handleAuth(wire(request), store, session, master)).reply)
    expect(openAuthReply(quiet, request, minion)).toMatchObject({ ok: true, publishPort: undefined, sessionTtlMs: 0 })
  })

  it('after a delete, a replayed _auth (signed before it) does not re-accept the key under auto_accept; a fresh one does', async () => {
    const { store, session, master, minion } = await setup()
    const recorded = wire(buildAuthRequest('web1', minion, Date.now() - 1000))
    expect((await handleAuth(recorded, store, session, master, { autoAccept: true })).reply.ret).toBe(true)
    await store.delete('web1')
    const replayed = await handleAuth(recorded, store, session, master, { autoAccept: true })
    expect(replayed.reply).toMatchObject({ ret: false, reason: 'pending' })
    expect(replayed.event).toMatchObject({ act: 'pend', id: 'web1' })
    expect(await store.state('web1')).toBe('pending')
    const fresh = await handleAuth(wire(buildAuthRequest('web1', minion, Date.now() + 1)), store, session, master, { autoAccept: true })
    expect(fresh.reply.ret).toBe(true)
    expect(await store.state('web1')).toBe('accepted')
  })

  it('rotation makes the session a minion holds stale, and re-auth recovers', async () => {
    const { store, session, master, minion } = await setup()
    await store.submit('web1', publicKeysOf(minion), { autoAccept: true })
    const request = buildAuthRequest('web1', minion)
    const result = openAuthReply(wire((await handleAuth(wire(request), store, session, master)).reply), request, minion)
    if (!result.ok) throw new Error('expected acceptance')

    // Deleting another minion's key rotates the session key, as DESIGN §3 says.
    await store.submit('web2', publicKeysOf(generateKeys()), { autoAccept: true })
    const deleted = await store.delete('web2')
    expect(deleted.rotateSession).toBe(true)
    session.rotate()

    const publish = sealPublish({ fun: 'test.ping' }, session.current(), master.sign.secretKey)
    expect(() => openPublish(publish, result.session, master.sign.publicKey)).toThrow(StaleSessionKeyError)
    expect(() => openPublish(publish, { key: result.session.key, gen: session.current().gen }, master.sign.publicKey)).toThrow(DecryptError)

    const request2 = buildAuthRequest('web1', minion)
    const again = openAuthReply(wire((await handleAuth(wire(request2), store, session, master)).reply), request2, minion)
    if (!again.ok) throw new Error('expected acceptance')
    expect(openPublish(publish, again.session, master.sign.publicKey)).toEqual({ fun: 'test.ping' })
  })
})
