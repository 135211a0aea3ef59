import { describe, expect, it } from 'vitest'
import { jsonOutput, keyOutput, nestedOutput, outputSettings, pythonFloatRepr, rawOutput, renderOutput, txtOutput, yamlOutput } from '../src/output/index.js'

const grains = {
  web1: {
    os: 'Debian',
    num_cpus: 4,
    ipv4: ['10.0.0.5', '127.0.0.1'],
    virtual: null,
    selinux: { enabled: false },
    mounts: [{ path: '/', fs: 'ext4' }],
    empty: {},
  },
}

describe('nested outputter', () => {
  it("prints Salt's layout: sorted keys, 4-space indents, ---------- before dicts, - for list items", () => {
    expect(nestedOutput(grains)).toBe(
      [
        'web1:',
        '    ----------',
        '    empty:',
        '        ----------',
        '    ipv4:',
        '        - 10.0.0.5',
        '        - 127.0.0.1',
        '    mounts:',
        '        |_',
        '          ----------',
        '          fs:',
        '              ext4',
        '          path:',
        '              /',
        '    num_cpus:',
        '        4',
        '    os:',
        '        Debian',
        '    selinux:',
        '        ----------',
        '        enabled:',
        '            False',
        '    virtual:',
        '        None',
      ].join('\n'),
    )
  })

  it('prints True, multi-line strings line by line, and nothing for an empty string', () => {
    expect(nestedOutput({ web1: true })).toBe('web1:\n    True')
    expect(nestedOutput({ db1: 'Linux\nx86_64\n' })).toBe('db1:\n    Linux\n    x86_64')
    expect(nestedOutput({ db1: '' })).toBe('db1:')
    expect(nestedOutput({ a: ['one\ntwo'] })).toBe('a:\n    - one\n      two')
  })

  it("colours only when asked, with Salt's codes (each starts with a reset, as Salt's TextFormat)", () => {
    expect(nestedOutput({ web1: true }, { color: true })).toBe('\x1b[0;36mweb1\x1b[0;0m:\n    \x1b[0;1;33mTrue\x1b[0;0m')
    expect(nestedOutput({ web1: ['a'] }, { color: true, retcode: 1 })).toBe('\x1b[0;31mweb1\x1b[0;0m:\n    \x1b[0;32m- a\x1b[0;0m')
    expect(nestedOutput({ web1: true }, { color: false })).not.toMatch(/\x1b/)
  })

  it('turns an escape character a minion printed into ? (strip_colors), unless strip_colors is false', () => {
    expect(nestedOutput({ web1: '\x1b[31mred\x1b[0m' })).toBe('web1:\n    ?[31mred?[0m')
    expect(nestedOutput({ web1: '\x1b[31mred' }, { stripColors: false })).toBe('web1:\n    \x1b[31mred')
  })

  it('prints floats as Python does and bytes that decode as text', () => {
    expect(nestedOutput({ a: 1e-5, b: 0.1, c: 2.5e-7, d: new TextEncoder().encode('hi') })).toBe('a:\n    1e-05\nb:\n    0.1\nc:\n    2.5e-07\nd:\n    hi')
    expect([1e-5, 1.5e-7, 0.0001, 123456789.125, 1234567890123456.5, -2.5, Number.NaN].map(pythonFloatRepr)).toEqual([
      '1e-05',
      '1.5e-07',
      '0.0001',
      '123456789.125',
      '1234567890123456.5',
      '-2.5',
      'nan',
    ])
  })
})

describe('json outputter', () => {
  it('indents 4 by default, as Salt', () => {
    expect(jsonOutput({ web1: { ok: true, list: [1, 'a'] } })).toBe(
      '{\n    "web1": {\n        "ok": true,\n        "list": [\n            1,\n            "a"\n        ]\n    }\n}',
    )
  })

  it("sorts keys for output_indent: pretty, prints one line for null, and writes Python's NaN, Infinity and float text", () => {
    expect(jsonOutput({ web1: { b: 1, a: 2 } }, { indent: 'pretty' })).toBe('{\n    "web1": {\n        "a": 2,\n        "b": 1\n    }\n}')
    expect(jsonOutput({ web1: { b: 1, a: 2 } }, { indent: null })).toBe('{"web1": {"b": 1, "a": 2}}')
    expect(jsonOutput({ a: Number.NaN, b: Number.POSITIVE_INFINITY, c: Number.NEGATIVE_INFINITY, d: 1e-5, e: new TextEncoder().encode('hi') })).toBe(
      '{\n    "a": NaN,\n    "b": Infinity,\n    "c": -Infinity,\n    "d": 1e-05,\n    "e": "b\'hi\'"\n}',
    )
  })

  it('prints one line for a negative --out-indent and unindented lines for 0', () => {
    expect(jsonOutput({ web1: { a: [1, 2] } }, { indent: -1 })).toBe('{"web1": {"a": [1, 2]}}')
    expect(jsonOutput({ web1: [1] }, { indent: 0 })).toBe('{\n"web1": [\n1\n]\n}')
  })
})

