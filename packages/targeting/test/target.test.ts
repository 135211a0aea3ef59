import { describe, expect, it } from 'vitest'
import { TargetError } from '../src/errors.js'
import { compileTarget, expectedMinions, globToRegExp, matchMinion } from '../src/index.js'
import type { MinionInfo } from '../src/index.js'
import type { TargetType, Tgt } from '@brine/protocol'

const web1: MinionInfo = {
  id: 'web1',
  grains: {
    os: 'Debian',
    os_family: 'Debian',
    osrelease: '12',
    num_cpus: 4,
    virtual: false,
    roles: ['web', 'cache'],
    ipv4: ['127.0.0.1', '10.0.1.15'],
    ipv6: ['::1', 'fd00::15'],
    locale_info: { defaultlanguage: 'en_US', timezone: 'UTC' },
    disks: [{ name: 'sda', ssd: true }],
    kernelparams: 'ro:quiet',
  },
}
const db1: MinionInfo = {
  id: 'db1',
  grains: { os: 'CentOS', os_family: 'RedHat', roles: ['db'], ipv4: ['10.0.2.20'], num_cpus: 16 },
}
const nograins: MinionInfo = { id: 'web9' }

const nodegroups = {
  webs: 'web*',
  debian: 'G@os:Debian',
  both: 'N@webs or N@dbs',
  dbs: ['db1', 'db2'],
  loop: 'N@loop2',
  loop2: 'N@loop',
}

type Case = [tgt: Tgt, minion: MinionInfo, expected: boolean]

function table(tgtType: TargetType, cases: Case[]): void {
  it.each(cases)(`${tgtType} %j on %o → %s`, async (tgt, minion, expected) => {
    expect(await matchMinion({ tgt, tgt_type: tgtType }, minion, nodegroups)).toBe(expected)
  })
}

describe('glob (fnmatch, whole string, case-sensitive)', () => {
  table('glob', [
    ['*', web1, true],
    ['web*', web1, true],
    ['web*', db1, false],
    ['web?', web1, true],
    ['we?', web1, false],
    ['web[0-9]', web1, true],
    ['web[!1]', web1, false],
    ['web[!2]', web1, true],
    ['Web1', web1, false],
    ['eb1', web1, false],
    ['web1.', web1, false],
    ['[', { id: '[' }, true],
    ['a.b', { id: 'aXb' }, false],
    ['a+b', { id: 'a+b' }, true],
  ])
  it('translates like Python’s fnmatch', () => {
    expect(globToRegExp('a*b?[!c-e][]]').source).toBe('^(?:a.*b.[^c-e][\\]])$')
  })
})

describe('pcre (anchored at the start, like re.match)', () => {
  table('pcre', [
    ['web\\d', web1, true],
    ['web', web1, true],
    ['eb1', web1, false],
    ['(web|db)1$', db1, true],
    ['web\\d\\Z', web1, true],
    ['(?P<kind>web)1', web1, true],
    ['.*1', db1, true],
  ])
})

describe('list', () => {
  table('list', [
    ['web1,db1', web1, true],
    ['web1, db1', db1, true],
    ['web', web1, false],
    [['db1', 'web1'], web1, true],
    [['db1'], web1, false],
  ])
})

describe('grain (case-insensitive glob on str(value))', () => {
  table('grain', [
    ['os:Debian', web1, true],
    ['os:debian', web1, true],
    ['os:Deb*', web1, true],
    ['os:Debian', db1, false],
    ['roles:web', web1, true],
    ['roles:cache', web1, true],
    ['roles:db', web1, false],
    ['num_cpus:4', web1, true],
    ['virtual:False', web1, true],
    ['locale_info:defaultlanguage:en_*', web1, true],
    ['locale_info:timezone', web1, true],
    ['locale_info:*', web1, true],
    ['disks:name:sda', web1, true],
    ['kernelparams:ro:quiet', web1, true],
    ['missing:x', web1, false],
    ['os:Debian', nograins, false],
  ])
})

describe('grain_pcre', () => {
  table('grain_pcre', [
    ['os:(Debian|Ubuntu)', web1, true],
    ['os:(?:deb|ubu)', web1, true],
    ['os:ian', web1, false],
    ['roles:ca.*', web1, true],
    ['os_family:red', db1, true],
  ])
})

describe('ipcidr', () => {
  table('ipcidr', [
    ['10.0.0.0/16', web1, true],
    ['10.0.1.0/24', db1, false],
    ['10.0.2.0/24', db1, true],
    ['10.0.1.15', web1, true],
    ['10.0.1.16', web1, false],
    ['0.0.0.0/0', db1, true],
    ['fd00::/8', web1, true],
    ['fd00::/8', db1, false],
    ['10.0.0.0/8', nograins, false],
    ['10.0.1.15/32', web1, true],
    ['fd00::/16', web1, true],
    ['::ffff:10.0.0.0/120', web1, false],
  ])
})

