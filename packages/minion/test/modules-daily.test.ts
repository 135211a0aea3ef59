import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { procAddress } from '../src/modules/network.js'
import { makeFixture } from './modules-fixture.js'

const { run } = makeFixture({}, {}, { id: 'minion-1', os: 'Debian', os_family: 'Debian' })
const dir = mkdtempSync(join(tmpdir(), 'brine-modules-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Runs a function that must fail on its arguments: the return names the function and the argument. */
async function refused(fun: string, arg: unknown[], argument: string): Promise<string> {
  const result = await run(fun, arg)
  expect(result.success).toBe(false)
  expect(result.retcode).toBe(1)
  expect(result.return).toEqual(expect.stringContaining(`ERROR executing '${fun}': ${argument}`))
  return result.return as string
}

describe('argument checks: each bad argument is refused by name before anything runs', () => {
  it('file: relative paths, bad modes, bad patterns, unknown owners, unknown find options, bad hashes', async () => {
    expect(await refused('file.read', ['etc/passwd'], 'path')).toContain('must be an absolute path, got "etc/passwd"')
    await refused('file.write', ['relative', 'x'], 'path')
    await refused('file.mkdir', [join(dir, 'm'), 'mode=99x'], 'mode')
    await refused('file.set_mode', [join(dir, 'nothing'), 'rwx'], 'mode')
    await refused('file.replace', [join(dir, 'nothing'), '(unclosed', 'x'], 'pattern')
    await refused('file.mkdir', [join(dir, 'owned'), 'user=no-such-user-brine'], 'user')
    await refused('file.find', [dir, 'colour=blue'], 'unknown find option')
    await refused('file.find', [dir, 'type=q'], 'type')
    await refused('file.check_hash', ['/etc/passwd', 'nothex'], 'file_hash')
    await refused('file.get_hash', ['/etc/passwd', 'crc32'], 'form')
    await refused('file.copy', [dir, join(dir, 'copy')], 'src')
  })

  it('service, pkg, user, group: names that would be options are refused', async () => {
    await refused('service.start', ['--all'], 'name')
    await refused('service.status', [''], 'name')
    await refused('pkg.version', [], 'at least one package name')
    await refused('pkg.install', [], 'name, pkgs or sources')
    await refused('pkg.install', ['-y'], 'name')
    await refused('pkg.install', ['sources=[{"x": "relative.deb"}]'], 'sources')
    await refused('pkg.install', ['pkgs={"a": 1}'], 'pkgs')
    await refused('pkg.install', ['curl', 'downloadonly=True'], "pkg.install option 'downloadonly' is not supported")
    await refused('user.add', ['-o'], 'name')
    await refused('user.add', ['brinex', 'uid=abc'], 'uid')
    await refused('user.add', ['brinex', 'shell=bash'], 'shell')
    await refused('user.chhome', ['root', 'home'], 'home')
    await refused('group.adduser', ['root', 'bad user'], 'username')
  })

  it('disk, network, environ: flags, addresses and values', async () => {
    await refused('disk.usage', ['--output=source;rm'], 'args')
    await refused('network.connect', ['localhost'], 'Required argument, port')
    await refused('network.connect', ['localhost', 70000], 'port')
    await refused('network.connect', ['-oProxy', 80], 'host')
    await refused('network.connect', ['localhost', 80, 'proto=sctp'], 'proto')
    await refused('network.ip_addrs', ['cidr=10.0.0.0/40'], 'cidr')
    await refused('network.ping', ['-f'], 'host')
    const family = await run('network.default_route', ['inet5'])
    expect(family.return).toBe('ERROR: Invalid address family inet5')
    await refused('environ.setval', ['', 'x'], 'key')
    await refused('environ.setval', ['BRINE_X', 12], 'val')
  })
})

describe('file module on the real filesystem', () => {
  it('write, append, prepend, read; replace with groups, a backup and a diff; search', async () => {
    const path = join(dir, 'motd')
    expect((await run('file.write', [path, 'one', 'two'])).return).toBe(`Wrote 2 lines to "${path}"`)
    expect((await run('file.append', [path, 'three'])).return).toBe(`Wrote 1 lines to "${path}"`)
    expect((await run('file.prepend', [path, 'zero'])).return).toBe(`Prepended 1 lines to "${path}"`)
    expect((await run('file.read', [path])).return).toBe('zero\none\ntwo\nthree\n')
    const diff = (await run('file.replace', [path, 'pattern=^t(\\w)o$', 'repl=T\\1O'])).return as string
    expect(diff).toContain('-two\n+TwO')
    expect(readFileSync(`${path}.bak`, 'utf8')).toBe('zero\none\ntwo\nthree\n')
    expect(readFileSync(path, 'utf8')).toBe('zero\none\nTwO\nthree\n')
    expect((await run('file.replace', [path, 'nomatch', 'x', 'show_changes=False'])).return).toBe(false)
    expect((await run('file.replace', [path, 'missing line', 'missing line', 'append_if_not_found=True', 'backup=False'])).return).toContain('+missing line')
    expect((await run('file.search', [path, '^TwO$'])).return).toBe(true)
    expect((await run('file.search', [path, 'twO', 'flags=["IGNORECASE"]'])).return).toBe(true)
    expect((await run('file.search', [path, 'absent'])).return).toBe(false)
  })

  it('touch, mkdir, copy, rename, symlink, stats, modes, hashes, find, remove', async () => {
    const tree = join(dir, 'tree')
    expect((await run('file.mkdir', [join(tree, 'a', 'b'), 'mode=0750'])).return).toBe(true)
    expect(statSync(join(tree, 'a', 'b')).mode & 0o777).toBe(0o750)
    expect((await run('file.touch', [join(tree, 'a', 'f.txt')])).return).toBe(true)
    writeFileSync(join(tree, 'a', 'b', 'g.log'), 'hello')
    expect((await run('file.copy', [join(tree, 'a'), join(tree, 'c'), 'recurse=True'])).return).toBe(true)
    expect((await run('file.file_exists', [join(tree, 'c', 'b', 'g.log')])).return).toBe(true)
    expect((await run('file.rename', [join(tree, 'c'), join(tree, 'd')])).return).toBe(true)
    expect((await run('file.directory_exists', [join(tree, 'c')])).return).toBe(false)
    expect((await run('file.symlink', [join(tree, 'd', 'b', 'g.log'), join(tree, 'link')])).return).toBe(true)
    const stats = (await run('file.stats', [join(tree, 'link'), 'hash_type=sha256'])).return as Record<string, unknown>
    const sha = createHash('sha256').update('hello').digest('hex')
    expect(stats).toMatchObject({ size: 5, type: 'file', user: 'root', sum: sha, target: join(tree, 'd', 'b', 'g.log') })
    expect(((await run('file.stats', [join(tree, 'link'), null, false])).return as Record<string, unknown>).type).toBe('link')
    expect((await run('file.get_hash', [join(tree, 'link')])).return).toBe(sha)
    expect((await run('file.check_hash', [join(tree, 'link'), `sha256:${sha}`])).return).toBe(true)
    expect((await run('file.check_hash', [join(tree, 'link'), createHash('md5').update('other').digest('hex')])).return).toBe(false)
    expect((await run('file.set_mode', [join(tree, 'a', 'f.txt'), '600'])).return).toBe('0600')
    expect((await run('file.get_mode', [join(tree, 'a', 'f.txt')])).return).toBe('0600')
    expect((await run('file.get_mode', [join(tree, 'absent')])).return).toBe('')
    expect((await run('file.find', [tree, 'name=*.log', 'type=f'])).return).toEqual([join(tree, 'a', 'b', 'g.log'), join(tree, 'd', 'b', 'g.log')])
    expect((await run('file.find', [tree, 'type=l'])).return).toEqual([join(tree, 'link')])
    expect((await run('file.find', [tree, 'maxdepth=1', 'type=d'])).return).toEqual([tree, join(tree, 'a'), join(tree, 'd')])
    expect((await run('file.chown', [join(tree, 'a', 'f.txt'), 'root', 'root'])).return).toBe(null)
    expect((await run('file.remove', [tree])).return).toBe(true)
    expect((await run('file.remove', [tree])).return).toBe(false)
    expect((await run('file.read', [join(tree, 'a', 'f.txt')])).return).toBe(`ERROR: File not found: ${join(tree, 'a', 'f.txt')}`)
  })
})

describe('sys lists the daily modules with their docstrings', () => {
  it('list_functions and doc', async () => {
    expect((await run('sys.list_functions', ['pkg'])).return).toEqual([
      'pkg.install',
      'pkg.latest_version',
      'pkg.list_pkgs',
      'pkg.list_upgrades',
      'pkg.purge',
      'pkg.refresh_db',
      'pkg.remove',
      'pkg.upgrade',
      'pkg.version',
    ])
    const docs = (await run('sys.doc', ['service.start', 'file.replace', 'network.connect'])).return as Record<string, string>
    expect(docs['service.start']).toContain("brine '*' service.start <service name>")
    expect(docs['file.replace']).toContain('Python ``re`` syntax')
    expect(docs['network.connect']).toContain('{result, comment}')
  })
})

describe('read-only modules on the real host', () => {
  it('environ get/setval/unset in the minion process', async () => {
    expect((await run('environ.setval', ['BRINE_TEST_VAR', 'on'])).return).toBe('on')
    expect((await run('environ.get', ['BRINE_TEST_VAR'])).return).toBe('on')
    expect((await run('environ.setval', ['BRINE_TEST_VAR', false, true])).return).toBe(null)
    expect((await run('environ.get', ['BRINE_TEST_VAR', 'default=gone'])).return).toBe('gone')
  })

  it('status, disk and network return Salt-shaped data', async () => {
    expect(Object.keys((await run('status.loadavg')).return as object)).toEqual(['1-min', '5-min', '15-min'])
    expect((await run('status.meminfo')).return).toMatchObject({ MemTotal: { unit: 'kB', value: expect.stringMatching(/^\d+$/) } })
    expect((await run('status.uptime')).return).toMatchObject({
      seconds: expect.any(Number),
      days: expect.any(Number),
      time: expect.stringMatching(/^\d+:\d\d$/),
    })
    expect((await run('status.diskusage', ['/'])).return).toMatchObject({ '/': { total: expect.any(Number), available: expect.any(Number) } })
    expect((await run('disk.usage')).return).toMatchObject({ '/': { filesystem: expect.any(String), capacity: expect.stringMatching(/%$/) } })
    expect((await run('network.interfaces')).return).toMatchObject({
      lo: { up: true, inet: [expect.objectContaining({ address: '127.0.0.1', netmask: '255.0.0.0' })] },
    })
    expect((await run('network.ip_addrs', ['include_loopback=True', 'cidr=127.0.0.0/8'])).return).toContain('127.0.0.1')
    expect(procAddress('0100007F:1F90')).toBe('127.0.0.1:8080')
    expect(procAddress('00000000000000000000000001000000:0016')).toBe('::1:22')
  })
})
