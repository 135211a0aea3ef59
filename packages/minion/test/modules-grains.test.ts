import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { collectGrains, coreGrains, hostGrains, parseOsRelease, readPersistedGrains } from '../src/modules/grains.js'
import { makeFixture } from './modules-fixture.js'

const scratch = mkdtempSync(join(tmpdir(), 'brine-grains-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('collectGrains', () => {
  it('computes sane core grains', async () => {
    const grains = await collectGrains('web-1', {})
    expect(grains.id).toBe('web-1')
    expect(grains.kernel).toBe('Linux')
    expect(grains.num_cpus).toBeGreaterThanOrEqual(1)
    expect(grains.ipv4).toContain('127.0.0.1')
    expect(grains.mem_total).toBeGreaterThan(0)
    expect(grains.cpuarch).toMatch(/^(x86_64|aarch64|armv7l|i686|ppc64le|s390x|riscv64)$/)
    expect(typeof grains.os).toBe('string')
    expect(typeof grains.os_family).toBe('string')
    expect(grains.pid).toBe(process.pid)
    expect(grains.uid).toBe(process.getuid?.())
    expect(grains.saltversion).toMatch(/^\d+\.\d+\.\d+/)
    expect(grains.host).toBe((grains.fqdn as string).split('.')[0])
  })

  it('layers static grains from opts.grains over core grains', async () => {
    const grains = await collectGrains('web-1', { grains: { roles: ['web'], kernel: 'Overridden' } })
    expect(grains.roles).toEqual(['web'])
    expect(grains.kernel).toBe('Overridden')
  })

  it("computed from the host's grains given once, each minion has its own id, master and copy of every value", async () => {
    const host = hostGrains()
    expect(host.id).toBeUndefined()
    expect(host.master).toBeUndefined()
    const [a, b] = await Promise.all([
      collectGrains('web-1', { master: 'salt-a', grains: { roles: ['web'] } }, host),
      collectGrains('db-1', { master: ['salt-a', 'salt-b'] }, host),
    ])
    // The same grains as computing the host's facts per minion.
    expect(a).toEqual(await collectGrains('web-1', { master: 'salt-a', grains: { roles: ['web'] } }))
    expect(a).toMatchObject({ id: 'web-1', master: 'salt-a', roles: ['web'], kernel: host.kernel, num_cpus: host.num_cpus })
    expect(b).toMatchObject({ id: 'db-1', master: ['salt-a', 'salt-b'], kernel: host.kernel })
    expect(b.roles).toBeUndefined()
    // A value one minion changes in place (grains.setval replaces, a module may edit a list) is that minion's alone.
    ;(a.ipv4 as string[]).push('192.0.2.7')
    ;(a.osrelease_info as number[]).push(99)
    expect(b.ipv4).not.toContain('192.0.2.7')
    expect(host.ipv4).not.toContain('192.0.2.7')
    expect(b.osrelease_info).toEqual(host.osrelease_info)
    expect(coreGrains('web-2', {}, host)).toEqual({ id: 'web-2', ...host })
  })

  it('parses os-release quoting', () => {
    expect(parseOsRelease('NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n# comment\n')).toEqual({
      NAME: 'Debian GNU/Linux',
      VERSION_ID: '12',
      ID: 'debian',
    })
  })

  it("reads a hand-written 'key: value' grains file, and names the file and line when it cannot", async () => {
    const path = join(scratch, 'hand')
    writeFileSync(path, '# roles\nrack: 12\ndc: "east"\nmaintenance: false\n')
    await expect(readPersistedGrains(path)).resolves.toEqual({ rack: 12, dc: 'east', maintenance: false })
    writeFileSync(path, 'ok: 1\n  - nested\n')
    await expect(readPersistedGrains(path)).rejects.toThrow(`grains file ${path}:2`)
  })
})

describe('grains module', () => {
  const grains = { id: 'm1', os: 'Debian', kernel: 'Linux', pkg: { apache: 'apache2', list: ['a', 'b'] } }

  it('items, item, ls', async () => {
    const { run } = makeFixture({}, {}, { ...grains })
    expect((await run('grains.items')).return).toEqual(grains)
    expect((await run('grains.item', ['os', 'kernel'])).return).toEqual({ os: 'Debian', kernel: 'Linux' })
    expect((await run('grains.item', ['pkg:apache', 'missing'])).return).toEqual({ 'pkg:apache': 'apache2', missing: '' })
    expect((await run('grains.ls')).return).toEqual(['id', 'kernel', 'os', 'pkg'])
  })

  it('get walks nested keys with a default and delimiter', async () => {
    const { run } = makeFixture({}, {}, { ...grains })
    expect((await run('grains.get', ['pkg:apache'])).return).toBe('apache2')
    expect((await run('grains.get', ['pkg:list:1'])).return).toBe('b')
    expect((await run('grains.get', ['pkg|apache', 'delimiter=|'])).return).toBe('apache2')
    expect((await run('grains.get', ['nope'])).return).toBe('')
    expect((await run('grains.get', ['nope', 'fallback'])).return).toBe('fallback')
  })

  it('setval sets in memory, persists to <cachedir>/grains, and survives a fresh collectGrains', async () => {
    const cachedir = join(scratch, 'cache')
    const shared = await collectGrains('m1', { cachedir })
    const { run } = makeFixture({ cachedir }, {}, shared)
    expect(await run('grains.setval', ['role', 'web'])).toEqual({ return: { role: 'web' }, retcode: 0, success: true })
    expect((await run('grains.setval', ['rack', "{row: 3, slot: 'b'}"])).return).toEqual({ rack: "{row: 3, slot: 'b'}" })
    expect((await run('grains.setvals', [{ zone: 'eu', weight: 5 }])).return).toEqual({ zone: 'eu', weight: 5 })
    expect(shared.role).toBe('web')
    expect(JSON.parse(readFileSync(join(cachedir, 'grains'), 'utf8'))).toMatchObject({ role: 'web', zone: 'eu', weight: 5 })
    const fresh = await collectGrains('m1', { cachedir })
    expect(fresh).toMatchObject({ role: 'web', zone: 'eu', weight: 5, kernel: 'Linux' })
  })

  it('setval takes a key=value kwarg typed like the CLI', async () => {
    const cachedir = join(scratch, 'cache-kw')
    const { run } = makeFixture({ cachedir }, {}, {})
    expect((await run('grains.setval', ['count', 'val=3'])).return).toEqual({ count: 3 })
  })
})