describe('nodegroup', () => {
  table('nodegroup', [
    ['webs', web1, true],
    ['webs', db1, false],
    ['debian', web1, true],
    ['dbs', db1, true],
    ['both', db1, true],
    ['both', web1, true],
    ['both', { id: 'mail1' }, false],
  ])
})

describe('compound', () => {
  table('compound', [
    ['G@os:Debian and web*', web1, true],
    ['G@os:Debian and web*', db1, false],
    ['G@os:Debian or L@db1', db1, true],
    ['not web*', db1, true],
    ['not web*', web1, false],
    ['web* not G@os:CentOS', web1, true],
    ['* and not G@os:CentOS', db1, false],
    ['E@db\\d and S@10.0.2.0/24', db1, true],
    ['P@roles:(web|db) and I', web1, false],
    ['N@webs and G@roles:cache', web1, true],
    ['G|@locale_info|timezone|UTC', web1, true],
    // `not` > `and` > `or`, as in the Python expression Salt evaluates.
    ['db* or web* and G@os:CentOS', db1, true], // db* or (web* and …)
    ['db* or web* and G@os:CentOS', web1, false],
    ['( db* or web* ) and G@os:CentOS', web1, false],
    ['(db* or web*) and G@os:Debian', web1, true],
    ['not db* and not web*', web1, false],
    ['not ( db* or web* )', { id: 'mail1' }, true],
    ['not ( not web1 )', web1, true],
    ['((web1))', web1, true],
    ['E@web(1|2) and (G@roles:web)', web1, true],
    [['G@os:Debian', 'and', 'web*'], web1, true],
  ])
})

describe('invalid targets', () => {
  it.each([
    [{ tgt: '( web* or db*', tgt_type: 'compound' }, "invalid compound target '( web* or db*': unbalanced parentheses: missing ')'"],
    [{ tgt: 'web* )', tgt_type: 'compound' }, "invalid compound target 'web* )': unbalanced parentheses: unexpected ')'"],
    [
      { tgt: 'X@foo and web*', tgt_type: 'compound' },
      "invalid compound target 'X@foo and web*': unknown prefix 'X@' in 'X@foo' (known: G@, P@, L@, E@, S@, N@)",
    ],
    [{ tgt: 'I@role:web', tgt_type: 'compound' }, "invalid compound target 'I@role:web': pillar targeting (I@) is not supported"],
    [{ tgt: 'and web*', tgt_type: 'compound' }, "invalid compound target 'and web*': it starts with 'and'"],
    [{ tgt: 'web* and', tgt_type: 'compound' }, "invalid compound target 'web* and': it ends with 'and'"],
    [{ tgt: 'web* db*', tgt_type: 'compound' }, "invalid compound target 'web* db*': missing 'and' or 'or' between 'web*' and 'db*'"],
    [{ tgt: 'web* and ( )', tgt_type: 'compound' }, "invalid compound target 'web* and ( )': empty parentheses '( )'"],
    [{ tgt: 'E@web( and web*', tgt_type: 'compound' }, "invalid compound target 'E@web( and web*': bad regular expression 'web('"],
    [{ tgt: 'web(', tgt_type: 'pcre' }, "invalid pcre target 'web(': bad regular expression 'web('"],
    [{ tgt: 'os', tgt_type: 'grain' }, "invalid grain target 'os': 'os' needs a key and a value separated by ':'"],
    [{ tgt: 'os:(deb', tgt_type: 'grain_pcre' }, "invalid grain_pcre target 'os:(deb': bad regular expression '(deb'"],
    [{ tgt: '10.0.0.0/33', tgt_type: 'ipcidr' }, "invalid ipcidr target '10.0.0.0/33': '10.0.0.0/33' has an invalid prefix length '/33'"],
    [{ tgt: 'web1', tgt_type: 'ipcidr' }, "invalid ipcidr target 'web1': 'web1' is not an IP address or CIDR network"],
    // Python's ip_network is strict, as Salt calls it: host bits set is an invalid network, which matches nothing in Salt.
    [{ tgt: '10.0.0.1/24', tgt_type: 'ipcidr' }, "invalid ipcidr target '10.0.0.1/24': '10.0.0.1/24' has host bits set"],
    [{ tgt: 'fd00::1/64', tgt_type: 'ipcidr' }, "invalid ipcidr target 'fd00::1/64': 'fd00::1/64' has host bits set"],
    [{ tgt: '::ffff:10.0.0.1/120', tgt_type: 'ipcidr' }, "invalid ipcidr target '::ffff:10.0.0.1/120': '::ffff:10.0.0.1/120' has host bits set"],
    [{ tgt: 'S@10.0.1.15/24 or web*', tgt_type: 'compound' }, "invalid compound target 'S@10.0.1.15/24 or web*': '10.0.1.15/24' has host bits set"],
    // Salt inserts 'and' before a 'not' that follows a 'not': `not and not web1`, a syntax error that matches nothing.
    [{ tgt: 'not not web1', tgt_type: 'compound' }, "invalid compound target 'not not web1': 'not' follows 'not'"],
    [{ tgt: 'web2 or not not web1', tgt_type: 'compound' }, "invalid compound target 'web2 or not not web1': 'not' follows 'not'"],
    [{ tgt: 'nope', tgt_type: 'nodegroup' }, "invalid nodegroup target 'nope': unknown nodegroup 'nope' (known: webs, debian, both, dbs, loop, loop2)"],
    [{ tgt: 'loop', tgt_type: 'nodegroup' }, "invalid nodegroup target 'loop': nodegroup 'loop' includes itself"],
    [{ tgt: 'N@nope or web*', tgt_type: 'compound' }, "invalid compound target 'N@nope or web*': unknown nodegroup 'nope'"],
    [{ tgt: '', tgt_type: 'compound' }, "invalid compound target '': the target is empty"],
    [{ tgt: 'web*', tgt_type: 'magic' }, "invalid magic target 'web*': unknown tgt_type 'magic'"],
  ])('%j', (target, message) => {
    const attempt = (): unknown => compileTarget(target as { tgt: Tgt; tgt_type: TargetType }, nodegroups)
    expect(attempt).toThrow(TargetError)
    expect(attempt).toThrow(message)
  })

  it('carries the target and type as context', () => {
    try {
      compileTarget({ tgt: 'web(', tgt_type: 'pcre' })
      expect.unreachable()
    } catch (error) {
      expect(error).toMatchObject({ name: 'TargetError', target: 'web(', tgtType: 'pcre' })
    }
  })
})

