import { readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { fingerprint, generateKeys, InvalidMinionIdError, KeyFileError, parsePublicKeys, PkiStore, publicKeysOf, type PublicKeys } from '../src/index.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()
const newPub = (): PublicKeys => publicKeysOf(generateKeys())

async function storeWith(pending: string[]): Promise<{ store: PkiStore; keys: Map<string, PublicKeys> }> {
  const store = await PkiStore.open(await tempDir())
  const keys = new Map<string, PublicKeys>()
  for (const id of pending) {
    keys.set(id, newPub())
    await store.submit(id, keys.get(id)!)
  }
  return { store, keys }
}

/** A master's store trusting a looked-up key for 1 s on a clock the test moves, another process's store, and web1 accepted. */
async function masterAndCli(): Promise<{ master: PkiStore; cli: PkiStore; pub: PublicKeys; clock: { now: number } }> {
  const pkiDir = await tempDir()
  const clock = { now: 1_000_000 }
  const master = await PkiStore.open(pkiDir, { recheckMs: 1000, now: () => clock.now })
  const cli = await PkiStore.open(pkiDir)
  const pub = newPub()
  await master.submit('web1', pub, { autoAccept: true })
  return { master, cli, pub, clock }
}

describe('PkiStore', () => {
  it("creates Salt's state directories, 0700", async () => {
    const pkiDir = await tempDir()
    await PkiStore.open(pkiDir)
    for (const dir of ['minions_pre', 'minions', 'minions_rejected', 'minions_denied']) {
      expect((await stat(join(pkiDir, dir))).mode & 0o777).toBe(0o700)
    }
  })

  it('puts a new key in minions_pre as a 0600 file, and keeps it pending on retry', async () => {
    const store = await PkiStore.open(await tempDir())
    const pub = newPub()
    const first = await store.submit('web1', pub)
    expect(first).toMatchObject({ state: 'pending', keyMismatch: false, rotateSession: false })
    expect(first.changes).toEqual([{ id: 'web1', act: 'pend', to: 'pending' }])
    expect((await stat(join(store.pkiDir, 'minions_pre', 'web1'))).mode & 0o777).toBe(0o600)
    const again = await store.submit('web1', pub)
    expect(again).toMatchObject({ state: 'pending', changes: [] })
    expect(await store.get('web1')).toEqual({ id: 'web1', state: 'pending', keys: pub })
  })

  it('accepts at once under auto_accept and open_mode', async () => {
    const store = await PkiStore.open(await tempDir())
    expect((await store.submit('a1', newPub(), { autoAccept: true })).state).toBe('accepted')
    expect((await store.submit('o1', newPub(), { openMode: true })).state).toBe('accepted')
    expect((await store.list()).minions).toEqual(['a1', 'o1'])
  })

  it('lists, accepts, rejects and deletes by glob like salt-key, reporting the changes', async () => {
    const { store } = await storeWith(['web1', 'web2', 'db1', 'db2'])
    expect(await store.list()).toEqual({ minions_pre: ['db1', 'db2', 'web1', 'web2'], minions: [], minions_rejected: [], minions_denied: [] })

    const accepted = await store.accept('web*')
    expect(accepted.changes).toEqual([
      { id: 'web1', act: 'accept', from: 'pending', to: 'accepted' },
      { id: 'web2', act: 'accept', from: 'pending', to: 'accepted' },
    ])
    expect(accepted.rotateSession).toBe(false)

    const rejected = await store.reject('db[1]')
    expect(rejected.changes).toEqual([{ id: 'db1', act: 'reject', from: 'pending', to: 'rejected' }])
    // reject only touches pending keys unless told otherwise
    expect((await store.reject('web1')).changes).toEqual([])
    const rejectAccepted = await store.reject('web1', { includeAccepted: true })
    expect(rejectAccepted.changes).toEqual([{ id: 'web1', act: 'reject', from: 'accepted', to: 'rejected' }])
    expect(rejectAccepted.rotateSession).toBe(true)

    expect(await store.list()).toEqual({ minions_pre: ['db2'], minions: ['web2'], minions_rejected: ['db1', 'web1'], minions_denied: [] })
    expect(await store.state('db1')).toBe('rejected')
    expect(await store.state('nobody')).toBeUndefined()

    const deleted = await store.delete('web?')
    expect(deleted.changes).toEqual([
      { id: 'web2', act: 'delete', from: 'accepted' },
      { id: 'web1', act: 'delete', from: 'rejected' },
    ])
    expect(deleted.rotateSession).toBe(true)
    expect((await store.acceptAll()).changes.map((c) => c.id)).toEqual(['db2'])
    expect((await store.accept('db1', { includeRejected: true })).changes).toEqual([{ id: 'db1', act: 'accept', from: 'rejected', to: 'accepted' }])
    expect((await store.deleteAll()).changes.map((c) => c.id)).toEqual(['db1', 'db2'])
    expect(await store.list()).toEqual({ minions_pre: [], minions: [], minions_rejected: [], minions_denied: [] })
  })

  it('rejectAll rejects only pending keys', async () => {
    const { store } = await storeWith(['a', 'b', 'c'])
    await store.accept('a')
    expect((await store.rejectAll()).changes.map((c) => c.id)).toEqual(['b', 'c'])
    expect((await store.list()).minions).toEqual(['a'])
  })

  it('sends a different key for an accepted id to minions_denied and refuses it', async () => {
    const { store, keys } = await storeWith(['web1'])
    await store.accept('web1')
    const impostor = newPub()
    const result = await store.submit('web1', impostor)
    expect(result).toMatchObject({ state: 'denied', keyMismatch: true, changes: [{ id: 'web1', act: 'deny', to: 'denied' }] })
    // The accepted key is untouched; the impostor's is on file under minions_denied.
    expect(await store.acceptedKeys('web1')).toEqual(keys.get('web1'))
    expect(await store.get('web1')).toEqual({ id: 'web1', state: 'accepted', keys: keys.get('web1'), denied: impostor })
    expect((await store.list()).minions_denied).toEqual(['web1'])
    // The real minion still authenticates.
    expect((await store.submit('web1', keys.get('web1')!)).state).toBe('accepted')
  })

  it('denies a different key for a pending id too, and open_mode replaces the key and asks for rotation', async () => {
    const { store, keys } = await storeWith(['web1'])
    expect((await store.submit('web1', newPub())).state).toBe('denied')
    expect(await store.state('web1')).toBe('pending')
    await store.accept('web1')
    const replacement = newPub()
    const open = await store.submit('web1', replacement, { openMode: true })
    expect(open).toMatchObject({ state: 'accepted', rotateSession: true })
    expect(await store.acceptedKeys('web1')).toEqual(replacement)
    expect(await store.acceptedKeys('web1')).not.toEqual(keys.get('web1'))
  })

  it('accepting a denied key replaces the accepted one and asks for rotation', async () => {
    const { store } = await storeWith(['web1'])
    await store.accept('web1')
    const newer = newPub()
    await store.submit('web1', newer)
    const result = await store.accept('web1', { includeDenied: true })
    expect(result).toEqual({ changes: [{ id: 'web1', act: 'accept', from: 'denied', to: 'accepted' }], rotateSession: true })
    expect(await store.acceptedKeys('web1')).toEqual(newer)
  })

  it('keeps refusing a rejected id, whatever key it sends', async () => {
    const { store, keys } = await storeWith(['web1'])
    await store.reject('web1')
    expect((await store.submit('web1', keys.get('web1')!)).state).toBe('rejected')
    expect((await store.submit('web1', newPub(), { autoAccept: true })).state).toBe('rejected')
  })

  it('answers an accepted minion coming back with its key without a change, and still lets a rejected copy win', async () => {
    const { store, keys } = await storeWith(['web1'])
    await store.accept('web1')
    expect(await store.submit('web1', keys.get('web1')!)).toEqual({ state: 'accepted', changes: [], rotateSession: false, keyMismatch: false })
    // The same id also under minions_rejected (copied there by hand): rejected wins, as in Salt.
    const accepted = join(store.pkiDir, 'minions', 'web1')
    await writeFile(join(store.pkiDir, 'minions_rejected', 'web1'), await readFile(accepted, 'utf8'), { mode: 0o600 })
    expect((await store.submit('web1', keys.get('web1')!)).state).toBe('rejected')
    // Another key under the accepted id is still denied.
    expect((await store.submit('web1', newPub())).state).toBe('rejected')
  })

  it('sees a key deleted by another process at the next lookup with recheckMs 0', async () => {
    const pkiDir = await tempDir()
    const master = await PkiStore.open(pkiDir, { recheckMs: 0 })
    const cli = await PkiStore.open(pkiDir)
    const pub = newPub()
    await master.submit('web1', pub, { autoAccept: true })
    expect(await master.acceptedKeys('web1')).toEqual(pub)
    await cli.delete('web1')
    expect(await master.acceptedKeys('web1')).toBeUndefined()
  })

  it("trusts a looked-up key for recheckMs, then sees another process's change", async () => {
    const { master, cli, pub, clock } = await masterAndCli()
    expect(await master.acceptedKeys('web1')).toEqual(pub)
    await cli.delete('web1')
    clock.now += 999
    expect(await master.acceptedKeys('web1')).toEqual(pub)
    clock.now += 1
    expect(await master.acceptedKeys('web1')).toBeUndefined()
    // Replaced by hand (a new file under the same id): the new key once the window has passed. (Signed after
    // the deletion: an older _auth is not auto-accepted any more, see the replay test below.)
    const replacement = newPub()
    await cli.submit('web1', replacement, { autoAccept: true, signedAt: Date.now() + 1 })
    expect(await master.acceptedKeys('web1')).toEqual(replacement)
  })

  it('tells a held key without waiting as acceptedKeys would give it: within recheckMs, then by a stat; nothing it does not hold', async () => {
    const { master, cli, pub, clock } = await masterAndCli()
    await master.submit('web2', newPub(), { autoAccept: true })
    // Not looked up yet: not held, so not told (acceptedKeys reads it).
    expect(master.acceptedKeysNow('web1')).toBeUndefined()
    expect(await master.acceptedKeys('web1')).toEqual(pub)
    expect(master.acceptedKeysNow('web1')).toEqual(pub)
    // Past the window and unchanged on disk: still told, after a stat.
    clock.now += 1000
    expect(master.acceptedKeysNow('web1')).toEqual(pub)
    // Deleted by another process: told within the window as acceptedKeys is, and not after it.
    await cli.delete('web1')
    clock.now += 999
    expect(master.acceptedKeysNow('web1')).toEqual(pub)
    expect(await master.acceptedKeys('web1')).toEqual(pub)
    clock.now += 1
    expect(master.acceptedKeysNow('web1')).toBeUndefined()
    expect(await master.acceptedKeys('web1')).toBeUndefined()
    // Replaced by hand (a new file, a new inode): not told the old key, and the new one once read.
    const replacement = newPub()
    await cli.submit('web1', replacement, { autoAccept: true, signedAt: Date.now() + 1 })
    expect(master.acceptedKeysNow('web1')).toBeUndefined()
    expect(await master.acceptedKeys('web1')).toEqual(replacement)
    expect(master.acceptedKeysNow('web1')).toEqual(replacement)
    // This store's own change: forgotten at once, whatever the window.
    await master.reject('web1', { includeAccepted: true })
    expect(master.acceptedKeysNow('web1')).toBeUndefined()
  })

  it('sees its own changes to an accepted key at once, whatever recheckMs', async () => {
    const { store } = await storeWith(['web1'])
    await store.accept('web1')
    expect(await store.acceptedKeys('web1')).toBeDefined()
    await store.reject('web1', { includeAccepted: true })
    expect(await store.acceptedKeys('web1')).toBeUndefined()
    await store.accept('web1', { includeRejected: true })
    expect(await store.acceptedKeys('web1')).toBeDefined()
    await store.delete('web1')
    expect(await store.acceptedKeys('web1')).toBeUndefined()
  })

  it("lists the accepted ids as list() does, reads the directory again only when it changed, and sees another process's change at once", async () => {
    const pkiDir = await tempDir()
    const master = await PkiStore.open(pkiDir)
    const cli = await PkiStore.open(pkiDir)
    for (const id of ['web2', 'web1', 'db1']) await master.submit(id, newPub(), { autoAccept: true })
    await master.submit('new1', newPub())
    expect(await master.acceptedIds()).toEqual(['db1', 'web1', 'web2'])
    expect(await master.acceptedIds()).toEqual((await master.list()).minions)
    // Changed right after a read (within the file system's clock tick, the mtime may not move): seen all the same.
    await cli.accept('new1')
    expect(await master.acceptedIds()).toEqual(['db1', 'new1', 'web1', 'web2'])
    await cli.delete('web2')
    expect(await master.acceptedIds()).toEqual(['db1', 'new1', 'web1'])
    // A directory last changed long ago: one read serves every later call, as long as it stays unchanged.
    const accepted = join(pkiDir, 'minions')
    const longAgo = new Date(Date.now() - 60_000)
    await utimes(accepted, longAgo, longAgo)
    const first = await master.acceptedIds()
    expect(await master.acceptedIds()).toBe(first)
    expect(Object.isFrozen(first)).toBe(true)
    // Then changed by hand (a key file moved in by another process): its new mtime makes the next call read it.
    await rename(join(pkiDir, 'minions', 'web1'), join(pkiDir, 'minions', 'web3'))
    expect(await master.acceptedIds()).toEqual(['db1', 'new1', 'web3'])
    await utimes(accepted, longAgo, longAgo)
    await master.delete('db1')
    expect(await master.acceptedIds()).toEqual(['new1', 'web3'])
  })

  it('reads the accepted ids again without waiting for the thread pool: the listing settles before the event loop turns', async () => {
    const pkiDir = await tempDir()
    const master = await PkiStore.open(pkiDir)
    for (const id of ['web2', 'web1']) await master.submit(id, newPub(), { autoAccept: true })
    // Just changed: every call within the settling window reads the directory again.
    let listed: readonly string[] | undefined
    void master.acceptedIds().then((ids) => (listed = ids))
    for (let microtask = 0; microtask < 5 && listed === undefined; microtask++) await Promise.resolve()
    expect(listed).toEqual(['web1', 'web2'])
    await rm(join(pkiDir, 'minions'), { recursive: true })
    expect(await master.acceptedIds()).toEqual([])
  })

  it('after a delete, auto_accept takes only an attempt signed after it: an older one (a replay) is a pending key', async () => {
    const pkiDir = await tempDir()
    let now = 5_000_000
    const store = await PkiStore.open(pkiDir, { now: () => now })
    const pub = newPub()
    const signedBefore = now - 1000
    expect((await store.submit('web1', pub, { autoAccept: true, signedAt: signedBefore })).state).toBe('accepted')
    now += 60_000
    await store.delete('web1')
    expect(await store.deletedAt('web1')).toBe(now)
    expect(await readFile(join(pkiDir, '.pki-deleted', 'web1'), 'utf8')).toBe(`${now}\n`)
    expect((await stat(join(pkiDir, '.pki-deleted', 'web1'))).mode & 0o777).toBe(0o600)
    expect((await store.list()).minions_pre).toEqual([])

    // The recorded request, replayed any number of times, leaves the key pending; so does one without a time.
    for (let replay = 0; replay < 3; replay++) {
      const replayed = await store.submit('web1', pub, { autoAccept: true, signedAt: signedBefore })
      expect(replayed.state).toBe('pending')
      expect(replayed.changes).toEqual(replay === 0 ? [{ id: 'web1', act: 'pend', to: 'pending' }] : [])
    }
    expect((await store.submit('web1', pub, { autoAccept: true })).state).toBe('pending')
    expect((await store.submit('web1', pub, { autoAccept: true, signedAt: now })).state).toBe('pending')
    expect(await store.acceptedKeys('web1')).toBeUndefined()

    // The minion itself, signing after the deletion, is a new key under auto_accept: accepted, marker gone.
    const fresh = await store.submit('web1', pub, { autoAccept: true, signedAt: now + 1 })
    expect(fresh).toMatchObject({ state: 'accepted', changes: [{ id: 'web1', act: 'accept', from: 'pending', to: 'accepted' }] })
    expect(await store.deletedAt('web1')).toBeUndefined()
    // And an operator's accept clears a marker too.
    await store.delete('web1')
    await store.submit('web1', pub, { autoAccept: true, signedAt: signedBefore })
    await store.accept('web1')
    expect(await store.deletedAt('web1')).toBeUndefined()
    expect(await store.acceptedKeys('web1')).toEqual(pub)
  })

  it('validates the id before building any path', async () => {
    const store = await PkiStore.open(await tempDir())
    for (const id of ['../etc/passwd', 'a/b', '..', 'a\u0000b']) {
      await expect(store.submit(id, newPub())).rejects.toBeInstanceOf(InvalidMinionIdError)
      await expect(store.get(id)).rejects.toBeInstanceOf(InvalidMinionIdError)
      await expect(store.acceptedKeys(id)).rejects.toBeInstanceOf(InvalidMinionIdError)
    }
    expect(await readdir(join(store.pkiDir, 'minions_pre'))).toEqual([])
  })

  it('reports fingerprints per state, and a corrupt key file by name', async () => {
    const { store, keys } = await storeWith(['web1', 'web2'])
    await store.accept('web1')
    expect(await store.finger('web*')).toEqual([
      { id: 'web2', state: 'pending', fingerprint: fingerprint(keys.get('web2')!) },
      { id: 'web1', state: 'accepted', fingerprint: fingerprint(keys.get('web1')!) },
    ])
    const file = join(store.pkiDir, 'minions', 'web1')
    await writeFile(file, (await readFile(file, 'utf8')).slice(0, 50))
    const error = await store.get('web1').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(KeyFileError)
    expect((error as KeyFileError).file).toBe(file)
  })

  it('serialises concurrent submissions of many minions without losing one', async () => {
    const store = await PkiStore.open(await tempDir())
    const ids = Array.from({ length: 40 }, (_, i) => `m${String(i).padStart(2, '0')}`)
    await Promise.all(ids.map((id) => store.submit(id, newPub())))
    expect((await store.list()).minions_pre).toEqual(ids)
    expect(await readdir(join(store.pkiDir, '.pki-tmp'))).toEqual([])
  })

  it('writes the key files of submissions that arrive together in batches, each answered once its own file is in place', async () => {
    const store = await PkiStore.open(await tempDir())
    const ids = Array.from({ length: 60 }, (_, i) => `m${String(i).padStart(2, '0')}`)
    const keys = new Map(ids.map((id) => [id, newPub()]))
    const answered = await Promise.all(
      ids.map(async (id) => {
        const result = await store.submit(id, keys.get(id)!, { autoAccept: id < 'm30' })
        // Readable the moment its answer comes: the file was written (and synced) before.
        const file = await readFile(join(store.pkiDir, result.state === 'accepted' ? 'minions' : 'minions_pre', id), 'utf8')
        return { id, state: result.state, file }
      }),
    )
    for (const { id, state, file } of answered) {
      expect(state).toBe(id < 'm30' ? 'accepted' : 'pending')
      expect(parsePublicKeys(file, id)).toEqual(keys.get(id))
      expect(await store.get(id)).toEqual({ id, state, keys: keys.get(id) })
    }
    expect(store.keyFileBatches).toBeGreaterThan(0)
    expect(store.keyFileBatches).toBeLessThan(ids.length / 2)
    expect(await readdir(join(store.pkiDir, '.pki-tmp'))).toEqual([])
  })

  it('decides a second attempt of one id in a batch on what the first wrote', async () => {
    const store = await PkiStore.open(await tempDir())
    const [first, impostor, same] = [newPub(), newPub(), newPub()]
    const results = await Promise.all([
      store.submit('web1', first),
      store.submit('web1', impostor),
      store.submit('web2', same),
      store.submit('web2', same, { autoAccept: true }),
    ])
    expect(results.map((result) => result.state)).toEqual(['pending', 'denied', 'pending', 'accepted'])
    expect(await store.get('web1')).toEqual({ id: 'web1', state: 'pending', keys: first, denied: impostor })
    expect(await store.get('web2')).toEqual({ id: 'web2', state: 'accepted', keys: same })
  })

  it('runs a submission made after a key operation after it, even while a batch is open', async () => {
    const { store, keys } = await storeWith(['web1'])
    // A batch in flight (its file being synced), and the next one open behind it when the rejection is queued.
    const inFlight = store.submit('web0', newPub())
    await new Promise(setImmediate)
    const other = store.submit('web2', newPub())
    await new Promise(setImmediate)
    const rejected = store.reject('web1')
    const after = store.submit('web1', keys.get('web1')!, { autoAccept: true })
    await Promise.all([inFlight, other])
    expect((await rejected).changes).toEqual([{ id: 'web1', act: 'reject', from: 'pending', to: 'rejected' }])
    expect(await after).toMatchObject({ state: 'rejected' })
  })
})

describe('PkiStore syndic keys', () => {
  it("marks pending and accepted keys as syndics'; the mark follows the key, not the id", async () => {
    const { store, keys } = await storeWith(['syn1', 'syn2', 'web1'])
    await store.accept('syn2')
    const marked = await store.acceptSyndic(['syn1', 'syn2'])
    expect(marked).toEqual({ syndics: ['syn1', 'syn2'], changes: [{ id: 'syn1', act: 'accept', from: 'pending', to: 'accepted' }], rotateSession: false })
    expect(await readFile(join(store.pkiDir, 'syndics', 'syn1'), 'utf8')).toBe(`${fingerprint(keys.get('syn1')!)}\n`)
    expect([await store.isSyndic('syn1'), await store.isSyndic('syn2'), await store.isSyndic('web1')]).toEqual([true, true, false])
    expect(await store.syndics()).toEqual(['syn1', 'syn2'])
    // Rejected or deleted, the key is no syndic's; accepted again, it is not one until marked again.
    await store.reject('syn1', { includeAccepted: true })
    await store.accept('syn1', { includeRejected: true })
    expect(await store.isSyndic('syn1')).toBe(false)
    await store.delete('syn2')
    expect(await store.syndics()).toEqual([])
    await expect(readdir(join(store.pkiDir, 'syndics'))).resolves.toEqual([])
    // A mark left behind for another key (a key replaced by hand) does not make the new key a syndic's.
    await store.acceptSyndic('syn1')
    const replaced = newPub()
    await store.submit('syn1', replaced, { openMode: true })
    expect(await store.isSyndic('syn1')).toBe(false)
  })

  it('refuses a new id past maxPending without writing it, counting each refusal', async () => {
    const store = await PkiStore.open(await tempDir(), { maxPending: 2 })
    await store.submit('a', newPub())
    await store.submit('b', newPub())
    await expect(store.submit('c', newPub())).rejects.toMatchObject({ name: 'PendingKeyLimitError', limit: 2 })
    expect(store.pendingRefused).toBe(1)
    expect((await store.list()).minions_pre).toEqual(['a', 'b'])
    // auto_accept is not held back.
    expect(await store.submit('d', newPub(), { autoAccept: true })).toMatchObject({ state: 'accepted' })
  })

  it('holds maxPending against a burst of new ids decided before their files are written', async () => {
    // A clock that moves a second per reading: the pending keys are counted again at every attempt, mid-batch.
    let clock = 0
    const store = await PkiStore.open(await tempDir(), { maxPending: 10, now: () => (clock += 1000) })
    const ids = Array.from({ length: 30 }, (_, i) => `n${String(i).padStart(2, '0')}`)
    const settled = await Promise.allSettled(ids.map((id) => store.submit(id, newPub())))
    expect(settled.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(10)
    expect(store.pendingRefused).toBe(20)
    expect((await store.list()).minions_pre).toHaveLength(10)
  })
})
