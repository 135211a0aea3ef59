import { describe, expect, it } from 'vitest'
import { bindArguments, fnmatch, loadArgsAndKwargs, parseInput, parseKwarg, traverseDictAndList, yamlifyArg } from '../src/modules/args.js'
import { ArgumentError, InvocationError } from '../src/errors.js'

describe('parseKwarg', () => {
  it('splits identifier=value and leaves other strings positional', () => {
    expect(parseKwarg('timeout=5')).toEqual(['timeout', '5'])
    expect(parseKwarg('a.b-c=x=y')).toEqual(['a.b-c', 'x=y'])
    expect(parseKwarg('echo a=b')).toBeUndefined()
    expect(parseKwarg('x==y')).toBeUndefined()
    expect(parseKwarg('1a=b')).toBeUndefined()
    expect(parseKwarg('=b')).toBeUndefined()
  })
})

describe('yamlifyArg (Salt CLI typing)', () => {
  it.each([
    ['5', 5],
    ['-3', -3],
    ['3.5', 3.5],
    ['0x1f', 31],
    ['true', true],
    ['False', false],
    ['yes', true],
    ['off', false],
    ['null', null],
    ['~', null],
    ['None', null],
    ['hello', 'hello'],
    ['1e5', '1e5'],
    ['1_000', '1_000'],
    ['"quoted 5"', 'quoted 5'],
    ["'it''s'", "it's"],
    ['[1, two, "3"]', [1, 'two', '3']],
    ['{a: 1, b: "hello", c: [x, y]}', { a: 1, b: 'hello', c: ['x', 'y'] }],
    ['{"json": true}', { json: true }],
    ['a: b', 'a: b'],
    ['- a', '- a'],
    ['#', '#'],
    ['foo # bar', 'foo # bar'],
    ['5 # five', 5],
    ['', ''],
    ['  ', '  '],
    ['http://example.com:80/x', 'http://example.com:80/x'],
    ['[unclosed', '[unclosed'],
  ])('%j → %j', (input, expected) => {
    expect(yamlifyArg(input)).toEqual(expected)
  })

  it('leaves non-strings alone', () => {
    const value = { a: 1 }
    expect(yamlifyArg(value)).toBe(value)
    expect(yamlifyArg(7)).toBe(7)
  })
})

describe('parseInput', () => {
  it('types key=value strings, unpacks __kwarg__ dicts and keeps other args positional', () => {
    expect(parseInput(['a', 'timeout=5', { __kwarg__: true, x: 'raw=1' }, { plain: 1 }, 3])).toEqual({
      args: ['a', { plain: 1 }, 3],
      kwargs: { timeout: 5, x: 'raw=1' },
    })
  })
})

describe('loadArgsAndKwargs', () => {
  const echo = { args: ['text'] as const, kwargs: false }
  it('rejects keyword arguments the function cannot take, in Salt words', () => {
    expect(() => loadArgsAndKwargs(echo, ['foo=bar', 'flag=true'])).toThrowError(
      new InvocationError('The following keyword arguments are not valid: foo=bar, flag=True'),
    )
  })
  it("types key=value strings with Salt's loader but leaves positional strings as sent, as Salt's minion does", () => {
    // What a Node API caller (or Salt's Python LocalClient.cmd) sends arrives untyped; the CLI typed its words already.
    expect(loadArgsAndKwargs({ args: [], kwargs: true }, ['0755', 'mode=0755', 'when=2024-01-31', 'big=1e5'])).toEqual({
      args: ['0755'],
      kwargs: { mode: 755, when: '2024-01-31', big: '1e5' },
    })
  })
  it('accepts a keyword naming a positional parameter', () => {
    expect(loadArgsAndKwargs(echo, ['text=hi'])).toEqual({ args: [], kwargs: { text: 'hi' } })
  })
  it('packs publish data as __pub_ keys for **kwargs functions only', () => {
    expect(loadArgsAndKwargs({ args: [], kwargs: true }, ['a'], { jid: '1', fun: 'x' })).toEqual({
      args: ['a'],
      kwargs: { __pub_jid: '1', __pub_fun: 'x' },
    })
    expect(loadArgsAndKwargs(echo, ['a'], { jid: '1' }).kwargs).toEqual({})
  })
})

describe('bindArguments (Python call rules)', () => {
  const fn = { name: 'test.thing', args: ['a', 'b', 'c'], defaults: { c: 3 } }
  it('fills declared parameters from positionals, keywords and defaults', () => {
    expect(bindArguments(fn, [1], { b: 2 })).toEqual({ args: [1, 2, 3], kwargs: {} })
  })
  it('raises TypeError-style messages', () => {
    expect(() => bindArguments(fn, [1], {})).toThrowError(new ArgumentError('test.thing', "thing() missing 1 required positional argument: 'b'"))
    expect(() => bindArguments(fn, [], {})).toThrowError("thing() missing 2 required positional arguments: 'a' and 'b'")
    expect(() => bindArguments(fn, [1, 2, 3, 4], {})).toThrowError('thing() takes 3 positional arguments but 4 were given')
    expect(() => bindArguments(fn, [1, 2], { a: 9 })).toThrowError("thing() got multiple values for argument 'a'")
    expect(() => bindArguments(fn, [1, 2], { z: 9 })).toThrowError("thing() got an unexpected keyword argument 'z'")
  })
  it('passes extras through *args and **kwargs', () => {
    expect(bindArguments({ name: 'm.f', args: ['a'], varargs: true, kwargs: true }, [1, 2, 3], { k: 1 })).toEqual({
      args: [1, 2, 3],
      kwargs: { k: 1 },
    })
  })
})

describe('fnmatch and traverseDictAndList', () => {
  it('matches globs like Python fnmatch', () => {
    expect(fnmatch('sys.list_functions', 'sys.list_*')).toBe(true)
    expect(fnmatch('sysctl.get', 'sys.*')).toBe(false)
    expect(fnmatch('test.ping', 'test.p?ng')).toBe(true)
    expect(fnmatch('test.ping', 'test.[!p]ing')).toBe(false)
  })
  it('walks nested dicts and lists', () => {
    const data = { a: { b: [10, { c: 'deep' }] } }
    expect(traverseDictAndList(data, 'a:b:0', 'dflt')).toBe(10)
    expect(traverseDictAndList(data, 'a:b:c', 'dflt')).toBe('deep')
    expect(traverseDictAndList(data, 'a|b|1|c', 'dflt', '|')).toBe('deep')
    expect(traverseDictAndList(data, 'a:x', 'dflt')).toBe('dflt')
  })
})
