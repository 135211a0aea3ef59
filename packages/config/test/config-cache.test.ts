import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { fileConfigParseCache, MAX_CONFIG_CACHE_ENTRIES, survivesJson } from '../src/config-cache.js'
import { loadConfig } from '../src/config.js'

let root: string
let configDir: string
let cacheDir: string

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'brine-config-cache-'))
  configDir = join(root, 'etc')
  cacheDir = join(root, 'cache', 'config')
  await mkdir(configDir)
})
afterEach(async () => {
  await rm(root, { recursive: true, force: true })
})

const MASTER =
  'interface: 127.0.0.1\nret_port: 4606\ntransport: tcp\ntransport_opts:\n  tcp:\n    ret_port: 4706\nfile_roots:\n  base: [/srv/salt]\nno_such_key: 1\n'

async function entries(): Promise<string[]> {
  return (await readdir(cacheDir).catch(() => [] as string[])).filter((name) => name.endsWith('.json'))
}

describe("a command's parse cache of its config files", () => {
  it('keeps a parse only its user may read, and loading from it gives what parsing gives: values, lines, warnings', async () => {
    await writeFile(join(configDir, 'master'), MASTER)
    const parsed = await loadConfig('master', { configDir })
    const parseCache = fileConfigParseCache(cacheDir)
    const first = await loadConfig('master', { configDir, parseCache })
    expect(await entries()).toHaveLength(1)
    expect((await stat(cacheDir)).mode & 0o777).toBe(0o700)
    expect((await stat(join(cacheDir, (await entries())[0]!))).mode & 0o777).toBe(0o600)
    const second = await loadConfig('master', { configDir, parseCache })
    for (const loaded of [first, second]) {
      expect(loaded.opts).toEqual(parsed.opts)
      expect(loaded.sources).toEqual(parsed.sources)
      expect(loaded.warnings).toEqual(parsed.warnings)
    }
    expect(second.sources.get('transport_opts.tcp.ret_port')).toEqual({ file: join(configDir, 'master'), line: 6 })
  })

  it('is read for the same text of the same file, and for nothing else', async () => {
    const file = join(configDir, 'master')
    await writeFile(file, 'ret_port: 4606\n')
    const parseCache = fileConfigParseCache(cacheDir)
    // What the cache holds is what a load uses: an entry made for this text says 4999.
    parseCache.set(file, 'ret_port: 4606\n', { values: { ret_port: 4999 }, lines: new Map([['ret_port', 1]]) })
    expect((await loadConfig('master', { configDir, parseCache })).opts.ret_port).toBe(4999)
    expect(parseCache.get(join(root, 'elsewhere'), 'ret_port: 4606\n')).toBeUndefined()
    // The file changes: parsed again, and the entry follows the new text.
    await writeFile(file, 'ret_port: 4607\n')
    expect(parseCache.get(file, 'ret_port: 4607\n')).toBeUndefined()
    expect((await loadConfig('master', { configDir, parseCache })).opts.ret_port).toBe(4607)
    expect(parseCache.get(file, 'ret_port: 4607\n')?.values).toEqual({ ret_port: 4607 })
    expect(parseCache.get(file, 'ret_port: 4606\n')).toBeUndefined()
  })

  it('passes over an entry that someone else could have written', async () => {
    const file = join(configDir, 'master')
    const parseCache = fileConfigParseCache(cacheDir)
    parseCache.set(file, 'ret_port: 4606\n', { values: { ret_port: 4606 }, lines: new Map() })
    const [entry] = await entries()
    await chmod(join(cacheDir, entry!), 0o620)
    expect(parseCache.get(file, 'ret_port: 4606\n')).toBeUndefined()
    await chmod(join(cacheDir, entry!), 0o600)
    expect(parseCache.get(file, 'ret_port: 4606\n')?.values).toEqual({ ret_port: 4606 })
  })

  it('keeps no file that did not parse, nor values JSON would not give back exactly', async () => {
    const parseCache = fileConfigParseCache(cacheDir)
    await writeFile(join(configDir, 'master'), 'ret_port: [\n')
    await expect(loadConfig('master', { configDir, parseCache })).rejects.toThrow(/invalid YAML/)
    for (const text of ['x: !!binary aGVsbG8=\n', 'x: .inf\n', 'x: -0.0\n', 'a: &a [1]\nb: *a\n']) {
      await writeFile(join(configDir, 'master'), text)
      await loadConfig('master', { configDir, parseCache })
    }
    expect(await entries()).toEqual([])
    await writeFile(join(configDir, 'master'), 'x: 1.5\n')
    await loadConfig('master', { configDir, parseCache })
    expect(await entries()).toHaveLength(1)
  })

  it(`holds at most ${MAX_CONFIG_CACHE_ENTRIES} entries, dropping the least recently written`, async () => {
    const parseCache = fileConfigParseCache(cacheDir)
    for (let i = 0; i < MAX_CONFIG_CACHE_ENTRIES + 6; i++)
      parseCache.set(join(root, `c${i}`, 'master'), `id: m${i}\n`, { values: { id: `m${i}` }, lines: new Map() })
    expect(await entries()).toHaveLength(MAX_CONFIG_CACHE_ENTRIES)
    const last = join(root, `c${MAX_CONFIG_CACHE_ENTRIES + 5}`, 'master')
    expect(parseCache.get(last, `id: m${MAX_CONFIG_CACHE_ENTRIES + 5}\n`)).toBeDefined()
    const kept = await Promise.all((await entries()).map(async (name) => JSON.parse(await readFile(join(cacheDir, name), 'utf8')) as { file: string }))
    expect(kept.map((entry) => entry.file)).not.toContain(join(root, 'c0', 'master'))
  })

  it('costs only the speed when its directory cannot be made', async () => {
    await writeFile(join(root, 'cache'), 'a file where the directory would go')
    const parseCache = fileConfigParseCache(cacheDir)
    await writeFile(join(configDir, 'master'), 'ret_port: 4606\n')
    expect((await loadConfig('master', { configDir, parseCache })).opts.ret_port).toBe(4606)
    expect(parseCache.get(join(configDir, 'master'), 'ret_port: 4606\n')).toBeUndefined()
  })
})

describe('survivesJson', () => {
  it('accepts plain data and refuses what JSON would change', () => {
    expect(survivesJson({ a: [1, 'x', true, null, { b: 2.5 }] })).toBe(true)
    const shared = { a: 1 }
    for (const value of [Buffer.from('x'), Number.NaN, Number.POSITIVE_INFINITY, -0, new Date(0), new Map(), 1n, undefined, { a: [shared, shared] }]) {
      expect(survivesJson({ x: value })).toBe(false)
    }
    expect(survivesJson(JSON.parse('{"__proto__": 1}'))).toBe(false)
  })
})
