import { describe, expect, it } from 'vitest'
import { TargetError } from '../src/errors.js'
import { compileTarget, expectedMinions, resolveNodegroups, TARGET_LIMITS } from '../src/index.js'
import type { MinionInfo, Nodegroups } from '../src/index.js'
import type { Target } from '@brine/protocol'

const nodegroups: Nodegroups = {
  // Salt's compound string form.
  webs: 'web*',
  debian: 'G@os:Debian and not L@web2',
  // A string of plain names is a list target (salt.utils.minions.nodegroup_comp).
  pair: 'web1 db1',
  // Salt's list form: each item one word, operators and parentheses items of their own.
  listed: ['(', 'web*', 'or', 'db*', ')', 'and', 'not', 'L@web2'],
  names: ['db1', 'db2', 101],
  // Beyond Salt: target expressions without operators match any of them.
  either: ['web1', 'G@os:CentOS'],
  nested: 'N@webs or N@names',
  deep: ['N@nested', 'and', 'not', 'N@pair'],
  loop: 'N@loop2 and web*',
  loop2: ['db*', 'or', 'N@loop3'],
  loop3: 'N@loop',
  self: 'N@self',
  empty: '',
  weird: { a: 1 },
}

const known: MinionInfo[] = [
  { id: 'web1', grains: { os: 'Debian' } },
  { id: 'web2', grains: { os: 'Debian' } },
  { id: 'db1', grains: { os: 'CentOS' } },
  { id: 'db2', grains: { os: 'Debian' } },
  { id: '101', grains: { os: 'Arch' } },
  { id: 'mail1', grains: { os: 'Debian' } },
]

describe('resolveNodegroups: what the master publishes', () => {
  it.each<[Target, string]>([
    [{ tgt: 'webs', tgt_type: 'nodegroup' }, '( web* )'],
    [{ tgt: 'debian', tgt_type: 'nodegroup' }, '( G@os:Debian and not L@web2 )'],
    [{ tgt: 'pair', tgt_type: 'nodegroup' }, '( L@web1,db1 )'],
    [{ tgt: 'listed', tgt_type: 'nodegroup' }, '( ( web* or db* ) and not L@web2 )'],
    [{ tgt: 'names', tgt_type: 'nodegroup' }, '( L@db1,db2,101 )'],
    [{ tgt: 'either', tgt_type: 'nodegroup' }, '( web1 or G@os:CentOS )'],
    [{ tgt: 'nested', tgt_type: 'nodegroup' }, '( ( web* ) or ( L@db1,db2,101 ) )'],
    [{ tgt: 'deep', tgt_type: 'nodegroup' }, '( ( ( web* ) or ( L@db1,db2,101 ) ) and not ( L@web1,db1 ) )'],
    [{ tgt: 'N@webs and G@os:Debian', tgt_type: 'compound' }, '( web* ) and G@os:Debian'],
    [{ tgt: 'not (N@pair or N@names)', tgt_type: 'compound' }, 'not ( ( L@web1,db1 ) or ( L@db1,db2,101 ) )'],
  ])('%j → %j', (target, tgt) => {
    expect(resolveNodegroups(target, nodegroups)).toEqual({ tgt, tgt_type: 'compound' })
  })

  it('returns every other target unchanged (the same object)', () => {
    for (const target of [
      { tgt: 'web*', tgt_type: 'glob' },
      { tgt: 'web* and G@os:Debian', tgt_type: 'compound' },
      { tgt: ['web1'], tgt_type: 'list' },
      { tgt: 'N@webs' },
    ] as Target[]) {
      expect(resolveNodegroups(target, nodegroups)).toBe(target)
    }
  })

  it('matches exactly the minions the in-place expansion matches, with no nodegroups left to know', async () => {
    for (const name of ['webs', 'debian', 'pair', 'listed', 'names', 'either', 'nested', 'deep']) {
      const target: Target = { tgt: name, tgt_type: 'nodegroup' }
      const resolved = resolveNodegroups(target, nodegroups)
      expect(await expectedMinions(resolved, known, {})).toEqual(await expectedMinions(target, known, nodegroups))
    }
    expect(await expectedMinions(resolveNodegroups({ tgt: 'listed', tgt_type: 'nodegroup' }, nodegroups), known)).toEqual(['web1', 'db1', 'db2'])
  })

  it.each([
    [{ tgt: 'nope', tgt_type: 'nodegroup' }, "invalid nodegroup target 'nope': unknown nodegroup 'nope' (known: webs, debian,"],
    [{ tgt: 'N@nope or web*', tgt_type: 'compound' }, "invalid compound target 'N@nope or web*': unknown nodegroup 'nope'"],
    [{ tgt: 'loop', tgt_type: 'nodegroup' }, "invalid nodegroup target 'loop': nodegroup 'loop' includes itself (loop → loop2 → loop3 → loop)"],
    [{ tgt: 'web* or N@loop2', tgt_type: 'compound' }, "nodegroup 'loop2' includes itself (loop2 → loop3 → loop → loop2)"],
    [{ tgt: 'self', tgt_type: 'nodegroup' }, "nodegroup 'self' includes itself (self → self)"],
    [{ tgt: 'empty', tgt_type: 'nodegroup' }, "nodegroup 'empty' is empty"],
    [{ tgt: 'weird', tgt_type: 'nodegroup' }, "nodegroup 'weird' must be a compound string or a list of targets"],
    [{ tgt: ['webs'], tgt_type: 'nodegroup' }, 'a nodegroup target is the name of one nodegroup'],
  ])('%j is refused', (target, message) => {
    const attempt = (): unknown => resolveNodegroups(target as Target, nodegroups)
    expect(attempt).toThrow(TargetError)
    expect(attempt).toThrow(message)
  })

  it('bounds an expansion that nesting would make exponential', () => {
    // g0 uses g1 twice, g1 uses g2 twice, …: 2^30 words if nothing stopped it.
    const doubling: Nodegroups = { g30: 'web1' }
    for (let level = 0; level < 30; level++) doubling[`g${level}`] = `N@g${level + 1} or N@g${level + 1}`
    expect(() => resolveNodegroups({ tgt: 'g0', tgt_type: 'nodegroup' }, doubling)).toThrow(
      `with its nodegroups expanded it has more than ${TARGET_LIMITS.words} words`,
    )
    expect(() => compileTarget({ tgt: 'N@g0', tgt_type: 'compound' }, doubling)).toThrow(TargetError)
  })

  it('bounds the length of the expression it publishes', () => {
    const long: Nodegroups = {
      big: Array.from({ length: 3000 }, (_, index) => `G@role:web-server-${index}`).flatMap((word, index) => (index === 0 ? [word] : ['or', word])),
    }
    expect(() => resolveNodegroups({ tgt: 'big', tgt_type: 'nodegroup' }, long)).toThrow(
      /with its nodegroups expanded it is \d+ characters long; the limit is 65536/,
    )
  })
})

