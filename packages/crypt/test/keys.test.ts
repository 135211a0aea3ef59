import { execFileSync } from 'node:child_process'
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import nacl from 'tweetnacl'
import { describe, expect, it } from 'vitest'
import { silentLogger } from '@brine/core'
import {
  boxSharedKey,
  CryptCache,
  fingerprint,
  generateKeys,
  keysFromSecrets,
  InsecureKeyFileError,
  KeyFileError,
  loadOrCreateKeys,
  normalizeFingerprint,
  parsePublicKeys,
  publicKeysOf,
  signDetached,
} from '../src/index.js'
import { ensurePkiDir } from '../src/keys.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()

describe('ensurePkiDir', () => {
  it('makes a missing one 0700 (its parents too), keeps one that is there, warns when it is open to others, and refuses a file in its place', async () => {
    const root = await tempDir()
    const pkiDir = join(root, 'a', 'b', 'pki')
    const warnings: string[] = []
    const logger = { ...silentLogger, warning: (line: string) => void warnings.push(line) }
    await ensurePkiDir(pkiDir, logger)
    expect((await stat(pkiDir)).mode & 0o777).toBe(0o700)
    await writeFile(join(pkiDir, 'kept'), 'x')
    await ensurePkiDir(pkiDir, logger)
    expect(await readFile(join(pkiDir, 'kept'), 'utf8')).toBe('x')
    expect(warnings).toEqual([])
    await chmod(pkiDir, 0o755)
    await ensurePkiDir(pkiDir, logger)
    expect(warnings).toEqual([`pki_dir ${pkiDir} has mode 0755; 0700 is expected`])
    await writeFile(join(root, 'file'), 'not a directory')
    await expect(ensurePkiDir(join(root, 'file'), logger)).rejects.toMatchObject({ code: 'EEXIST' })
    await expect(ensurePkiDir(join(root, 'file', 'pki'), logger)).rejects.toMatchObject({ code: 'ENOTDIR' })
  })
})

