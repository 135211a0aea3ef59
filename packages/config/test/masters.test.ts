import { describe, expect, it } from 'vitest'
import { ConfigError } from '../src/errors.js'
import { checkMinionMasters, masterAddressOf, masterFingerFor, mastersOf } from '../src/masters.js'

describe('mastersOf', () => {
  it('lists one master or several, in order', () => {
    expect(mastersOf({ master: 'salt' })).toEqual(['salt'])
    expect(mastersOf({ master: ['m2', 'm1'] })).toEqual(['m2', 'm1'])
  })

  it.each([
    [[], 'master must name at least one master, got an empty list'],
    [['m1', ''], 'master must name each master by a non-empty host, entry 2 is ""'],
    [[7], 'master must name each master by a non-empty host, entry 1 is 7'],
    [undefined, 'master must name each master by a non-empty host, entry 1 is missing'],
    [['m1', 'm2', 'm1'], "master lists 'm1' twice; each master may appear once"],
    [['m1:4506', 'm1:99999'], "master entry 'm1:99999' names a port that is not a number from 1 to 65535 (host:port, [IPv6]:port)"],
    ['m1:port', "master entry 'm1:port' names a port that is not a number from 1 to 65535 (host:port, [IPv6]:port)"],
  ])('refuses %j without a file to name', (master, message) => {
    expect(() => mastersOf({ master })).toThrow(ConfigError)
    expect(() => mastersOf({ master })).toThrow(message)
  })
})

describe('masterAddressOf', () => {
  it("reads host:port, [v6]:port and [v6] as Salt's parse_host_port does; a bare host (or bare IPv6) takes master_port", () => {
    expect(masterAddressOf('salt', 4506)).toEqual({ host: 'salt', port: 4506 })
    expect(masterAddressOf('10.0.0.1:4606', 4506)).toEqual({ host: '10.0.0.1', port: 4606 })
    expect(masterAddressOf('[::1]:4606', 4506)).toEqual({ host: '::1', port: 4606 })
    expect(masterAddressOf('[::1]', 4506)).toEqual({ host: '::1', port: 4506 })
    expect(masterAddressOf('fe80::1', 4506)).toEqual({ host: 'fe80::1', port: 4506 })
    expect(masterAddressOf('salt:0', 4506)).toBeUndefined()
    expect(masterAddressOf(':4506', 4506)).toBeUndefined()
  })

  it('lets one minion list two masters on one host that differ by port', () => {
    expect(mastersOf({ master: ['127.0.0.1:4506', '127.0.0.1:4606'] })).toEqual(['127.0.0.1:4506', '127.0.0.1:4606'])
  })
})

describe('checkMinionMasters', () => {
  it('finds nothing wrong with str or failover over a list, and str with one string', () => {
    expect(checkMinionMasters({ master: ['a', 'b'], master_type: 'failover', master_finger: { b: 'ff' } })).toEqual([])
    expect(checkMinionMasters({ master: 'a', master_type: 'str', master_finger: ['ff'] })).toEqual([])
  })

  it('names the file and line it is told, else only the problem', () => {
    const [bare] = checkMinionMasters({ master: 'a', master_type: 'failover' })
    expect(bare?.message).toBe("master_type failover needs master to be a list of masters to fail over between (master: [a, other]), got the single master 'a'")
    const [placed] = checkMinionMasters({ master: 'a', master_type: 'failover' }, (key) =>
      key === 'master_type' ? { file: '/etc/brine/minion', line: 4 } : undefined,
    )
    expect([placed?.message.startsWith('/etc/brine/minion:4: '), placed?.key, placed?.line]).toEqual([true, 'master', 4])
  })
})

describe('masterFingerFor', () => {
  const masters = ['m1', 'm2']
  it('gives every master the one string, a list entry by position, a mapping entry by name, else nothing', () => {
    expect(masters.map((_, index) => masterFingerFor('aa', masters, index))).toEqual(['aa', 'aa'])
    expect(masters.map((_, index) => masterFingerFor(['aa', ''], masters, index))).toEqual(['aa', ''])
    expect(masters.map((_, index) => masterFingerFor({ m2: 'bb' }, masters, index))).toEqual(['', 'bb'])
    expect(masterFingerFor(undefined, masters, 0)).toBe('')
    expect(masterFingerFor({ toString: 'x' } as Record<string, string>, ['__proto__'], 0)).toBe('')
  })
})
