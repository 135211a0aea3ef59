import { describe, expect, it } from 'vitest'
import { InvalidModuleNameError } from '../src/errors.js'
import type { ModuleDefinition } from '../src/modules/types.js'
import { makeFixture } from './modules-fixture.js'

const sysctl: ModuleDefinition = { get: { doc: 'sysctl get', args: ['name'], run: async () => '' } }

describe('sys module', () => {
  const { run, registry } = makeFixture({}, { sysctl })

  it('list_functions: all sorted, by module (sys does not match sysctl), by glob', async () => {
    const all = (await run('sys.list_functions')).return as string[]
    expect(all).toEqual([...all].sort())
    expect(all).toEqual(expect.arrayContaining(['cmd.run', 'grains.items', 'saltutil.kill_job', 'sys.doc', 'test.ping', 'sysctl.get']))
    expect((await run('sys.list_functions', ['sys'])).return).toEqual(['sys.argspec', 'sys.doc', 'sys.list_functions', 'sys.list_modules'])
    expect((await run('sys.list_functions', ['sys.list_*'])).return).toEqual(['sys.list_functions', 'sys.list_modules'])
  })

  it('list_modules, with globs', async () => {
    expect((await run('sys.list_modules')).return).toEqual([
      'cmd',
      'cp',
      'disk',
      'environ',
      'event',
      'file',
      'grains',
      'group',
      'network',
      'pkg',
      'saltutil',
      'schedule',
      'service',
      'status',
      'sys',
      'sysctl',
      'test',
      'user',
    ])
    expect((await run('sys.list_modules', ['s*'])).return).toEqual(['saltutil', 'schedule', 'service', 'status', 'sys', 'sysctl'])
  })

  it('doc returns {fun: docstring}', async () => {
    expect((await run('sys.doc', ['test.ping'])).return).toEqual({ 'test.ping': registry.get('test.ping')?.doc })
    const docs = (await run('sys.doc', ['grains'])).return as Record<string, string>
    expect(Object.keys(docs)).toEqual(['grains.get', 'grains.item', 'grains.items', 'grains.ls', 'grains.setval', 'grains.setvals'])
    expect(docs['grains.get']).toContain('grains.get pkg:apache')
  })

  it("argspec reports Salt's shape", async () => {
    expect((await run('sys.argspec', ['test.echo', 'test.retcode', 'test.arg'])).return).toEqual({
      'test.arg': { args: [], defaults: null, kwargs: true, varargs: true },
      'test.echo': { args: ['text'], defaults: null, kwargs: null, varargs: null },
      'test.retcode': { args: ['code'], defaults: [42], kwargs: null, varargs: null },
    })
  })

  it('refuses a module name that is not an identifier, with a typed error naming it', () => {
    const error = (() => {
      try {
        registry.register('bad-name', sysctl)
      } catch (caught) {
        return caught
      }
      return undefined
    })()
    expect(error).toBeInstanceOf(InvalidModuleNameError)
    expect(error).toMatchObject({ name: 'InvalidModuleNameError', module: 'bad-name' })
    expect(registry.has('bad-name.get')).toBe(false)
  })
})
