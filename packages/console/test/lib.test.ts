import { describe, expect, it } from 'vitest'
import { parseArgs, splitWords, typeArg } from '../app/lib/args.js'
import { brineCommand, shellQuote } from '../app/lib/command.js'
import { globToRegExp, minionMatches, parseMinionFilter } from '../app/lib/glob.js'
import { JobRows } from '../app/lib/job-rows.js'
import { renderNested } from '../app/lib/nested.js'
import { lastJobs, targetNames } from '../app/lib/targets.js'
import { consoleAssets } from '@brine/console'

describe('renderNested (Salt nested outputter layout)', () => {
  it('lays out a minion return: mappings indented four, lists as dashes, dicts in lists as |_, booleans as Python spells them', () => {
    const text = renderNested({ web1: { os: 'Debian', ipv4: ['10.0.0.1', '127.0.0.1'], ok: true, none: null, users: [{ name: 'root' }] } })
    expect(text).toBe(
      [
        'web1:',
        '    os:',
        '        Debian',
        '    ipv4:',
        '        - 10.0.0.1',
        '        - 127.0.0.1',
        '    ok:',
        '        True',
        '    none:',
        '        None',
        '    users:',
        '        |_',
        '          name:',
        '              root',
      ].join('\n'),
    )
  })
  it('puts a multi-line string under its key, one line each', () => {
    expect(renderNested({ out: 'a\nb' })).toBe('out:\n    a\n    b')
    expect(renderNested(false)).toBe('False')
  })
})

describe('parseArgs (the command line words)', () => {
  it('splits on blanks, keeps quoted blanks, and types values as yamlify_arg does for the simple cases', () => {
    expect(splitWords(`'ls -l' /tmp "" x`)).toEqual(['ls -l', '/tmp', '', 'x'])
    expect(parseArgs(`'echo hi' cwd=/tmp runas=nobody timeout=5 python_shell=False 1.5 None`)).toEqual({
      arg: ['echo hi', 1.5, null],
      kwarg: { cwd: '/tmp', runas: 'nobody', timeout: 5, python_shell: false },
    })
    expect(typeArg('007x')).toBe('007x')
    expect(typeArg('99999999999999999999')).toBe('99999999999999999999')
  })
})

describe('brineCommand (copy as brine command)', () => {
  it('uses the CLI flag of the target type, quotes what a shell would split, and carries batch and async', () => {
    expect(brineCommand({ tgt: '*', tgtType: 'glob', fun: 'test.ping', args: '', async: false, batch: '' }, splitWords)).toBe("brine '*' test.ping")
    expect(
      brineCommand({ tgt: 'G@os:Debian and web*', tgtType: 'compound', fun: 'cmd.run', args: `'uname -a' cwd=/tmp`, async: true, batch: '25%' }, splitWords),
    ).toBe("brine -C -b 25% --async 'G@os:Debian and web*' cmd.run 'uname -a' cwd=/tmp")
    expect(brineCommand({ tgt: 'web1,web2', tgtType: 'list', fun: 'test.echo', args: `"it's"`, async: false, batch: '' }, splitWords)).toBe(
      `brine -L web1,web2 test.echo 'it'\\''s'`,
    )
    expect(shellQuote('')).toBe("''")
  })
})

describe('minion filter (id glob or grain:glob)', () => {
  it('matches ids by glob or substring, and grains by key:glob, lists by any item, nested keys by a:b', () => {
    expect(globToRegExp('web[12]*').test('web1.example')).toBe(true)
    expect(globToRegExp('web[!12]').test('web1')).toBe(false)
    expect(globToRegExp('a.b').test('axb')).toBe(false)
    expect(minionMatches(parseMinionFilter('eb'), 'web1', {})).toBe(true)
    expect(minionMatches(parseMinionFilter('db*'), 'web1', {})).toBe(false)
    expect(minionMatches(parseMinionFilter('os:Deb*'), 'x', { os: 'Debian' })).toBe(true)
    expect(minionMatches(parseMinionFilter('roles:db'), 'x', { roles: ['web', 'db'] })).toBe(true)
    expect(minionMatches(parseMinionFilter('locale_info:timezone:UTC'), 'x', { locale_info: { timezone: 'UTC' } })).toBe(true)
    expect(minionMatches(parseMinionFilter('os:Red*'), 'x', { os: 'Debian' })).toBe(false)
    expect(minionMatches(parseMinionFilter('  '), 'x', {})).toBe(true)
  })
})

