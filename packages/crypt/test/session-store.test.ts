import { chmod, readFile, stat, writeFile } from 'node:fs/promises'
import { createLogger, type Logger } from '@brine/core'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { fingerprint, generateKeys, PkiStore, publicKeysOf, SESSION_FILE, SESSION_WRITE_SPACING_MS, SessionStore, type PublicKeys } from '../src/index.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()
const master = fingerprint(publicKeysOf(generateKeys()))
const HOUR = 3_600_000

/** A logger that keeps its lines, to read why a key was or was not kept. */
function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = []
  return Object.assign(createLogger({ level: 'debug', write: (line) => lines.push(line) }), { lines })
}

/** A key store with `ids` accepted, a clock the test moves, and a way to open the session store as a master start would. */
async function setup(ids: string[] = ['web1', 'web2']) {
  const pkiDir = await tempDir()
  const pki = await PkiStore.open(pkiDir)
  const keys = new Map<string, PublicKeys>()
  for (const id of ids) {
    keys.set(id, publicKeysOf(generateKeys()))
    await pki.submit(id, keys.get(id)!, { autoAccept: true })
  }
  let now = Date.UTC(2026, 10, 27, 1, 0, 0)
  const clock = {
    now: () => now,
    advance: (ms: number) => {
      now += ms
    },
  }
  const open = async (options: { publishSessionMs?: number; master?: string } = {}) => {
    const logger = recordingLogger()
    const store = await SessionStore.open({
      pkiDir,
      master: options.master ?? master,
      publishSessionMs: options.publishSessionMs ?? 24 * HOUR,
      // A fresh key store each start, as a restarted master has: nothing cached from before.
      acceptedKeys: async (id) => (await PkiStore.open(pkiDir)).acceptedKeys(id),
      now: clock.now,
      logger,
    })
    return { store, logger }
  }
  return { pkiDir, pki, keys, clock, open, file: join(pkiDir, SESSION_FILE) }
}

