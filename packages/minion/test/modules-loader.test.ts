import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { silentLogger } from '@brine/transport'
import { executeJob } from '../src/executor.js'
import { defineModule, definitionOf, reloadCustomModules } from '../src/modules/loader.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { MasterChannel } from '../src/modules/types.js'
import { nextJid } from './modules-fixture.js'

const root = mkdtempSync(join(tmpdir(), 'brine-loader-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

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

/** A registry whose master answers `_modules_sync` from `served` (name → text) as the master's ModuleSyncSource does. */
function setup(served: Map<string, string>, opts: Record<string, unknown>) {
  const requests: Record<string, unknown>[] = []
  const master: MasterChannel = {
    request: async (load) => {
      requests.push(load as Record<string, unknown>)
      const have = (load as unknown as { have: Record<string, string> }).have
      const modules = [...served].map(([name, text]) => {
        const data = new TextEncoder().encode(text)
        const hash = createHash('sha256').update(data).digest('hex')
        return have[name] === hash ? { name, hash, size: data.length } : { name, hash, size: data.length, data }
      })
      return { ok: true, modules, skipped: [] }
    },
  }
  const registry = createModuleRegistry({ id: 'minion-1', grains: {}, opts, logger: silentLogger, jobs: new RunningJobs(), master })
  const run = (fun: string, arg: unknown[] = []) => executeJob(registry, { jid: nextJid(), fun, arg })
  return { registry, run, requests }
}

describe('custom modules', () => {
  it('sync_modules fetches, loads without a restart, resyncs only changes, reports a broken module by name while the rest run', async () => {
    const served = new Map([['hello', HELLO]])
    const { run, requests } = setup(served, { cachedir: join(root, 'cache') })
    expect((await run('hello.world')).return).toBe("'hello.world' is not available.")

    const first = await run('saltutil.sync_modules')
    expect(first).toMatchObject({ return: ['modules.hello'], retcode: 0 })
    expect((await run('hello.world')).return).toBe('hello world from minion-1')
    expect((await run('hello.world', ['name=brine'])).return).toBe('hello brine from minion-1')
    expect((await run('sys.doc', ['hello'])).return).toEqual({ 'hello.world': expect.stringContaining('Return a greeting.') })

    // Unchanged: nothing travels, nothing is reported.
    expect((await run('saltutil.sync_modules')).return).toEqual([])
    expect(requests[1]?.have).toEqual({ hello: createHash('sha256').update(HELLO).digest('hex') })

    served.set('broken', BROKEN)
    const second = await run('saltutil.sync_modules')
    expect(second.retcode).toBe(1)
    expect(second.return).toEqual({ synced: ['modules.broken'], failed: { broken: expect.stringMatching(/syntax/i) } })
    expect((await run('hello.world')).return).toBe('hello world from minion-1')
    expect((await run('broken.oops')).return).toEqual(expect.stringContaining("'broken.oops' is not available: its module failed to load: "))

    // Gone from the master: removed here, its functions gone.
    served.delete('broken')
    served.delete('hello')
    expect((await run('saltutil.sync_all')).return).toMatchObject({ modules: ['modules.broken', 'modules.hello'], states: [] })
    expect((await run('hello.world')).return).toBe("'hello.world' is not available.")
    expect(readdirSync(join(root, 'cache', 'extmods', 'modules')).filter((file) => file.endsWith('.js'))).toEqual([])
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