describe('loadOrCreateKeys', () => {
  it('creates a 0700 pki dir, a 0600 secret file and a public file on first start', async () => {
    const pkiDir = join(await tempDir(), 'pki', 'master')
    const loaded = await loadOrCreateKeys(pkiDir, 'master')
    expect(loaded.created).toBe(true)
    expect(loaded.keyFile).toBe(join(pkiDir, 'master.key'))
    expect((await stat(pkiDir)).mode & 0o777).toBe(0o700)
    expect((await stat(loaded.keyFile)).mode & 0o777).toBe(0o600)
    expect(loaded.keys.box.publicKey).toHaveLength(32)
    expect(loaded.keys.sign.secretKey).toHaveLength(64)
    const pubText = await readFile(loaded.pubFile, 'utf8')
    expect(pubText.split('\n')[0]).toBe('-----BEGIN BRINE PUBLIC KEYS-----')
    expect(parsePublicKeys(pubText, loaded.pubFile)).toEqual(publicKeysOf(loaded.keys))
    // The secret file holds the secrets, not just public keys.
    expect(await readFile(loaded.keyFile, 'utf8')).toContain('BRINE SECRET KEYS')
  })

  it('keeps the key objects it made or loaded in a given cache: signing and agreeing a box import no private key again', async () => {
    const pkiDir = join(await tempDir(), 'pki')
    const minion = generateKeys()
    for (const start of ['first', 'later']) {
      const cache = new CryptCache()
      const { keys, created } = await loadOrCreateKeys(pkiDir, 'minion', { cache })
      expect(created).toBe(start === 'first')
      const signature = signDetached(new Uint8Array([1, 2, 3]), keys.sign.secretKey, cache)
      expect(Buffer.compare(signature, nacl.sign.detached(new Uint8Array([1, 2, 3]), keys.sign.secretKey))).toBe(0)
      expect(Buffer.compare(boxSharedKey(minion.box.publicKey, keys.box.secretKey, cache), nacl.box.before(minion.box.publicKey, keys.box.secretKey))).toBe(0)
      expect(cache.importedPrivateKeys).toBe(0)
    }
    // Without having loaded them through it, the cache imports each key once.
    const cache = new CryptCache()
    const { keys } = await loadOrCreateKeys(pkiDir, 'minion')
    signDetached(new Uint8Array([1]), keys.sign.secretKey, cache)
    boxSharedKey(minion.box.publicKey, keys.box.secretKey, cache)
    expect(cache.importedPrivateKeys).toBe(2)
  })

  it('loads the same keys on a later start', async () => {
    const pkiDir = await tempDir()
    const first = await loadOrCreateKeys(pkiDir, 'minion')
    const second = await loadOrCreateKeys(pkiDir, 'minion')
    expect(second.created).toBe(false)
    expect(second.keys).toEqual(first.keys)
  })

  it('agrees on one key pair when two starts race', async () => {
    const pkiDir = await tempDir()
    const [a, b] = await Promise.all([loadOrCreateKeys(pkiDir, 'minion'), loadOrCreateKeys(pkiDir, 'minion')])
    expect(a.keys).toEqual(b.keys)
    expect([a.created, b.created].filter(Boolean)).toHaveLength(1)
  })

  it('rewrites a missing public file from the secret file', async () => {
    const pkiDir = await tempDir()
    const first = await loadOrCreateKeys(pkiDir, 'minion')
    await rm(first.pubFile)
    const again = await loadOrCreateKeys(pkiDir, 'minion')
    expect(again.keys).toEqual(first.keys)
    expect(parsePublicKeys(await readFile(first.pubFile, 'utf8'), first.pubFile)).toEqual(publicKeysOf(first.keys))
  })

  it.each([
    ['truncated', (text: string) => text.slice(0, 60), /truncated|line 2/],
    ['a corrupted character', (text: string) => text.replace(/box: ./, 'box: !'), /line 2: 'box' is not base64 of 32 bytes/],
    ['a wrong header', (text: string) => text.replace('BEGIN', 'START'), /line 1: expected/],
    ['empty', () => '', /is empty/],
  ])('refuses a secret key file that is %s, naming the file', async (_label, mangle, reason) => {
    const pkiDir = await tempDir()
    const { keyFile } = await loadOrCreateKeys(pkiDir, 'master')
    await writeFile(keyFile, mangle(await readFile(keyFile, 'utf8')))
    const error = await loadOrCreateKeys(pkiDir, 'master').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(KeyFileError)
    expect((error as KeyFileError).file).toBe(keyFile)
    expect((error as KeyFileError).message).toMatch(reason)
  })

  it('refuses a public file that does not match the secret file', async () => {
    const pkiDir = await tempDir()
    const { pubFile } = await loadOrCreateKeys(pkiDir, 'master')
    const other = await loadOrCreateKeys(await tempDir(), 'master')
    await writeFile(pubFile, await readFile(other.pubFile))
    await expect(loadOrCreateKeys(pkiDir, 'master')).rejects.toThrow(/master\.pub: does not match the secret keys/)
  })

  it('refuses to invent a new identity when only the public file is left', async () => {
    const pkiDir = await tempDir()
    const { keyFile } = await loadOrCreateKeys(pkiDir, 'master')
    await rm(keyFile)
    await expect(loadOrCreateKeys(pkiDir, 'master')).rejects.toBeInstanceOf(KeyFileError)
  })

  it('refuses a secret key file readable by others', async () => {
    const pkiDir = await tempDir()
    const { keyFile } = await loadOrCreateKeys(pkiDir, 'master')
    await chmod(keyFile, 0o644)
    const error = await loadOrCreateKeys(pkiDir, 'master').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InsecureKeyFileError)
    expect((error as InsecureKeyFileError).mode).toBe('0644')
  })

  it.each([
    ['a directory', (file: string) => mkdir(file)],
    ['a FIFO (refused at once, not waited on for a writer)', async (file: string) => void execFileSync('mkfifo', [file])],
  ])('refuses %s in place of a key file, naming the file', async (_label, make) => {
    const pkiDir = await tempDir()
    const { keyFile } = await loadOrCreateKeys(pkiDir, 'master')
    await rm(keyFile)
    await make(keyFile)
    const error = await loadOrCreateKeys(pkiDir, 'master').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(KeyFileError)
    expect((error as KeyFileError).message).toMatch(/is not a regular file/)
    expect((error as KeyFileError).file).toBe(keyFile)
  })

  it('refuses a key name that is a path', async () => {
    await expect(loadOrCreateKeys(await tempDir(), '../master')).rejects.toBeInstanceOf(KeyFileError)
  })
})

describe('generateKeys and keysFromSecrets', () => {
  it("derive exactly nacl's key pairs from the same secrets (public keys through OpenSSL)", () => {
    for (let index = 0; index < 10; index++) {
      const keys = generateKeys()
      const seed = keys.sign.secretKey.subarray(0, 32)
      expect(keys.box).toEqual(nacl.box.keyPair.fromSecretKey(keys.box.secretKey))
      expect(keys.sign).toEqual(nacl.sign.keyPair.fromSeed(seed))
      expect(keysFromSecrets(keys.box.secretKey, seed)).toEqual(keys)
      // The pair works with nacl on the other side.
      const message = new Uint8Array([1, 2, 3])
      expect(nacl.sign.detached.verify(message, nacl.sign.detached(message, keys.sign.secretKey), keys.sign.publicKey)).toBe(true)
    }
    expect(() => keysFromSecrets(new Uint8Array(31), new Uint8Array(32))).toThrow(RangeError)
  })
})

describe('fingerprint', () => {
  it('is sha256 of the public key bytes as colon-separated hex pairs', () => {
    const keys = { box: new Uint8Array(32), sign: new Uint8Array(32).fill(1) }
    const finger = fingerprint(keys)
    // sha256(32 zero bytes ‖ 32 bytes of 0x01), computed independently with Python's hashlib
    expect(finger).toBe('5c85955f709283ecce2b74f1b1552918819f390911816e7bb466805a38ab87f3'.match(/../g)!.join(':'))
    expect(fingerprint({ box: keys.box, sign: new Uint8Array(32).fill(2) })).not.toBe(finger)
    expect(normalizeFingerprint(finger.toUpperCase())).toBe(normalizeFingerprint(finger))
  })
})
