import { describe, expect, it } from 'vitest'
import { conditionInput, loadSaltYaml, parseInput, parseKwarg, resolveSaltScalar, splitInput, yamlifyArg, YamlLoadError } from '../src/index.js'

// Expected values come from PyYAML 6.0 (CSafeLoader) with Salt 3006's loader changes and yamlify_arg,
// run once to build this table: what `salt '*' test.arg <word>` delivers to the minion.
const YAMLIFY: Array<[word: string, delivered: unknown]> = [
  ['1', 1],
  ['2.5', 2.5],
  ['True', true],
  ['None', null],
  ['[1,2]', [1, 2]],
  ['{a: 1}', { a: 1 }],
  // Salt's loader strips the leading zeros of an unsigned integer: decimal, not YAML 1.1's octal.
  ['0755', 755],
  ['00', 0],
  ['07', 7],
  ['-0755', -493],
  ['+0755', 493],
  // Neither octal nor decimal in YAML 1.1, so text.
  ['08', '08'],
  ['0789', '0789'],
  ['0o17', '0o17'],
  // Digits and underscores stay text (yamlify_arg's own guard); inside YAML they are still numbers.
  ['0_755', '0_755'],
  ['1_000', '1_000'],
  ['1_000.5', 1000.5],
  ['0b101', 5],
  ['0x1F', 31],
  // YAML 1.1 base 60.
  ['1:30', 90],
  ['-1:30', -90],
  ['190:20:30', 685230],
  ['01:30', '01:30'],
  ['1:30.5', 90.5],
  // PyYAML's float needs a dot, and a signed exponent.
  ['1e5', '1e5'],
  ['1.0e5', '1.0e5'],
  ['1.0e+5', 100000],
  ['6.02e+23', 6.02e23],
  ['.5', 0.5],
  ['-.5', '-.5'],
  ['1.', 1],
  ['.inf', Number.POSITIVE_INFINITY],
  ['-.inf', Number.NEGATIVE_INFINITY],
  // YAML 1.1 booleans, but PyYAML leaves y/n alone.
  ['yes', true],
  ['off', false],
  ['NO', false],
  ['y', 'y'],
  ['N', 'N'],
  ['null', null],
  ['~', null],
  ['none', 'none'],
  // Salt 3006 keeps timestamps as text.
  ['2024-01-31', '2024-01-31'],
  ['2001-12-14t21:59:43.10-05:00', '2001-12-14t21:59:43.10-05:00'],
  ["'quoted'", 'quoted'],
  ["'it''s'", "it's"],
  ['[1, two, "3"]', [1, 'two', '3']],
  ['{a: 1, b: hello, c: [x, y]}', { a: 1, b: 'hello', c: ['x', 'y'] }],
  ['{"json": true}', { json: true }],
  ['{a:1}', { 'a:1': null }],
  ['{a: }', { a: null }],
  // Collections must be written in flow style; a block collection stays text.
  ['a: b', 'a: b'],
  ['- a', '- a'],
  ['key: [1]', 'key: [1]'],
  // `#`: the text unless it loads as something other than a string.
  ['#', '#'],
  ['foo # bar', 'foo # bar'],
  ['5 # five', 5],
  ['[1] # c', [1]],
  ['a#b', 'a#b'],
  // What the loader refuses stays as typed.
  ['[unclosed', '[unclosed'],
  ['{a: 1, a: 2}', '{a: 1, a: 2}'],
  ['{[1]: 2}', '{[1]: 2}'],
  ['{null: 1, true: 2, 1: 3}', '{null: 1, true: 2, 1: 3}'],
  ['!foo bar', '!foo bar'],
  ['!!set {a, b}', '!!set {a, b}'],
  ['!!binary aGVsbG8=', '!!binary aGVsbG8='],
  ['@foo', '@foo'],
  ['*a', '*a'],
  ['&x [1, *x]', '&x [1, *x]'],
  ['!', '!'],
  ['|', '|'],
  ['---', '---'],
  ['...', '...'],
  ['', ''],
  ['  ', '  '],
  // Explicit tags construct what they are given, as PyYAML does.
  ['!!str 5', '5'],
  ['!!int 0755', 755],
  ['!!float 1', 1],
  ['!!int abc', '!!int abc'],
  ['!!timestamp 2024-01-01', '2024-01-01'],
  ['!!python/unicode hi', 'hi'],
  ['&a 5', 5],
  ['[&a 1, *a]', [1, 1]],
  ['{<<: {a: 1, b: 2}, b: 3}', { a: 1, b: 3 }],
  ['{a: 1, <<: {a: 2}}', { a: 1 }],
  ['{<<: 5}', '{<<: 5}'],
  ['{a: {b: {c: d}}}', { a: { b: { c: 'd' } } }],
  ['http://example.com:80/x', 'http://example.com:80/x'],
  ['hello world', 'hello world'],
  ['café', 'café'],
  ['"\\u00e9"', 'é'],
]

