import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { makeFixture } from './modules-fixture.js'

const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }

describe('test module', () => {
  const { run } = makeFixture()

  it('ping, echo, true, false', async () => {
    expect((await run('test.ping')).return).toBe(true)
    expect((await run('test.echo', ['foo bar baz'])).return).toBe('foo bar baz')
    expect((await run('test.true')).return).toBe(true)
    expect((await run('test.false')).return).toBe(false)
  })

  it('arg returns {args, kwargs} without the __pub_ keys', async () => {
    expect((await run('test.arg', [1, 'two', 3.1, 'txt=hello', "wow={a: 1, b: 'hello'}"])).return).toEqual({
      args: [1, 'two', 3.1],
      kwargs: { txt: 'hello', wow: { a: 1, b: 'hello' } },
    })
  })

  it('sleep returns true, and rejects a non-integer length', async () => {
    expect(await run('test.sleep', ['0'])).toEqual({ return: true, retcode: 0, success: true })
    const bad = await run('test.sleep', ['soon'])
    expect(bad.return).toBe('ERROR executing \'test.sleep\': length must be an integer, got "soon"')
  })

  it("version is @brine/minion's package version", async () => {
    expect((await run('test.version')).return).toBe(manifest.version)
  })

  it('fib returns [the num-th Fibonacci number, seconds taken]', async () => {
    const result = (await run('test.fib', ['10'])).return as [number, number]
    expect(result[0]).toBe(55)
    expect(result[1]).toBeGreaterThanOrEqual(0)
    expect(((await run('test.fib', [1])).return as unknown[])[0]).toBe(1)
    expect((await run('test.fib', [-1])).return).toBe("ERROR executing 'test.fib': Negative number is not allowed!")
  })

  it('collatz returns the sequence and seconds taken', async () => {
    expect(((await run('test.collatz', [3])).return as unknown[])[0]).toEqual([3, 10, 5, 16, 8, 4, 2])
  })

  it('exception raises with the given or default message', async () => {
    expect((await run('test.exception', ['boom'])).return).toMatch(/caused an exception: Error\('boom'\)/)
    expect((await run('test.exception')).return).toMatch(/Error\('Test Exception'\)/)
  })

  it('retcode sets the job retcode (default 42)', async () => {
    expect(await run('test.retcode')).toMatchObject({ return: true, retcode: 42 })
    expect(await run('test.retcode', ['code=7'])).toMatchObject({ return: true, retcode: 7 })
  })
})
