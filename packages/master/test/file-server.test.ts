import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError } from '@brine/config'
import { FileServerPathError } from '@brine/protocol'
import { FileRecvRefusedError, FileRoots, FileServer, fileServerFromConfig } from '../src/index.js'
import { runWheel } from '../src/wheel.js'

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'brine-fileserver-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

function tree(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(join(scratch, 'root-'))
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true })
    writeFileSync(join(root, path), content)
  }
  return root
}

const outside = tree({ 'secret.txt': 'not for minions' })
const first = tree({ 'top.txt': 'from the first root', 'shared.txt': 'first wins', 'scripts/hello.sh': 'echo hello', '.git/config': 'x', 'notes.swp': 'x' })
const second = tree({ 'shared.txt': 'second loses', 'only-second.txt': 'second' })
const dev = tree({ 'dev.txt': 'dev' })
symlinkSync(join(outside, 'secret.txt'), join(first, 'escape.txt'))
symlinkSync(outside, join(first, 'escape-dir'))
symlinkSync(join(first, 'top.txt'), join(first, 'inside-link.txt'))

const roots = new FileRoots({ roots: { base: [first, second], dev: [dev] }, ignoreRegex: ['/\\.git($|/)', '^\\.git'], ignoreGlob: ['*.swp'] })

describe('FileRoots: confinement', () => {
  it.each([
    ['../etc/passwd', "'..'"],
    ['scripts/../../etc/passwd', "'..'"],
    ['a\0b', 'NUL'],
    ['a\\..\\b', 'backslash'],
    ['', 'non-empty'],
    ['./', 'names no file'],
  ])('refuses %j with FileServerPathError', async (path, problem) => {
    const refusal = await roots.find(path, 'base').catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(FileServerPathError)
    expect((refusal as FileServerPathError).message).toContain(problem)
  })

  it('refuses a symlink that leads out of its root, to a file or through a directory', async () => {
    for (const path of ['escape.txt', 'escape-dir/secret.txt']) {
      const refusal = await roots.find(path, 'base').catch((error: unknown) => error)
      expect(refusal).toBeInstanceOf(FileServerPathError)
      expect((refusal as FileServerPathError).problem).toBe('a symlink leads out of the file roots')
    }
  })

  it('serves a symlink inside its root, an absolute-looking path as relative, and searches roots in order', async () => {
    expect((await roots.find('inside-link.txt', 'base'))?.real).toBe(join(first, 'top.txt'))
    expect((await roots.find('/top.txt', 'base'))?.real).toBe(join(first, 'top.txt'))
    expect((await roots.find('shared.txt', 'base'))?.root).toBe(first)
    expect((await roots.find('only-second.txt', 'base'))?.root).toBe(second)
    expect(await roots.find('missing.txt', 'base')).toBeUndefined()
    expect(await roots.find('dev.txt', 'base')).toBeUndefined()
    expect((await roots.find('dev.txt', 'dev'))?.root).toBe(dev)
  })

  it('hides what file_ignore_regex and file_ignore_glob name, in listings and when asked for', async () => {
    await expect(roots.find('notes.swp', 'base')).rejects.toThrow(FileServerPathError)
    await expect(roots.find('.git/config', 'base')).rejects.toThrow(/file_ignore_regex or file_ignore_glob/)
    const files = await roots.list('base', 'files')
    expect(files).toEqual(['inside-link.txt', 'only-second.txt', 'scripts/hello.sh', 'shared.txt', 'top.txt'])
    expect(await roots.list('base', 'dirs')).toEqual(['scripts'])
    expect(await roots.list('base', 'files', 'scripts/')).toEqual(['scripts/hello.sh'])
  })

  it('refuses an unknown environment naming the known ones, and bad config at construction', async () => {
    await expect(roots.find('x', 'prod')).rejects.toThrow(/no such environment \(file_roots has: base, dev\)/)
    expect(roots.envs()).toEqual(['base', 'dev'])
    expect(() => new FileRoots({ roots: { base: [1] } })).toThrow(ConfigError)
    expect(() => new FileRoots({ roots: { base: [first] }, ignoreRegex: ['(unclosed'] })).toThrow(/file_ignore_regex/)
  })
})

