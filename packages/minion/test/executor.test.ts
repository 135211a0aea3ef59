import { describe, expect, it } from 'vitest'
import { EX_GENERIC, executeJob } from '../src/executor.js'
import { CommandExecutionError } from '../src/errors.js'
import type { ModuleDefinition } from '../src/modules/types.js'
import { deadline, makeFixture, nextJid } from './modules-fixture.js'

const custom: ModuleDefinition = {
  fails: { doc: 'fails', run: async () => ({ result: false, comment: 'nope' }) },
  cmderr: {
    doc: 'raises CommandExecutionError',
    run: async () => {
      throw new CommandExecutionError('disk on fire')
    },
  },
  stubborn: {
    doc: 'ignores its abort signal',
    run: () => new Promise(() => {}),
  },
}

describe('executeJob', () => {
  it('returns the function value with retcode 0 and success', async () => {
    const { run } = makeFixture()
    await expect(run('test.ping')).resolves.toEqual({ return: true, retcode: 0, success: true })
  })

  it("parses 'key=value' strings with YAML typing and __kwarg__ dicts into kwargs", async () => {
    const { run } = makeFixture()
    const result = await run('test.arg', ['one', 2, 'timeout=5', 'flag=true', 'name=bob', { __kwarg__: true, nested: { a: 1 } }, { plain: true }])
    expect(result).toEqual({
      return: { args: ['one', 2, { plain: true }], kwargs: { timeout: 5, flag: true, name: 'bob', nested: { a: 1 } } },
      retcode: 0,
      success: true,
    })
  })

  it('merges a separate kwarg field, and fills named positional parameters from kwargs', async () => {
    const { run } = makeFixture()
    expect((await run('test.arg', ['a'], { kwarg: { k: 'v' } })).return).toEqual({ args: ['a'], kwargs: { k: 'v' } })
    expect((await run('test.echo', ['text=hello'])).return).toBe('hello')
  })

  it('passes the publish data as __pub_ kwargs to **kwargs functions', async () => {
    const { registry } = makeFixture()
    const jid = nextJid()
    const result = await executeJob(registry, { jid, fun: 'test.kwarg', arg: ['x=1'], tgt: '*', tgt_type: 'glob', user: 'root' })
    expect(result.return).toEqual({
      x: 1,
      __pub_jid: jid,
      __pub_fun: 'test.kwarg',
      __pub_arg: ['x=1'],
      __pub_tgt: '*',
      __pub_tgt_type: 'glob',
      __pub_user: 'root',
    })
  })

  it("answers an unknown function with Salt's message and retcode", async () => {
    const { run } = makeFixture()
    await expect(run('foo.bar')).resolves.toEqual({ return: "'foo.bar' is not available.", retcode: EX_GENERIC, success: false, out: 'nested' })
  })

  it('answers a near miss with the docs of the matching functions', async () => {
    const { run, registry } = makeFixture()
    const result = await run('test.pin')
    expect(result.success).toBe(false)
    expect(result.return).toEqual({ 'test.ping': registry.get('test.ping')?.doc, 'test.pin': "'test.pin' is not available." })
  })

  it('turns a thrown error into "The minion function caused an exception" with its stack', async () => {
    const { run } = makeFixture()
    const result = await run('test.exception', ['Oh noes!'])
    expect(result.retcode).toBe(EX_GENERIC)
    expect(result.success).toBe(false)
    expect(result.out).toBe('nested')
    expect(result.return).toMatch(/^The minion function caused an exception: Error\('Oh noes!'\): Error: Oh noes!\n\s+at /)
  })

  it("reports bad arguments like Salt's TypeError branch, with the docstring", async () => {
    const { run, registry } = makeFixture()
    const result = await run('test.echo', [])
    expect(result).toEqual({
      return: `Passed invalid arguments to test.echo: echo() missing 1 required positional argument: 'text'\n${registry.get('test.echo')?.doc}`,
      retcode: EX_GENERIC,
      success: false,
      out: 'nested',
    })
  })

  it('reports invalid keyword arguments and CommandExecutionError the Salt way', async () => {
    const { run } = makeFixture({}, { custom })
    expect((await run('test.ping', ['bogus=1'])).return).toBe("ERROR executing 'test.ping': The following keyword arguments are not valid: bogus=1")
    expect(await run('custom.cmderr')).toEqual({ return: 'ERROR: disk on fire', retcode: 1, success: false, out: 'nested' })
  })

  it('takes the retcode a function sets, and fails a dict with result false', async () => {
    const { run } = makeFixture({}, { custom })
    expect(await run('test.retcode')).toEqual({ return: true, retcode: 42, success: false })
    expect(await run('test.retcode', ['0'])).toEqual({ return: true, retcode: 0, success: true })
    expect(await run('custom.fails')).toEqual({ return: { result: false, comment: 'nope' }, retcode: 1, success: false })
  })

  it('lists the job while it runs and removes it after, even when it fails', async () => {
    const { jobs, start } = makeFixture()
    const job = start('test.sleep', [30])
    expect(jobs.get(job.jid)).toMatchObject({ jid: job.jid, fun: 'test.sleep', arg: [30], pid: process.pid })
    expect(jobs.get(job.jid)?._stamp).toMatch(/^\d{4}-\d\d-\d\dT/)
    jobs.kill(job.jid)
    const result = await deadline(job.result, 10_000, 'the killed test.sleep job to return')
    expect(result).toMatchObject({ retcode: 1, success: false, killed: true })
    expect(jobs.size).toBe(0)
  })

  it("a caller's signal kills a job even when its function ignores the signal", async () => {
    const { run, jobs } = makeFixture({}, { custom })
    const controller = new AbortController()
    const pending = run('custom.stubborn', [], {}, { signal: controller.signal, killGraceMs: 10 })
    expect(jobs.size).toBe(1)
    controller.abort('minion shutting down')
    const result = await deadline(pending, 10_000, 'the aborted stubborn job to return')
    expect(result).toMatchObject({ retcode: 1, success: false, killed: true })
    expect(result.return).toMatch(/^ERROR: job \d{20} was killed: minion shutting down$/)
    expect(jobs.size).toBe(0)
  })
})