describe("nodegroups as Salt 3006's nodegroup_comp expands them", () => {
  // salt/utils/minions.py nodegroup_comp and _nodegroup_regex, with the cases of Salt's own
  // test_nodegroup_comp (group1…group7) and the regex-character groups _nodegroup_regex handles.
  const saltGroups: Nodegroups = {
    group1: 'L@host1,host2,host3',
    group2: ['G@foo:bar', 'or', 'web1*'],
    group3: ['N@group1', 'or', 'N@group2'],
    group4: ['host4', 'host5', 'host6'],
    group5: 'N@group4',
    group6: 'N@group3',
    group7: ['host1'],
    bracket: 'db[12]',
    optional: ['web?'],
    dotted: 'a.b',
    mixed: ['db[12]', 'a.b'],
    starred: 'web*',
    nestedRegex: 'N@bracket or N@dotted',
  }
  // Salt's return, and what Brine publishes: the same words, each group in parentheses of its own where
  // Salt leaves a top-level group's own words bare (a single word's parentheses change nothing).
  const cases: [string, string[], string][] = [
    ['group1', ['L@host1,host2,host3'], '( L@host1,host2,host3 )'],
    ['group2', ['G@foo:bar', 'or', 'web1*'], '( G@foo:bar or web1* )'],
    [
      'group3',
      ['(', '(', 'L@host1,host2,host3', ')', 'or', '(', 'G@foo:bar', 'or', 'web1*', ')', ')'],
      '( ( L@host1,host2,host3 ) or ( G@foo:bar or web1* ) )',
    ],
    ['group4', ['L@host4,host5,host6'], '( L@host4,host5,host6 )'],
    ['group5', ['(', 'L@host4,host5,host6', ')'], '( ( L@host4,host5,host6 ) )'],
    [
      'group6',
      ['(', '(', '(', 'L@host1,host2,host3', ')', 'or', '(', 'G@foo:bar', 'or', 'web1*', ')', ')', ')'],
      '( ( ( L@host1,host2,host3 ) or ( G@foo:bar or web1* ) ) )',
    ],
    ['group7', ['L@host1'], '( L@host1 )'],
    ['bracket', ['E@db[12]'], '( E@db[12] )'],
    ['optional', ['E@web?'], '( E@web? )'],
    ['dotted', ['L@a.b'], '( L@a.b )'],
    ['mixed', ['E@db[12],a.b'], '( E@db[12],a.b )'],
    ['starred', ['web*'], '( web* )'],
    ['nestedRegex', ['(', 'E@db[12]', 'or', 'L@a.b', ')'], '( ( E@db[12] ) or ( L@a.b ) )'],
  ]
  const fleet: MinionInfo[] = ['host1', 'host2', 'host4', 'host7', 'web1', 'web12', 'we', 'wex', 'db1', 'db2', 'db10', 'db3', 'a.b', 'axb', 'db1,a.b'].map(
    (id) => ({ id, grains: { foo: id === 'host7' ? 'bar' : 'baz' } }),
  )

  it.each(cases)('%s: Salt %j, Brine publishes %j and both select the same minions', async (name, salt, published) => {
    const resolved = resolveNodegroups({ tgt: name, tgt_type: 'nodegroup' }, saltGroups)
    expect(resolved).toEqual({ tgt: published, tgt_type: 'compound' })
    const bySalt = await expectedMinions({ tgt: salt.join(' '), tgt_type: 'compound' }, fleet, {})
    expect(await expectedMinions(resolved, fleet, {})).toEqual(bySalt)
  })

  it.each<[string, string[]]>([
    // E@ is Python's re.match: anchored at the start only, so db10 is in and web? takes "we" and "wex" too.
    ['bracket', ['db1', 'db2', 'db10', 'db1,a.b']],
    ['optional', ['web1', 'web12', 'we', 'wex']],
    // No regex character: a list, so '.' is a dot and axb is out.
    ['dotted', ['a.b']],
    // Several bare words with one regex character among them: one regex with the comma in it, as in Salt.
    ['mixed', ['db1,a.b']],
    ['nestedRegex', ['db1', 'db2', 'db10', 'a.b', 'db1,a.b']],
    ['group3', ['host1', 'host2', 'host7', 'web1', 'web12']],
    ['group5', ['host4']],
  ])('%s selects %j', async (name, ids) => {
    const selected = await expectedMinions({ tgt: name, tgt_type: 'nodegroup' }, fleet, saltGroups)
    expect([...selected].sort()).toEqual([...ids].sort())
  })
})
