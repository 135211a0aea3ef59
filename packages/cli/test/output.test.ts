import { describe, expect, it } from 'vitest'
import { jsonOutput, nestedOutput, rawOutput, renderOutput, txtOutput, yamlOutput } from '../src/output/index.js'

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

  it('colours only when asked (a TTY)', () => {
    expect(nestedOutput({ web1: true }, { color: true })).toBe('\x1b[0;36mweb1\x1b[0m:\n    \x1b[1;33mTrue\x1b[0m')
    expect(nestedOutput({ web1: true }, { color: false })).not.toMatch(/\x1b/)
  })
})

describe('json outputter', () => {
  it('indents 4 by default, as Salt', () => {
    expect(jsonOutput({ web1: { ok: true, list: [1, 'a'] } })).toBe('{\n    "web1": {\n        "ok": true,\n        "list": [\n            1,\n            "a"\n        ]\n    }\n}')
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

  it('renderOutput strips trailing whitespace and ends with one newline; quiet prints nothing', () => {
    expect(renderOutput('txt', { web1: 'x' })).toBe('web1: x\n')
    expect(renderOutput('quiet', { web1: 'x' })).toBe('')
    expect(renderOutput('no_return', { ghost: 'Minion did not return. [No response]' })).toBe('ghost:\n    Minion did not return. [No response]\n')
  })
})