describe('txt, raw and yaml outputters', () => {
  it('txt prints id: value, a line per line, Python-style for non-strings', () => {
    expect(txtOutput({ web1: 'Linux\n5.10' })).toBe('web1: Linux\nweb1: 5.10\n')
    expect(txtOutput({ web1: true, db1: { a: null } })).toBe("web1: True\ndb1: {'a': None}\n")
  })

  it('raw prints the Python repr', () => {
    expect(rawOutput({ web1: { ok: true, it: "it's", n: [1, null] } })).toBe(`{'web1': {'ok': True, 'it': "it's", 'n': [1, None]}}`)
  })

  it('yaml prints block style with lists under their key', () => {
    expect(yamlOutput({ web1: { ipv4: ['10.0.0.5'], ok: true } })).toBe('web1:\n  ipv4:\n  - 10.0.0.5\n  ok: true\n')
  })

  it('yaml quotes what a YAML 1.1 reader would not read back as a string, and prints one flow line for --out-indent -1', () => {
    expect(yamlOutput({ web1: { on: 'yes', n: 'n', when: '2024-01-31', mode: '0755', ok: true } })).toBe(
      "web1:\n  mode: '0755'\n  n: n\n  ok: true\n  'on': 'yes'\n  when: '2024-01-31'\n",
    )
    expect(yamlOutput({ web1: { args: [1, 'a b'], kwargs: {} } }, { indent: -1 })).toBe('{web1: {args: [1, a b], kwargs: {}}}\n')
    expect(yamlOutput({ web1: { blob: new TextEncoder().encode('hello'), nan: Number.NaN, inf: Number.NEGATIVE_INFINITY, f: 2.5 } })).toBe(
      'web1:\n  blob: !!binary |\n    aGVsbG8=\n  f: 2.5\n  inf: -.inf\n  nan: .nan\n',
    )
    expect(yamlOutput({ web1: { blob: new TextEncoder().encode('hello') } }, { indent: -1 })).toBe('{web1: {blob: !!binary "aGVsbG8=\\n"}}\n')
  })

  it('the key outputter prints salt-key listings, and renderOutput falls back to nested for other data', () => {
    const listing = { minions: ['web1', 'db1'], minions_pre: ['new'], minions_rejected: [], minions_denied: [] }
    expect(keyOutput(listing)).toBe('Accepted Keys:\ndb1\nweb1\nDenied Keys:\nUnaccepted Keys:\nnew\nRejected Keys:\n')
    expect(keyOutput({ minions: ['web1'] }, { color: true })).toBe('\x1b[0;1;32mAccepted Keys:\x1b[0;0m\n\x1b[0;32mweb1\x1b[0;0m\n')
    expect(keyOutput({ minions: { web1: 'aa:bb' } })).toBe('Accepted Keys:\nweb1:  aa:bb\n')
    expect(renderOutput('key', { return: 'aa:bb' })).toBe('return:\n    aa:bb\n')
  })

  it('takes --out, --out-indent and colour flags over the config, and colours only a terminal unless forced', () => {
    expect(outputSettings({}, {}, false)).toEqual({ color: false })
    expect(outputSettings({}, {}, true)).toEqual({ color: true })
    expect(outputSettings({ color: false }, {}, true)).toEqual({ color: false })
    expect(outputSettings({ color: false }, { color: true }, false)).toEqual({ color: true })
    expect(outputSettings({ output: 'json', output_indent: 'pretty', strip_colors: false }, {}, false)).toEqual({
      color: false,
      out: 'json',
      indent: 'pretty',
      stripColors: false,
    })
    expect(outputSettings({ output: 'json', output_indent: 'pretty' }, { out: 'yaml', outIndent: -1 }, false)).toEqual({
      color: false,
      out: 'yaml',
      indent: -1,
    })
  })

  it('renderOutput strips trailing whitespace and ends with one newline; quiet prints nothing', () => {
    expect(renderOutput('txt', { web1: 'x' })).toBe('web1: x\n')
    expect(renderOutput('quiet', { web1: 'x' })).toBe('')
    expect(renderOutput('no_return', { ghost: 'Minion did not return. [No response]' })).toBe('ghost:\n    Minion did not return. [No response]\n')
  })
})