describe('JobRows (one row per expected minion)', () => {
  it('moves rows from waiting to returned, failed (retcode or success false) and did not return, counting each state', () => {
    const rows = new JobRows(['c', 'a', 'b', 'd'])
    expect(rows.counts).toEqual({ waiting: 4, returned: 0, failed: 0, 'did not return': 0 })
    rows.applyReturn({ id: 'a', return: true, retcode: 0 })
    rows.applyReturn({ id: 'b', return: 'boom', retcode: 1 })
    rows.applyReturn({ id: 'c', return: 'no', success: false })
    expect(rows.done).toBe(false)
    rows.expire()
    expect(rows.done).toBe(true)
    expect(rows.counts).toEqual({ waiting: 0, returned: 1, failed: 2, 'did not return': 1 })
    expect(rows.stateOf('nobody')).toBeUndefined()
    expect(rows.page(0, 10).map((row) => [row.id, row.state])).toEqual([
      ['a', 'returned'],
      ['b', 'failed'],
      ['c', 'failed'],
      ['d', 'did not return'],
    ])
    expect(rows.stateOf('d')).toBe('did not return')
    rows.applyReturn({ id: 'd', return: true }, 'cache')
    expect(rows.page(3, 1)[0]).toMatchObject({ id: 'd', state: 'returned', via: 'cache' })
    expect(rows.page(0, 1)[0]!.via).toBe('event')
    rows.applyReturn({ id: 'syndic-minion', return: true })
    expect(rows.size).toBe(5)
    expect(rows.page(4, 10)).toHaveLength(1)
  })
  it('pages 1,000 rows without rendering them all', () => {
    const rows = new JobRows(Array.from({ length: 1000 }, (_, index) => `m${String(index).padStart(4, '0')}`))
    for (let index = 0; index < 1000; index += 2) rows.applyReturn({ id: `m${String(index).padStart(4, '0')}`, return: true })
    expect(rows.counts.returned).toBe(500)
    expect(rows.page(200, 200).map((row) => row.id)[0]).toBe('m0200')
  })
})

describe('last job per minion (jobs.list_jobs targets)', () => {
  it('counts glob and list targets, newest jid first, and leaves other target types alone', () => {
    expect(targetNames({ Target: 'web*', 'Target-type': 'glob' }, 'web1')).toBe(true)
    expect(targetNames({ Target: ['db1', 'web2'], 'Target-type': 'list' }, 'web2')).toBe(true)
    expect(targetNames({ Target: 'db1,web2', 'Target-type': 'list' }, 'web1')).toBe(false)
    expect(targetNames({ Target: 'G@role:web', 'Target-type': 'compound' }, 'web1')).toBe(false)
    const jobs = {
      '20261126100000000001': { Target: '*', 'Target-type': 'glob' },
      '20261126100000000003': { Target: ['db1'], 'Target-type': 'list' },
      '20261126100000000002': { Target: 'web*', 'Target-type': 'glob' },
    }
    expect(Object.fromEntries(lastJobs(jobs, ['web1', 'db1', 'mail1']))).toEqual({
      db1: '20261126100000000003',
      web1: '20261126100000000002',
      mail1: '20261126100000000001',
    })
    expect(lastJobs(jobs, ['mail1'], 2).size).toBe(0)
  })
})

describe('consoleAssets', () => {
  it('finds the built console (index.html and hashed assets) when the package is built, or says undefined', () => {
    const assets = consoleAssets()
    if (assets === undefined) throw new Error('@brine/console is not built: run npx lerna run build --scope @brine/console')
    expect(assets.index.endsWith('dist/app/index.html')).toBe(true)
    expect(assets.hashedDir.endsWith('dist/app/assets')).toBe(true)
  })
})
