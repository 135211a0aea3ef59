import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { FileRoots, FileServer } from '@brine/master'
import type { FileCommand } from '@brine/protocol'
import { serializeError, silentLogger } from '@brine/core'
import { NotAcknowledgedError } from '@brine/link'
import { executeJob } from '../src/executor.js'
import { defineModule, definitionOf, reloadCustomModules } from '../src/modules/loader.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { MasterChannel } from '../src/modules/types.js'
import { nextJid } from './modules-fixture.js'

const scratch = mkdtempSync(join(tmpdir(), 'brine-loader-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
const root = scratch

const HELLO = `export default {
  doc: 'Says hello.',
  functions: {
    world: { doc: 'Return a greeting.\\n\\nCLI Example:\\n\\n    brine "*" hello.world', args: ['name'], defaults: { name: 'world' }, run: async ([name], _kwargs, ctx) => 'hello ' + name + ' from ' + ctx.id },
  },
}
`
const PLAIN = `export function add(a, b) { return Number(a) + Number(b) }\nadd.doc = 'Add two numbers.'\nexport const __virtualname__ = 'calc'\n`
const BROKEN = `export function oops( {\n`
const SHADOW = `export function ping() { return 'custom pong' }\n`

/**
 * A registry whose master is the master's own file server in-process, serving `root` as base (its
 * `_modules/` holds what `served` names), behind a channel that refuses as the wire does. Each request is
 * recorded, so a test sees what crossed.
 */
function setup(served: Map<string, string>, opts: Record<string, unknown>) {
  const root = mkdtempSync(join(scratch, 'srv-'))
  const write = (): void => {
    rmSync(join(root, '_modules'), { recursive: true, force: true })
    mkdirSync(join(root, '_modules'), { recursive: true })
    for (const [file, text] of served) writeFileSync(join(root, '_modules', file), text)
  }
  const server = new FileServer({
    roots: new FileRoots({ roots: { base: [root] } }),
    bufferSize: 65536,
    hashType: 'sha256',
    recv: false,
    recvMaxBytes: 0,
    cachedir: join(root, '..', `${basename(root)}-master`),
  })
  const requests: Record<string, unknown>[] = []
  const master: MasterChannel = {
    request: async (load) => {
      write()
      requests.push(load as Record<string, unknown>)
      try {
        return { ok: true, ...(await server.handle('minion-1', load.cmd as FileCommand, { ...load, id: 'minion-1' })) }
      } catch (error) {
        const serialized = serializeError(error)
        throw new NotAcknowledgedError(load.cmd, JSON.stringify(serialized), { refusal: serialized.name, error: serialized })
      }
    },
  }
  const registry = createModuleRegistry({ id: 'minion-1', grains: {}, opts, logger: silentLogger, jobs: new RunningJobs(), master })
  const run = (fun: string, arg: unknown[] = []) => executeJob(registry, { jid: nextJid(), fun, arg })
  return { registry, run, requests, server }
}

describe('custom modules', () => {
  it('sync_modules lists salt://_modules/, fetches hash first, loads without a restart, resyncs only changes, reports a broken module by name while the rest run', async () => {
    const served = new Map([
      ['hello.js', HELLO],
      ['README.md', 'not a module'],
    ])
    const { run, requests, server } = setup(served, { cachedir: join(root, 'cache') })
    expect((await run('hello.world')).return).toBe("'hello.world' is not available.")

    const first = await run('saltutil.sync_modules')
    expect(first).toMatchObject({ return: ['modules.hello'], retcode: 0 })
    expect(requests.map((load) => load.cmd)).toEqual(['_file_list', '_file_hash', '_serve_file', '_serve_file'])
    expect(requests[0]).toMatchObject({ saltenv: 'base', prefix: '_modules/' })
    expect((await run('hello.world')).return).toBe('hello world from minion-1')
    expect((await run('hello.world', ['name=brine'])).return).toBe('hello brine from minion-1')
    expect((await run('sys.doc', ['hello'])).return).toEqual({ 'hello.world': expect.stringContaining('Return a greeting.') })

    // Unchanged: the hash is asked, no byte travels, nothing is reported.
    const served1 = server.stats().bytes_served
    requests.length = 0
    expect((await run('saltutil.sync_modules')).return).toEqual([])
    expect(requests.map((load) => load.cmd)).toEqual(['_file_list', '_file_hash'])
    expect(server.stats().bytes_served).toBe(served1)

    served.set('broken.mjs', BROKEN)
    const second = await run('saltutil.sync_modules')
    expect(second.retcode).toBe(1)
    expect(second.return).toEqual({ synced: ['modules.broken'], failed: { broken: expect.stringMatching(/syntax/i) } })
    expect((await run('hello.world')).return).toBe('hello world from minion-1')
    expect((await run('broken.oops')).return).toEqual(expect.stringContaining("'broken.oops' is not available: its module failed to load: "))

    // Changed on the master: fetched again and reloaded.
    served.set('hello.js', HELLO.replace("'hello '", "'hi '"))
    expect((await run('saltutil.sync_modules')).return).toEqual({ synced: ['modules.hello'], failed: { broken: expect.stringMatching(/syntax/i) } })
    expect((await run('hello.world')).return).toBe('hi world from minion-1')

    // Gone from the master: removed here, its functions gone.
    served.delete('broken.mjs')
    served.delete('hello.js')
    expect((await run('saltutil.sync_all')).return).toMatchObject({ modules: ['modules.broken', 'modules.hello'], states: [] })
    expect((await run('hello.world')).return).toBe("'hello.world' is not available.")
    expect(readdirSync(join(root, 'cache', 'extmods', 'modules')).filter((file) => file.endsWith('.js'))).toEqual([])
  })

  it('an environment the master does not have is refused by name, and the modules held stay', async () => {
    const { run } = setup(new Map([['hello.js', HELLO]]), { cachedir: join(root, 'cache-env') })
    expect((await run('saltutil.sync_modules')).return).toEqual(['modules.hello'])
    const refused = await run('saltutil.sync_modules', ['saltenv=dev'])
    expect(refused).toMatchObject({ retcode: 1, success: false })
    expect(refused.return).toMatch(/^ERROR: FileServerPathError: .*no such environment/)
    expect((await run('hello.world')).return).toBe('hello world from minion-1')
  })

  it('module_dirs: plain exported functions, __virtualname__, and a custom function replacing a built-in until it goes', async () => {
    const local = join(root, 'local')
    mkdirSync(join(local, '_modules'), { recursive: true })
    writeFileSync(join(local, '_modules', 'mathmod.mjs'), PLAIN)
    writeFileSync(join(local, '_modules', 'test.mjs'), SHADOW)
    const { registry, run } = setup(new Map(), { cachedir: join(root, 'cache2'), module_dirs: [local] })
    expect(await reloadCustomModules(registry, registry.context.opts, silentLogger)).toEqual({ loaded: ['calc', 'test'], failed: {} })
    expect((await run('calc.add', [2, 3])).return).toBe(5)
    expect(registry.get('calc.add')?.doc).toBe('Add two numbers.')
    expect((await run('test.ping')).return).toBe('custom pong')
    expect((await run('test.echo', ['still here'])).return).toBe('still here')

    rmSync(join(local, '_modules', 'test.mjs'))
    expect((await run('saltutil.refresh_modules')).return).toBe(true)
    expect((await run('test.ping')).return).toBe(true)
  })

  it('a reload that finds no custom module keeps the built-in table; one after a custom layer, or a function registered by hand, drops it', async () => {
    const registry = createModuleRegistry({ id: 'm', grains: {}, opts: { cachedir: join(root, 'c4') }, logger: silentLogger, jobs: new RunningJobs() })
    const ping = registry.get('test.ping')
    const names = registry.names()
    expect(await reloadCustomModules(registry, registry.context.opts, silentLogger)).toEqual({ loaded: [], failed: {} })
    // Nothing to change: not rebuilt (the same function entries), every function still there.
    expect(registry.get('test.ping')).toBe(ping)
    expect(registry.names()).toEqual(names)
    registry.setCustom({ extra: { hello: { doc: 'hi', run: async () => 'hello' } } }, { 'broken.mjs': 'SyntaxError: x' })
    expect(registry.has('extra.hello')).toBe(true)
    expect(registry.loadError('broken.mjs')).toBe('SyntaxError: x')
    registry.setCustom({})
    expect(registry.has('extra.hello')).toBe(false)
    expect(registry.loadError('broken.mjs')).toBeUndefined()
    expect(registry.names()).toEqual(names)
    registry.register('manual', { f: { doc: 'by hand', run: async () => 1 } })
    registry.setCustom({})
    expect(registry.has('manual.f')).toBe(false)
    expect(registry.names()).toEqual(names)
  })

  it('a module exporting nothing usable is refused with a reason; defineModule is the identity', () => {
    expect(() => definitionOf('empty', { value: 1 })).toThrow('the module exports no functions')
    expect(() => definitionOf('bad', { default: { functions: { f: { doc: 'x' } } } })).toThrow('bad.f is neither a function nor a {doc, run} spec')
    const module = { functions: { f: () => 1 } }
    expect(defineModule(module)).toBe(module)
  })

  it('sync without a master is a clear error, not a crash', async () => {
    const registry = createModuleRegistry({ id: 'm', grains: {}, opts: { cachedir: join(root, 'c3') }, logger: silentLogger, jobs: new RunningJobs() })
    const result = await executeJob(registry, { jid: nextJid(), fun: 'saltutil.sync_modules', arg: ['saltenv=../x'] })
    expect(result.return).toEqual(expect.stringContaining('saltenv must be an environment name'))
    const none = await executeJob(registry, { jid: nextJid(), fun: 'saltutil.sync_modules', arg: [] })
    expect(none.return).toBe('ERROR: no master to sync modules from (a standalone minion loads module_dirs only)')
  })
})
