import { chmod, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { constantTimeEqual, createRootKey, readRootKey, RootKeyError, rootKeyPath } from '../src/index.js'
import { useTempDirs } from './temp-dir.js'

const tempDir = useTempDirs()

describe('root key', () => {
  it('writes a random 0600 key that reads back, and a new one on each call', async () => {
    const file = rootKeyPath(join(await tempDir(), 'cache'))
    const key = await createRootKey(file)
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    expect(await readRootKey(file)).toBe(key)
    const next = await createRootKey(file)
    expect(next).not.toBe(key)
    expect(await readRootKey(file)).toBe(next)
  })

  it('refuses a missing or world-readable key file', async () => {
    const file = join(await tempDir(), '.root_key')
    await expect(readRootKey(file)).rejects.toBeInstanceOf(RootKeyError)
    await createRootKey(file)
    await chmod(file, 0o644)
    await expect(readRootKey(file)).rejects.toThrow(/mode 0644/)
  })

  it('compares keys', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true)
    expect(constantTimeEqual('abc', 'abd')).toBe(false)
    expect(constantTimeEqual('abc', 'abcd')).toBe(false)
    expect(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2]))).toBe(true)
    expect(constantTimeEqual('', 'x')).toBe(false)
  })
})