describe('SessionStore: the session key across a restart', () => {
  it('writes the key 0600 at the first start and keeps it, with its generation and holders, at the next', async () => {
    const { open, file } = await setup()
    const { store: first } = await open()
    expect(first.reused).toBe(false)
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    await first.handedTo('web1')
    await first.handedTo('web2')
    const held = first.keys.current()

    const { store: second, logger } = await open()
    expect(second.reused).toBe(true)
    expect(second.keys.current().gen).toBe(held.gen)
    expect(Buffer.compare(second.keys.current().key, held.key)).toBe(0)
    expect(second.madeAt).toBe(first.madeAt)
    expect(second.holders).toBe(2)
    expect(logger.lines.join('\n')).toMatch(new RegExp(`generation ${held.gen} kept from .*held by 2 minion`))
  })

  it('does not write a kept key again at the start: the file already holds it, and a later holder is written as before', async () => {
    const { open, file } = await setup()
    const { store: first } = await open()
    expect(first.writes).toBe(1)
    await first.handedTo('web1')
    const written = await readFile(file, 'utf8')
    const { mtimeMs } = await stat(file)

    const { store: second } = await open()
    expect(second.reused).toBe(true)
    expect(second.writes).toBe(0)
    expect(await readFile(file, 'utf8')).toBe(written)
    expect((await stat(file)).mtimeMs).toBe(mtimeMs)
    await second.handedTo('web2')
    expect(second.writes).toBe(1)
    const { store: third } = await open()
    expect(third.reused).toBe(true)
    expect(third.holders).toBe(2)
  })

  it('names a minion in the file before handedTo resolves', async () => {
    const { open, file } = await setup()
    const { store } = await open()
    await store.handedTo('web1')
    const written = JSON.parse(await readFile(file, 'utf8')) as { holders: Record<string, string>; gen: number }
    expect(Object.keys(written.holders)).toEqual(['web1'])
    expect(written.gen).toBe(store.keys.current().gen)
  })

  it('names each minion before handedTo resolves when a fleet authenticates over time, in writes at least the spacing apart', async () => {
    const ids = Array.from({ length: 60 }, (_, index) => `web${index}`)
    const { open, file } = await setup(ids)
    const { store } = await open()
    const before = store.writes
    const began = performance.now()
    // One `_auth` every 2 ms, as a fleet's come in over a launch: each reply waits until the file names its minion.
    await Promise.all(
      ids.map(async (id, index) => {
        await new Promise((resolve) => setTimeout(resolve, index * 2))
        await store.handedTo(id)
        const written = JSON.parse(await readFile(file, 'utf8')) as { holders: Record<string, string> }
        expect(written.holders[id]).toBeDefined()
      }),
    )
    const writes = store.writes - before
    // Writes begin at least SESSION_WRITE_SPACING_MS apart: at most one per spacing of the time it took, and one more.
    expect(writes).toBeGreaterThanOrEqual(1)
    expect(writes).toBeLessThanOrEqual(Math.floor((performance.now() - began) / SESSION_WRITE_SPACING_MS) + 1)
    expect(Object.keys((JSON.parse(await readFile(file, 'utf8')) as { holders: Record<string, string> }).holders).sort()).toEqual([...ids].sort())
  })

  it('makes a new key of the next generation when a holder was deleted while the master was down', async () => {
    const { open, pki } = await setup()
    const { store: first } = await open()
    await first.handedTo('web1')
    await first.handedTo('web2')
    const gen = first.keys.current().gen
    await pki.delete('web2')
    const { store: second, logger } = await open()
    expect(second.reused).toBe(false)
    expect(second.keys.current().gen).toBe(gen + 1)
    expect(Buffer.compare(second.keys.current().key, first.keys.current().key)).not.toBe(0)
    expect(logger.lines.join('\n')).toMatch(/minion "web2" held it and is no longer accepted/)
  })

  it('makes a new key when a holder was rejected, or its key replaced, while the master was down', async () => {
    const rejected = await setup()
    const { store: first } = await rejected.open()
    await first.handedTo('web1')
    await rejected.pki.reject('web1', { includeAccepted: true })
    const { store: afterReject } = await rejected.open()
    expect(afterReject.reused).toBe(false)
    expect(afterReject.keys.current().gen).toBe(first.keys.current().gen + 1)

    const replaced = await setup()
    const { store: before } = await replaced.open()
    await before.handedTo('web1')
    await replaced.pki.delete('web1')
    await replaced.pki.submit('web1', publicKeysOf(generateKeys()))
    await replaced.pki.accept('web1')
    expect(await replaced.pki.state('web1')).toBe('accepted')
    const { store: afterReplace, logger } = await replaced.open()
    expect(afterReplace.reused).toBe(false)
    expect(logger.lines.join('\n')).toMatch(/minion "web1" held it under keys that are no longer the accepted ones/)
  })

  it('keeps the key when a minion that never held it was deleted, and when one was accepted while the master was down', async () => {
    const { open, pki, keys } = await setup(['web1', 'web2'])
    const { store: first } = await open()
    await first.handedTo('web1')
    await pki.delete('web2')
    await pki.submit('db1', publicKeysOf(generateKeys()), { autoAccept: true })
    const { store: second } = await open()
    expect(second.reused).toBe(true)
    expect(second.keys.current().gen).toBe(first.keys.current().gen)
    expect(keys.size).toBe(2)
  })

  it('makes a new key once the old one is older than publish_session, and counts its age from when it was made', async () => {
    const { open, clock } = await setup()
    const { store: first } = await open({ publishSessionMs: 2 * HOUR })
    clock.advance(HOUR)
    const { store: second } = await open({ publishSessionMs: 2 * HOUR })
    expect(second.reused).toBe(true)
    expect(second.madeAt).toBe(first.madeAt)
    clock.advance(HOUR)
    const { store: third, logger } = await open({ publishSessionMs: 2 * HOUR })
    expect(third.reused).toBe(false)
    expect(third.keys.current().gen).toBe(first.keys.current().gen + 1)
    expect(third.madeAt).toBe(clock.now())
    expect(logger.lines.join('\n')).toMatch(/older than publish_session \(7200 s\)/)
  })

  it("makes a new key when the master's own keys changed", async () => {
    const { open } = await setup()
    const { store: first } = await open()
    const { store: second, logger } = await open({ master: fingerprint(publicKeysOf(generateKeys())) })
    expect(second.reused).toBe(false)
    expect(second.keys.current().gen).toBe(first.keys.current().gen + 1)
    expect(logger.lines.join('\n')).toMatch(/other master keys/)
  })

  it('writes every rotation, so the generation keeps increasing across restarts', async () => {
    const { open } = await setup()
    const { store: first } = await open()
    const gens = [first.keys.current().gen]
    for (let round = 0; round < 3; round++) {
      const { store } = await open()
      store.rotate()
      gens.push(store.keys.current().gen)
      await store.flush()
    }
    const { store: last } = await open()
    expect(last.reused).toBe(true)
    gens.push(last.keys.current().gen)
    expect(gens).toEqual([gens[0]!, gens[0]! + 1, gens[0]! + 2, gens[0]! + 3, gens[0]! + 3])
    // A rotation hands the key to nobody yet: the holders start again.
    expect(last.holders).toBe(0)
  })

  it('refuses a file others may read: a new key, the file named in the log, and the file written 0600 again', async () => {
    const { open, file } = await setup()
    const { store: first } = await open()
    await chmod(file, 0o644)
    const { store: second, logger } = await open()
    expect(second.reused).toBe(false)
    expect(Buffer.compare(second.keys.current().key, first.keys.current().key)).not.toBe(0)
    expect(logger.lines.join('\n')).toContain(`key file ${file} has mode 0644`)
    expect((await stat(file)).mode & 0o777).toBe(0o600)
  })

  it('a corrupt or truncated file makes a new key and says which file and what is wrong', async () => {
    const { open, file } = await setup()
    const { store: first } = await open()
    const text = await readFile(file, 'utf8')
    for (const [bad, problem] of [
      [text.slice(0, text.length / 2), 'is not JSON'],
      [text.replace(/"key":"[^"]+"/, '"key":"AAAA"'), "'key' is not base64 of 32 bytes"],
      [text.replace(/"gen":\d+/, '"gen":"7"'), "'gen' is not a positive integer"],
      ['{"format":"something else"}', 'is not a brine-session-key file'],
    ] as const) {
      await writeFile(file, bad, { mode: 0o600 })
      const { store, logger } = await open()
      expect(store.reused).toBe(false)
      expect(Buffer.compare(store.keys.current().key, first.keys.current().key)).not.toBe(0)
      expect(logger.lines.join('\n')).toContain(`session key file ${file}: ${problem}`)
    }
  })
})
