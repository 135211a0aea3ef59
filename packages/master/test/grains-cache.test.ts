import { readdir, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { GrainsCache } from '../src/grains-cache.js'
import { runCleanups, tempDir } from './helpers.js'

afterEach(runCleanups)

const onDisk = async (cache: GrainsCache, id: string): Promise<unknown> => JSON.parse(await readFile(join(cache.dir, id, 'grains'), 'utf8'))

describe('GrainsCache', () => {
  it('writes grains once and skips identical grains sent again (a re-auth after reconnect)', async () => {
    const cache = new GrainsCache(await tempDir())
    await cache.set('web1', { os: 'Debian', roles: ['web'] })
    await cache.set('web1', { os: 'Debian', roles: ['web'] })
    expect(cache.writes).toBe(1)
    expect(await onDisk(cache, 'web1')).toEqual({ os: 'Debian', roles: ['web'] })
    await cache.set('web1', { os: 'Debian', roles: ['db'] })
    expect(cache.writes).toBe(2)
    expect(await onDisk(cache, 'web1')).toEqual({ os: 'Debian', roles: ['db'] })
    expect((await readdir(join(cache.dir, 'web1'))).sort()).toEqual(['grains'])
  })

  it('coalesces grains sent while a write is pending: only the latest is written next', async () => {
    const cache = new GrainsCache(await tempDir())
    const writes = [cache.set('web1', { n: 1 }), cache.set('web1', { n: 2 }), cache.set('web1', { n: 3 }), cache.set('web2', { n: 9 })]
    expect(cache.get('web1')).toEqual({ n: 3 })
    await Promise.all(writes)
    expect(await onDisk(cache, 'web1')).toEqual({ n: 3 })
    expect(await onDisk(cache, 'web2')).toEqual({ n: 9 })
    // web1: {n:1} was under way, {n:2} was superseded by {n:3} before its turn; web2 once.
    expect(cache.writes).toBe(3)
  })

  it('knows what a restarted master loaded from disk, and rewrites after a delete', async () => {
    const dir = await tempDir()
    const first = new GrainsCache(dir)
    await first.set('web1', { os: 'Arch' })
    const second = new GrainsCache(dir)
    await second.load()
    expect(second.get('web1')).toEqual({ os: 'Arch' })
    await second.set('web1', { os: 'Arch' })
    expect(second.writes).toBe(0)
    second.delete('web1')
    await rm(join(second.dir, 'web1'), { recursive: true })
    await second.set('web1', { os: 'Arch' })
    expect(second.writes).toBe(1)
    expect(await onDisk(second, 'web1')).toEqual({ os: 'Arch' })
  })

  it('refuses an invalid minion id before it becomes a path', async () => {
    const cache = new GrainsCache(await tempDir())
    await expect(cache.set('../etc', {})).rejects.toThrow()
    expect(cache.get('../etc')).toBeUndefined()
  })
})
