import { readdir, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { decode, encode } from '@brine/core'
import type { Grains } from '@brine/targeting'
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

  it('serves while it loads: grains set or deleted meanwhile win over what the load read, and whenLoaded waits for the rest', async () => {
    const dir = await tempDir()
    const first = new GrainsCache(dir)
    await Promise.all(['web1', 'web2', 'web3'].map((id) => first.set(id, { os: 'Arch', id })))
    const second = new GrainsCache(dir)
    const loading = second.load()
    const sent = second.set('web1', { os: 'Debian' })
    second.delete('web2')
    await second.whenLoaded()
    expect(second.get('web1')).toEqual({ os: 'Debian' })
    expect(second.get('web2')).toBeUndefined()
    expect(second.get('web3')).toEqual({ os: 'Arch', id: 'web3' })
    await Promise.all([loading, sent])
    expect(await onDisk(second, 'web1')).toEqual({ os: 'Debian' })
  })

  it('keeps the grains as their file holds them, sharing nothing with the request they came in', async () => {
    const cache = new GrainsCache(await tempDir())
    const sent = decode(encode({ cmd: '_grains', grains: { os: 'Debian', ipv4: ['192.0.2.2'], gone: undefined } })) as { grains: Grains }
    await cache.set('web1', sent.grains)
    const cached = cache.get('web1')
    expect(cached).toEqual(await onDisk(cache, 'web1'))
    expect(cached).toStrictEqual({ os: 'Debian', ipv4: ['192.0.2.2'] })
    expect(cached).not.toBe(sent.grains)
    ;(sent.grains['ipv4'] as string[]).push('198.51.100.1')
    expect(cache.get('web1')).toStrictEqual({ os: 'Debian', ipv4: ['192.0.2.2'] })
  })

  it('refuses an invalid minion id before it becomes a path', async () => {
    const cache = new GrainsCache(await tempDir())
    await expect(cache.set('../etc', {})).rejects.toThrow()
    expect(cache.get('../etc')).toBeUndefined()
  })
})
