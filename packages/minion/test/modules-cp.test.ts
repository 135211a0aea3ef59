import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { FileRoots, FileServer } from '@brine/master'
import { isSaltUrl, type FileCommand } from '@brine/protocol'
import { serializeError, silentLogger } from '@brine/core'
import { executeJob } from '../src/executor.js'
import { NotAcknowledgedError } from '@brine/link'
import { defaultSourceResolver } from '../src/modules/pkg.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { MasterChannel } from '../src/modules/types.js'
import { nextJid } from './modules-fixture.js'

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'brine-cp-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const root = join(scratch, 'srv')
const big = randomBytes(300_000)
for (const [path, content] of Object.entries({
  'big.bin': big,
  'scripts/hello.sh': '#!/bin/sh\necho "args: $1|$2|$#" in "$(pwd)" as "$GREETING"\nexit 4\n',
  'scripts/whoami.sh': '#!/bin/sh\necho "$(id -un) in $(pwd)"\n',
  'conf/a.conf': 'a',
  'conf/sub/b.conf': 'b',
  'conf/c.txt': 'c',
})) {
  mkdirSync(join(root, path, '..'), { recursive: true })
  writeFileSync(join(root, path), content)
}
writeFileSync(join(scratch, 'outside.txt'), 'secret')
symlinkSync(join(scratch, 'outside.txt'), join(root, 'escape.txt'))

/** The master's file server in-process, behind a channel that refuses as the wire does (the master's error by name). */
function fileServer(recv: boolean): { server: FileServer; channel: MasterChannel } {
  const server = new FileServer({
    roots: new FileRoots({ roots: { base: [root] } }),
    bufferSize: 65536,
    hashType: 'sha256',
    recv,
    recvMaxBytes: 1 << 20,
    cachedir: join(scratch, `master-${recv}`),
  })
  const channel: MasterChannel = {
    request: async (load) => {
      try {
        return { ok: true, ...(await server.handle('m1', load.cmd as FileCommand, { ...load, id: 'm1' })) }
      } catch (error) {
        const serialized = serializeError(error)
        throw new NotAcknowledgedError(load.cmd, JSON.stringify(serialized), { refusal: serialized.name, error: serialized })
      }
    },
  }
  return { server, channel }
}

