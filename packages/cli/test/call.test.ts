import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freeLoopbackPort } from '@brine/testkit'
import { runCall } from '../src/commands/call.js'
import { memoryIO } from './helpers.js'

let dir = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'brine-call-'))
  await writeFile(
    join(dir, 'minion'),
    `id: local1\ncachedir: ${join(dir, 'cache')}\nsock_dir: ${join(dir, 'sock')}\npki_dir: ${join(dir, 'pki')}\ngrains:\n  role: web\n`,
  )
})
afterAll(() => rm(dir, { recursive: true, force: true }))

describe('brine-call --local', () => {
  it('runs test.ping in-process and prints local: True', async () => {
    const io = memoryIO()
    expect(await runCall(['-c', dir, '--local', 'test.ping'], io)).toBe(0)
    expect(io.out()).toBe('local:\n    True\n')
  })

  it('--out-file writes the return to the file instead of stdout', async () => {
    const path = join(dir, 'call-out.txt')
    const io = memoryIO({ tty: true })
    expect(await runCall(['-c', dir, '--local', '--out-file', path, 'test.ping'], io)).toBe(0)
    expect(io.out()).toBe('')
    expect(await readFile(path, 'utf8')).toBe('local:\n    True\n')
  })

  it('runs cmd.run and exits with its retcode', async () => {
    const io = memoryIO()
    expect(await runCall(['-c', dir, '--local', '--out', 'json', 'cmd.run', 'echo hi; exit 3'], io)).toBe(3)
    expect(JSON.parse(io.out())).toEqual({ local: 'hi' })
  })

  it('sees the grains from the config', async () => {
    const io = memoryIO()
    expect(await runCall(['-c', dir, '--local', '--out', 'txt', 'grains.get', 'role'], io)).toBe(0)
    expect(io.out()).toBe('local: web\n')
  })

  it('types its arguments as salt-call does, and takes output settings from the minion config', async () => {
    const io = memoryIO()
    expect(
      await runCall(
        ['-c', dir, '--local', '--out', 'json', '--out-indent', '-1', 'test.arg', '1', '2.5', 'True', 'None', '[1,2]', '{a: 1}', '0755', 'mode=0755'],
        io,
      ),
    ).toBe(0)
    expect(io.out()).toBe('{"local": {"args": [1, 2.5, true, null, [1, 2], {"a": 1}, 755], "kwargs": {"mode": 755}}}\n')
    const other = await mkdtemp(join(tmpdir(), 'brine-call-out-'))
    try {
      await writeFile(join(other, 'minion'), `id: local2\ncachedir: ${join(other, 'cache')}\noutput: yaml\n`)
      const yaml = memoryIO()
      expect(await runCall(['-c', other, '--local', 'test.arg', 'on', 'mode=0755'], yaml)).toBe(0)
      expect(yaml.out()).toBe('local:\n  args:\n  - true\n  kwargs:\n    mode: 755\n')
    } finally {
      await rm(other, { recursive: true, force: true })
    }
  })

  it('loads custom modules from module_dirs, as salt-call does', async () => {
    const other = await mkdtemp(join(tmpdir(), 'brine-call-mods-'))
    try {
      await mkdir(join(other, 'mods', '_modules'), { recursive: true })
      await writeFile(join(other, 'mods', '_modules', 'greet.mjs'), 'export function hi(name) { return `hi ${name}` }\n')
      await writeFile(join(other, 'minion'), `id: local3\ncachedir: ${join(other, 'cache')}\nmodule_dirs: [${join(other, 'mods')}]\n`)
      const io = memoryIO()
      expect(await runCall(['-c', other, '--local', '--out', 'json', 'greet.hi', 'there'], io)).toBe(0)
      expect(JSON.parse(io.out())).toEqual({ local: 'hi there' })
    } finally {
      await rm(other, { recursive: true, force: true })
    }
  })

  it('saltutil.sync_modules syncs _modules/ of its own file_roots, as salt-call --local does, and a later call loads them', async () => {
    const other = await mkdtemp(join(tmpdir(), 'brine-call-sync-'))
    try {
      await mkdir(join(other, 'srv', '_modules'), { recursive: true })
      await writeFile(join(other, 'srv', '_modules', 'greet.js'), 'export function hi(name) { return `hi ${name}` }\n')
      await writeFile(join(other, 'minion'), `id: local4\ncachedir: ${join(other, 'cache')}\nfile_roots: {base: [${join(other, 'srv')}]}\n`)
      const sync = memoryIO()
      expect(await runCall(['-c', other, '--local', '--out', 'json', 'saltutil.sync_modules'], sync)).toBe(0)
      expect(JSON.parse(sync.out())).toEqual({ local: ['modules.greet'] })
      const io = memoryIO()
      expect(await runCall(['-c', other, '--local', '--out', 'json', 'greet.hi', 'there'], io)).toBe(0)
      expect(JSON.parse(io.out())).toEqual({ local: 'hi there' })
      expect(await readFile(join(other, 'cache', 'extmods', 'modules', 'greet.js'), 'utf8')).toContain('hi ${name}')
    } finally {
      await rm(other, { recursive: true, force: true })
    }
  })

  it('without --local asks the master, and exits 2 naming it when it does not answer within auth_timeout × auth_tries', async () => {
    const io = memoryIO()
    const port = await freeLoopbackPort()
    const argv = ['-c', dir, '--set', 'master=127.0.0.1', '--set', `master_port=${port}`, '--set', 'auth_timeout=1', '--set', 'auth_tries=1', 'test.ping']
    expect(await runCall(argv, io)).toBe(2)
    expect(io.err()).toMatch(
      new RegExp(
        `\\nbrine-call: Minion failed to authenticate with the master 127\\.0\\.0\\.1:${port}: no answer within 1000 ms \\(auth_timeout × auth_tries\\)\\n$`,
      ),
    )
    expect(io.out()).toBe('')
  })

  it("reads salt:// from the minion's own file_roots (Salt's file_client: local), confined as on a master", async () => {
    const roots = await mkdtemp(join(tmpdir(), 'brine-call-roots-'))
    try {
      await writeFile(join(roots, 'motd'), 'hello from the roots')
      const dest = join(roots, 'copied')
      const io = memoryIO()
      expect(await runCall(['-c', dir, '--local', '--out', 'json', '--set', `file_roots={base: [${roots}]}`, 'cp.get_file', 'salt://motd', dest], io)).toBe(0)
      expect(JSON.parse(io.out())).toEqual({ local: dest })
      expect(await readFile(dest, 'utf8')).toBe('hello from the roots')
      const escape = memoryIO()
      expect(
        await runCall(['-c', dir, '--local', '--out', 'json', '--set', `file_roots={base: [${roots}]}`, 'cp.get_file', 'salt://../etc/passwd', dest], escape),
      ).toBe(1)
      expect((JSON.parse(escape.out()) as { local: string }).local).toMatch(/^ERROR: FileServerPathError: .*'\.\.' leads out of the file roots/)
    } finally {
      await rm(roots, { recursive: true, force: true })
    }
  })
})