describe('yamlifyArg: Salt 3006 typing of a command-line word', () => {
  it.each(YAMLIFY)('%j → %j', (word, delivered) => {
    expect(yamlifyArg(word)).toEqual(delivered)
  })

  it('keeps words with a tab or line break, and integers a JavaScript number cannot hold, as text', () => {
    expect(yamlifyArg('a\tb')).toBe('a\tb')
    expect(yamlifyArg('[1,\n2]')).toBe('[1,\n2]')
    expect(yamlifyArg('12345678901234567890')).toBe('12345678901234567890')
    expect(yamlifyArg('[9007199254740993]')).toEqual(['9007199254740993'])
    expect(yamlifyArg('9007199254740991')).toBe(9007199254740991)
  })

  it('leaves values that are not strings alone', () => {
    const value = { a: 1 }
    expect(yamlifyArg(value)).toBe(value)
    expect(yamlifyArg(7)).toBe(7)
  })
})

describe('parseInput: the argument list `brine` publishes', () => {
  it("types positional words and key=value values, and packs keyword arguments in Salt's __kwarg__ dict", () => {
    expect(parseInput(['1', '2.5', 'True', 'None', '[1,2]', '{a: 1}', '0755', 'mode=0755'])).toEqual([
      1,
      2.5,
      true,
      null,
      [1, 2],
      { a: 1 },
      755,
      { __kwarg__: true, mode: 755 },
    ])
  })

  it('keeps --no-parse keyword values as text, merges __kwarg__ dicts and keeps other values', () => {
    expect(parseInput(['mode=0755', 'size=10', { __kwarg__: true, x: 'raw=1' }, { plain: 1 }, 3], { noParse: ['mode'] })).toEqual([
      { plain: 1 },
      3,
      { __kwarg__: true, mode: '0755', size: 10, x: 'raw=1' },
    ])
    expect(splitInput(['a=b=c', 'x==y', 'echo a=b'])).toEqual({ args: ['x==y', 'echo a=b'], kwargs: { a: 'b=c' } })
    expect(conditionInput(['a'], {})).toEqual(['a'])
  })

  it("splits name=value as Salt's KWARG_REGEX does, leaving multi-line values positional", () => {
    expect(parseKwarg('timeout=5')).toEqual(['timeout', '5'])
    expect(parseKwarg('a.b-c=x=y')).toEqual(['a.b-c', 'x=y'])
    expect(parseKwarg('1a=b')).toBeUndefined()
    expect(parseKwarg('x==y')).toBeUndefined()
    expect(parseKwarg('a=b\nc')).toBeUndefined()
    expect(parseKwarg('a=b\n')).toEqual(['a', 'b'])
  })
})

describe('loadSaltYaml', () => {
  it('loads documents with Salt 3006 rules and says what it refused', () => {
    expect(loadSaltYaml('mode: 0644\nwhen: 2024-01-31\nflags: [on, y]\nratio: 1e3\n')).toEqual({
      mode: 644,
      when: '2024-01-31',
      flags: [true, 'y'],
      ratio: '1e3',
    })
    expect(loadSaltYaml('~')).toBeNull()
    expect(() => loadSaltYaml('a: 1\na: 2\n')).toThrowError(YamlLoadError)
    expect(() => loadSaltYaml('{true: 1, 1: 2}')).toThrowError("found conflicting ID '1'")
    const bomb = `a: &a [x, x, x, x, x, x, x, x, x, x]\n${Array.from({ length: 8 }, (_, i) => `${'b'.repeat(i + 1)}: &${'b'.repeat(i + 1)} [${Array.from({ length: 10 }, () => (i === 0 ? '*a' : `*${'b'.repeat(i)}`)).join(', ')}]`).join('\n')}\n`
    expect(() => loadSaltYaml(bomb)).toThrowError(/alias/i)
  })

  it('types one plain scalar as the resolvers do', () => {
    expect(resolveSaltScalar('0755')).toBe(755)
    expect(resolveSaltScalar('on')).toBe(true)
    expect(resolveSaltScalar('1e5')).toBe('1e5')
    expect(resolveSaltScalar('')).toBeNull()
    expect(resolveSaltScalar('web')).toBe('web')
  })
})