function minion(recv = false) {
  const { server, channel } = fileServer(recv)
  const cachedir = mkdtempSync(join(scratch, 'minion-'))
  const registry = createModuleRegistry({
    id: 'm1',
    grains: {},
    opts: { cachedir, file_buffer_size: 65536 },
    logger: silentLogger,
    jobs: new RunningJobs(),
    master: channel,
  })
  const run = (fun: string, arg: unknown[] = []) => executeJob(registry, { jid: nextJid(), fun, arg })
  return { server, cachedir, run }
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex')

describe('cp module against the file server', () => {
  it('get_file brings a file in chunks, intact; the second call transfers nothing', async () => {
    const { server, run } = minion()
    const dest = join(scratch, 'got', 'big.bin')
    expect(await run('cp.get_file', ['salt://big.bin', dest])).toMatchObject({ return: false })
    expect(await run('cp.get_file', ['salt://big.bin', dest, 'makedirs=True'])).toMatchObject({ return: dest, retcode: 0 })
    expect(sha256(readFileSync(dest))).toBe(sha256(big))
    const first = server.stats()
    expect(first.bytes_served).toBe(big.length)
    expect(first.chunks_served).toBe(Math.ceil(big.length / 65536))
    const inode = statSync(dest).ino
    expect(await run('cp.get_file', ['salt://big.bin', dest])).toMatchObject({ return: dest })
    expect(server.stats().bytes_served).toBe(first.bytes_served)
    expect(statSync(dest).ino).toBe(inode)
    // A directory destination keeps the file's name; a missing file is ''.
    expect((await run('cp.get_file', ['salt://big.bin', join(scratch, 'got')])).return).toBe(dest)
    expect((await run('cp.get_file', ['salt://missing.bin', dest])).return).toBe('')
  })

  it('a path escaping the roots is refused with FileServerPathError, and nothing is written', async () => {
    const { run } = minion()
    for (const url of ['salt://../outside.txt', 'salt://escape.txt']) {
      const result = await run('cp.get_file', [url, join(scratch, 'escaped.txt')])
      expect(result).toMatchObject({ retcode: 1, success: false })
      expect(result.return).toMatch(/^ERROR: FileServerPathError: file server path .* refused: /)
    }
    expect(existsSync(join(scratch, 'escaped.txt'))).toBe(false)
    expect((await run('cp.get_file', ['salt://big.bin', join(scratch, 'x'), 'template=jinja'])).return).toMatch(/template rendering .* not supported/)
  })

  it('cache_file, is_cached, list_minion, hash_file and the listings', async () => {
    const { cachedir, run } = minion()
    expect((await run('cp.is_cached', ['salt://big.bin'])).return).toBe('')
    const cached = join(cachedir, 'files', 'base', 'big.bin')
    expect((await run('cp.cache_file', ['salt://big.bin'])).return).toBe(cached)
    expect((await run('cp.is_cached', ['salt://big.bin?saltenv=base'])).return).toBe(cached)
    expect((await run('cp.cache_file', ['salt://nope'])).return).toBe(false)
    expect((await run('cp.hash_file', ['salt://big.bin'])).return).toEqual({ hash_type: 'sha256', hsum: sha256(big) })
    expect((await run('cp.hash_file', [cached])).return).toEqual({ hash_type: 'sha256', hsum: sha256(big) })
    expect((await run('cp.hash_file', ['salt://nope'])).return).toEqual({})
    expect((await run('cp.list_master')).return).toEqual(['big.bin', 'conf/a.conf', 'conf/c.txt', 'conf/sub/b.conf', 'scripts/hello.sh', 'scripts/whoami.sh'])
    expect((await run('cp.list_master', ['prefix=conf/'])).return).toEqual(['conf/a.conf', 'conf/c.txt', 'conf/sub/b.conf'])
    expect((await run('cp.list_master_dirs')).return).toEqual(['conf', 'conf/sub', 'scripts'])
    expect((await run('cp.envs')).return).toEqual(['base'])
    expect((await run('cp.list_minion')).return).toEqual(['big.bin'])
    expect((await run('cp.get_file_str', ['salt://conf/a.conf'])).return).toBe('a')
  })

  it('get_dir and cache_dir copy a directory (include_pat / exclude_pat filter it)', async () => {
    const { cachedir, run } = minion()
    const dest = join(scratch, 'dir-dest')
    expect((await run('cp.get_dir', ['salt://conf', dest])).return).toEqual([
      join(dest, 'conf/a.conf'),
      join(dest, 'conf/c.txt'),
      join(dest, 'conf/sub/b.conf'),
    ])
    expect(readFileSync(join(dest, 'conf/sub/b.conf'), 'utf8')).toBe('b')
    expect((await run('cp.get_dir', ['salt://conf/sub?saltenv=base', dest])).return).toEqual([join(dest, 'sub/b.conf')])
    expect((await run('cp.get_dir', ['salt://conf?saltenv=prod', dest])).return).toMatch(
      /^ERROR: FileServerPathError: .*no such environment \(file_roots has: base\)/,
    )
    expect((await run('cp.cache_dir', ['salt://conf', 'include_pat=*.conf', 'exclude_pat=E@sub/'])).return).toEqual([join(cachedir, 'files/base/conf/a.conf')])
  })

  it('push is refused without file_recv and stored under the minion id with it', async () => {
    const source = join(scratch, 'to-push.txt')
    writeFileSync(source, 'pushed content')
    const closed = minion(false)
    expect(await closed.run('cp.push', [source])).toMatchObject({ return: false })
    expect(existsSync(join(scratch, 'master-false'))).toBe(false)
    const open = minion(true)
    expect(await open.run('cp.push', [source])).toMatchObject({ return: true })
    expect(readFileSync(join(scratch, 'master-true/minions/m1/files', source), 'utf8')).toBe('pushed content')
    expect(await open.run('cp.push', [source, 'upload_path=/up/loaded.txt'])).toMatchObject({ return: true })
    expect(readFileSync(join(scratch, 'master-true/minions/m1/files/up/loaded.txt'), 'utf8')).toBe('pushed content')
    expect((await open.run('cp.push', ['relative.txt'])).return).toBe(false)
  })

  it('cmd.script runs a salt:// script with its args, cwd and env, and reports a missing one', async () => {
    const { run } = minion()
    const result = await run('cmd.script', ['salt://scripts/hello.sh', 'a "b c"', { __kwarg__: true, cwd: scratch, env: { GREETING: 'hi' } }])
    expect(result.return).toEqual({ pid: expect.any(Number), retcode: 4, stdout: `args: a|b c|2 in ${scratch} as hi`, stderr: '' })
    expect(result.retcode).toBe(4)
    expect((await run('cmd.script', ['salt://scripts/hello.sh', { __kwarg__: true, args: ['x y', "it's"] }])).return).toMatchObject({
      stdout: expect.stringMatching(/^args: x y\|it's\|2 in /),
    })
    expect((await run('cmd.script_retcode', ['salt://scripts/hello.sh'])).return).toBe(4)
    expect((await run('cmd.script', ['salt://scripts/missing.sh'])).return).toEqual({ pid: 0, retcode: 1, stdout: '', stderr: '', cache_error: true })
    expect((await run('cmd.script', ['salt://../outside.txt'])).return).toMatch(/^ERROR: FileServerPathError: /)
    expect(isSaltUrl('salt://x')).toBe(true)
  })

  it.runIf(process.getuid?.() === 0)('cmd.script runs its copy as the runas user', async () => {
    const { run } = minion()
    const result = await run('cmd.script', ['salt://scripts/whoami.sh', { __kwarg__: true, runas: 'nobody', cwd: '/' }])
    expect(result.return).toMatchObject({ retcode: 0, stdout: 'nobody in /' })
  })

  it('get_url and cache_file fetch http:// URLs (dest, contents, cache), check source_hash and report HTTP errors', async () => {
    const server = createServer((request, response) => {
      if (request.url === '/files/app.conf') response.end('web content')
      else response.writeHead(404).end('no')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const { cachedir, run } = minion()
      const dest = join(scratch, 'web', 'app.conf')
      expect((await run('cp.get_url', [`${base}/files/app.conf`, dest, 'makedirs=True'])).return).toBe(dest)
      expect(readFileSync(dest, 'utf8')).toBe('web content')
      expect((await run('cp.get_url', [`${base}/files/app.conf`, null])).return).toBe('web content')
      const cached = join(cachedir, 'extrn_files/base', `127.0.0.1_${(server.address() as AddressInfo).port}`, 'files/app.conf')
      expect((await run('cp.cache_file', [`${base}/files/app.conf`])).return).toBe(cached)
      expect((await run('cp.is_cached', [`${base}/files/app.conf`])).return).toBe(cached)
      const good = `sha256=${sha256(Buffer.from('web content'))}`
      expect((await run('cp.get_url', [`${base}/files/app.conf`, join(scratch, 'web', 'checked.conf'), { __kwarg__: true, source_hash: good }])).return).toBe(
        join(scratch, 'web', 'checked.conf'),
      )
      expect(
        (await run('cp.get_url', [`${base}/files/app.conf`, join(scratch, 'web', 'bad.conf'), { __kwarg__: true, source_hash: `sha256=${'0'.repeat(64)}` }]))
          .return,
      ).toMatch(/^ERROR: .*source_hash says 0{64}/)
      expect(existsSync(join(scratch, 'web', 'bad.conf'))).toBe(false)
      expect((await run('cp.get_url', [`${base}/missing`, join(scratch, 'web', 'missing')])).return).toMatch(/^ERROR: HTTP error 404/)
      expect((await run('cp.get_url', ['ftp://example.com/x', join(scratch, 'web', 'x')])).return).toMatch(/Unsupported URL scheme/)
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})

describe('pkg.install sources= from salt://', () => {
  /** The resolver pkg.install runs on each source, called as a module function so it gets a job's context. */
  function resolver() {
    const cachedir = mkdtempSync(join(scratch, 'minion-'))
    const registry = createModuleRegistry({
      id: 'm1',
      grains: {},
      opts: { cachedir, file_buffer_size: 65536 },
      logger: silentLogger,
      jobs: new RunningJobs(),
      master: fileServer(false).channel,
    })
    registry.register('probe', {
      resolve: { doc: 'resolve one source', args: ['source'], run: async ([source], _kwargs, ctx) => defaultSourceResolver(ctx, String(source)) },
    })
    return { cachedir, resolve: (source: string) => executeJob(registry, { jid: nextJid(), fun: 'probe.resolve', arg: [source] }) }
  }

  it('a salt:// source is cached through cp.cache_file (hash checked) and read from the cache', async () => {
    const { cachedir, resolve } = resolver()
    const result = await resolve('salt://big.bin')
    expect(result).toMatchObject({ return: join(cachedir, 'files', 'base', 'big.bin'), retcode: 0 })
    expect(sha256(readFileSync(join(cachedir, 'files', 'base', 'big.bin')))).toBe(sha256(big))
  })

  it('a missing file or a path out of the roots is refused by name, and nothing is cached', async () => {
    const { cachedir, resolve } = resolver()
    expect((await resolve('salt://absent.deb')).return).toBe('ERROR: Unable to cache salt://absent.deb from the master: no such file in its file_roots')
    expect((await resolve('salt://escape.txt')).return).toMatch(/^ERROR: FileServerPathError: file server path .* refused: /)
    expect((await resolve('salt://../outside.txt')).return).toMatch(/^ERROR: FileServerPathError: /)
    expect(existsSync(join(cachedir, 'files'))).toBe(false)
  })
})