describe('FileServer: chunks, hashes, pushes', () => {
  const big = randomBytes(100_000)
  const root = tree({ 'big.bin': big })
  const server = new FileServer({
    roots: new FileRoots({ roots: { base: [root] } }),
    bufferSize: 4096,
    hashType: 'sha256',
    recv: true,
    recvMaxBytes: 10_000,
    cachedir: join(scratch, 'cache'),
  })

  it('answers the hash first, then chunks of file_buffer_size that rebuild the file', async () => {
    const hash = await server.handle('m1', '_file_hash', { path: 'big.bin', saltenv: 'base' })
    expect(hash).toEqual({ hsum: createHash('sha256').update(big).digest('hex'), hash_type: 'sha256', size: big.length })
    const chunks: Uint8Array[] = []
    for (let loc = 0, rounds = 0; rounds < 100; rounds++) {
      const { data, dest } = (await server.handle('m1', '_serve_file', { path: 'big.bin', saltenv: 'base', loc })) as { data: Uint8Array; dest: string }
      expect(dest).toBe('big.bin')
      expect(data.length).toBeLessThanOrEqual(4096)
      if (data.length === 0) break
      chunks.push(Uint8Array.from(data))
      loc += data.length
    }
    expect(chunks).toHaveLength(Math.ceil(big.length / 4096))
    expect(Buffer.concat(chunks).equals(big)).toBe(true)
    expect(server.stats()).toMatchObject({ hashes: 1, files_served: 1, chunks_served: chunks.length, bytes_served: big.length })
    expect(await server.handle('m1', '_file_hash', { path: 'nope', saltenv: 'base' })).toEqual({})
  })

  it('stores pushed chunks under cachedir/minions/<id>/files, in order and within file_recv_max_size', async () => {
    const parts = ['etc', 'app.conf']
    await server.handle('m1', '_file_recv', { path: parts, size: 6, loc: 0, data: Buffer.from('abc') })
    await server.handle('m1', '_file_recv', { path: parts, size: 6, loc: 3, data: Buffer.from('def') })
    expect(readFileSync(join(scratch, 'cache/minions/m1/files/etc/app.conf'), 'utf8')).toBe('abcdef')
    await expect(server.handle('m1', '_file_recv', { path: parts, size: 9, loc: 9, data: Buffer.from('x') })).rejects.toThrow(/does not follow the 6 bytes/)
    await expect(server.handle('m1', '_file_recv', { path: ['big'], size: 20_000, loc: 0, data: Buffer.from('x') })).rejects.toThrow(FileRecvRefusedError)
    for (const bad of [['..', 'x'], ['a/b'], [], ['ok', '.']]) {
      await expect(server.handle('m1', '_file_recv', { path: bad, loc: 0, data: Buffer.from('x') })).rejects.toThrow(FileRecvRefusedError)
    }
    expect(existsSync(join(scratch, 'cache/minions/x'))).toBe(false)
  })

  it('refuses every push when file_recv is off', async () => {
    const closed = fileServerFromConfig({ file_roots: { base: [root] }, cachedir: join(scratch, 'closed') }, { bufferSize: 4096, recvMaxBytes: 1 << 20 })
    await expect(closed.handle('m1', '_file_recv', { path: ['a'], loc: 0, data: Buffer.from('x') })).rejects.toThrow(/file_recv is not enabled/)
    expect(existsSync(join(scratch, 'closed'))).toBe(false)
  })

  it('file_roots.list_roots shows each root as a tree of files', async () => {
    const outcome = await runWheel(
      { fun: 'file_roots.list_roots' },
      {
        store: undefined as never,
        masterPub: undefined as never,
        files: new FileServer({ roots, bufferSize: 4096, hashType: 'sha256', recv: false, recvMaxBytes: 0, cachedir: scratch }),
      },
    )
    expect(outcome.return).toEqual({
      base: [
        { [first]: { 'inside-link.txt': 'f', scripts: { 'hello.sh': 'f' }, 'shared.txt': 'f', 'top.txt': 'f' } },
        { [second]: { 'only-second.txt': 'f', 'shared.txt': 'f' } },
      ],
      dev: [{ [dev]: { 'dev.txt': 'f' } }],
    })
  })
})