describe('expectedMinions', () => {
  const known: MinionInfo[] = [web1, db1, nograins, { id: 'mail1', grains: { os: 'Debian', ipv4: ['10.0.3.3'] } }]
  const expectFor = (tgt: Tgt, tgtType: TargetType, options?: { greedy?: boolean }): Promise<string[]> =>
    expectedMinions({ tgt, tgt_type: tgtType }, known, nodegroups, options)

  it.each<[Tgt, TargetType, string[]]>([
    ['*', 'glob', ['web1', 'db1', 'web9', 'mail1']],
    ['web*', 'glob', ['web1', 'web9']],
    ['^(db|mail)', 'pcre', ['db1', 'mail1']],
    // A list expects exactly the listed ids the master knows; unknown ids are not expected.
    ['db1,mail1,ghost', 'list', ['db1', 'mail1']],
    // Grain-based terms include minions with no cached grains (greedy, like Salt's check_minions).
    ['os:Debian', 'grain', ['web1', 'web9', 'mail1']],
    ['os:cent.*', 'grain_pcre', ['db1', 'web9']],
    ['10.0.0.0/23', 'ipcidr', ['web1', 'web9']],
    ['debian', 'nodegroup', ['web1', 'web9', 'mail1']],
    ['dbs', 'nodegroup', ['db1']],
    ['G@os:Debian and not web*', 'compound', ['mail1']],
    ['web* and G@os:CentOS', 'compound', ['web9']],
    // Salt's greedy set arithmetic: the grain term matches web9 (no cached grains), so `not` leaves it out.
    ['not G@os:Debian', 'compound', ['db1']],
    ['not G@os:Debian or web9', 'compound', ['db1', 'web9']],
    ['not ( G@os:Debian and web* )', 'compound', ['db1', 'mail1']],
    ['L@db1 or G@os:CentOS', 'compound', ['db1', 'web9']],
  ])('%s (%s) → %j', async (tgt, tgtType, ids) => {
    expect(await expectFor(tgt, tgtType)).toEqual(ids)
  })

  it('leaves out minions with unknown grains when not greedy', async () => {
    expect(await expectFor('os:Debian', 'grain', { greedy: false })).toEqual(['web1', 'mail1'])
    expect(await expectFor('web* or G@os:Debian', 'compound', { greedy: false })).toEqual(['web1', 'web9', 'mail1'])
  })

  it('throws TargetError for an invalid target', async () => {
    await expect(expectFor('( web*', 'compound')).rejects.toThrow(TargetError)
  })
})
