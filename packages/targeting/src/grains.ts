import { BlockList, isIP } from 'node:net'

/** A minion's grains: Salt's facts about it (os, roles, ipv4, …). */
export type Grains = Record<string, unknown>

/** A minion as targeting sees it. */
export interface MinionInfo {
  id: string
  /** The minion's grains; undefined on the master when it has not cached them yet. */
  grains?: Grains
}

/** How Python's str() shows a grain value, since Salt compares grains as str(value).lower(). */
export function pythonStr(value: unknown): string {
  if (value === true) return 'True'
  if (value === false) return 'False'
  if (value === null || value === undefined) return 'None'
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

const MISSING = Symbol('missing')

/** salt.utils.data.traverse_dict_and_list: `a:b:0` walks mappings, list indexes and dicts inside lists. */
function traverse(data: unknown, key: string, delimiter: string): unknown {
  let node: unknown = data
  for (const segment of key.split(delimiter)) {
    if (Array.isArray(node)) {
      const embedded = node.find((item) => isRecord(item) && Object.hasOwn(item, segment))
      if (embedded !== undefined) node = (embedded as Record<string, unknown>)[segment]
      else if (/^\d+$/.test(segment) && Number(segment) < node.length) node = node[Number(segment)]
      else return MISSING
    } else if (isRecord(node) && Object.hasOwn(node, segment)) {
      node = node[segment]
    } else {
      return MISSING
    }
  }
  return node
}

/**
 * salt.utils.data.subdict_match: `os:Debian` and nested `locale_info:defaultlanguage:en_*`,
 * trying the deepest key first, so `a:b:c` matches grains.a.b == 'c' before grains.a == 'b:c'.
 * A list value matches when any element does; a mapping when the pattern names one of its keys.
 */
export function subdictMatch(data: unknown, expression: string, delimiter: string, valueMatch: (value: unknown, pattern: string) => boolean): boolean {
  const splits = expression.split(delimiter)
  if (splits.length === 1) return false
  for (let index = splits.length - 1; index > 0; index--) {
    const key = splits.slice(0, index).join(delimiter)
    let pattern = splits.slice(index).join(delimiter)
    let node: unknown
    if (key === '*') {
      pattern = expression
      node = data
    } else {
      node = traverse(data, key, delimiter)
    }
    if (node === MISSING) continue
    if (isRecord(node)) {
      if (dictMatch(node, pattern, delimiter, valueMatch)) return true
      continue
    }
    if (Array.isArray(node)) {
      for (const member of node) {
        if (isRecord(member) && dictMatch(member, pattern, delimiter, valueMatch)) return true
        if (valueMatch(member, pattern)) return true
      }
      continue
    }
    if (valueMatch(node, pattern)) return true
  }
  return false
}

function dictMatch(data: Record<string, unknown>, pattern: string, delimiter: string, valueMatch: (value: unknown, pattern: string) => boolean): boolean {
  const wildcard = pattern.startsWith(`*${delimiter}`)
  const rest = wildcard ? pattern.slice(2) : pattern
  if (rest === '*' || Object.hasOwn(data, rest)) return true
  if (subdictMatch(data, rest, delimiter, valueMatch)) return true
  if (!wildcard) return false
  return Object.values(data).some((value) => {
    if (isRecord(value)) return dictMatch(value, rest, delimiter, valueMatch)
    if (Array.isArray(value)) return value.some((item) => valueMatch(item, rest))
    return valueMatch(value, rest)
  })
}

/**
 * Salt's ipcidr matcher: a network (`10.0.0.0/8`) matches when any of the minion's `ipv4` (or
 * `ipv6`) grains is inside it; a single address matches when the minion has exactly that address.
 */
export function compileIpcidr(pattern: string, fail: (problem: string) => never): (minion: MinionInfo) => boolean {
  const [address = '', prefixText, extra] = pattern.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return fail(`'${pattern}' is not an IP address or CIDR network`)
  const type = family === 4 ? 'ipv4' : 'ipv6'
  const blockList = new BlockList()
  if (prefixText === undefined) {
    blockList.addAddress(address, type)
  } else {
    const prefix = /^\d+$/.test(prefixText) ? Number(prefixText) : Number.NaN
    if (!(prefix >= 0 && prefix <= (family === 4 ? 32 : 128))) return fail(`'${pattern}' has an invalid prefix length '/${prefixText}'`)
    // Python's ip_network (strict, as Salt calls it) refuses an address with host bits set: Salt matches nothing.
    if (hasHostBits(address, family === 4 ? 4 : 6, prefix)) return fail(`'${pattern}' has host bits set (the network is not an address of its own)`)
    blockList.addSubnet(address, prefix, type)
  }
  return (minion) => {
    const addresses = minion.grains?.[type]
    if (!Array.isArray(addresses)) return false
    return addresses.some((item) => typeof item === 'string' && isIP(item) === family && blockList.check(item, type))
  }
}

/** Whether `address` has any bit set past the first `prefix` bits. */
function hasHostBits(address: string, family: 4 | 6, prefix: number): boolean {
  const width = family === 4 ? 32 : 128
  const value = family === 4 ? ipv4Value(address) : ipv6Value(address)
  const hostMask = (1n << BigInt(width - prefix)) - 1n
  return (value & hostMask) !== 0n
}

function ipv4Value(address: string): bigint {
  return address.split('.').reduce((value, octet) => (value << 8n) | BigInt(Number(octet)), 0n)
}

/** An IPv6 address (already checked by isIP) as a 128-bit number: `::` expanded, an IPv4 tail as two groups. */
function ipv6Value(address: string): bigint {
  const plain = address.split('%')[0] ?? ''
  const lastColon = plain.lastIndexOf(':')
  const tail = plain.slice(lastColon + 1)
  const text = tail.includes('.') ? `${plain.slice(0, lastColon + 1)}${ipv4Groups(tail)}` : plain
  const [head = '', rest] = text.split('::')
  const headGroups = head === '' ? [] : head.split(':')
  const restGroups = rest === undefined || rest === '' ? [] : rest.split(':')
  const groups = rest === undefined ? headGroups : [...headGroups, ...Array<string>(8 - headGroups.length - restGroups.length).fill('0'), ...restGroups]
  return groups.reduce((value, group) => (value << 16n) | BigInt(Number.parseInt(group, 16)), 0n)
}

function ipv4Groups(address: string): string {
  const value = Number(ipv4Value(address))
  return `${Math.floor(value / 65536).toString(16)}:${(value % 65536).toString(16)}`
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
