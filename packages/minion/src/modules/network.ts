/**
 * Salt's `network` module (salt/modules/network.py), the Linux part: interfaces and addresses,
 * routes and sockets from /proc and /sys, ping through the system's `ping`, and a TCP or UDP
 * connect test from the minion itself.
 */
import { readdir, readFile, readlink } from 'node:fs/promises'
import { isIP, Socket } from 'node:net'
import { lookup } from 'node:dns/promises'
import { networkInterfaces } from 'node:os'
import { CommandExecutionError, InvocationError } from '../errors.js'
import type { JobContext, ModuleDefinition } from './types.js'
import { badArgument, execArgv, isSet, optionalString, requireString, toBool, toInteger, toSeconds } from './validate.js'
import { msFromSeconds } from '@brine/config'

const readText = async (path: string): Promise<string | undefined> => await readFile(path, 'utf8').catch(() => undefined)

function ipv4ToInt(address: string): number {
  return address.split('.').reduce((value, octet) => value * 256 + Number(octet), 0)
}
const intToIpv4 = (value: number): string => [24, 16, 8, 0].map((shift) => (value >>> shift) & 255).join('.')

/** Salt's interfaces dict: name → {hwaddr, up, inet: [{address, netmask, broadcast, label}], inet6: [{address, prefixlen, scope}]}. */
async function interfaces(): Promise<Record<string, Record<string, unknown>>> {
  const result: Record<string, Record<string, unknown>> = {}
  const names = new Set([...(await readdir('/sys/class/net').catch(() => [] as string[])), ...Object.keys(networkInterfaces())])
  for (const name of [...names].sort()) {
    const flags = Number.parseInt((await readText(`/sys/class/net/${name}/flags`)) ?? '0', 16)
    const entry: Record<string, unknown> = { up: (flags & 1) === 1 }
    const hwaddr = (await readText(`/sys/class/net/${name}/address`))?.trim()
    if (hwaddr !== undefined && hwaddr !== '') entry.hwaddr = hwaddr
    const inet: Record<string, string>[] = []
    const inet6: Record<string, unknown>[] = []
    for (const address of networkInterfaces()[name] ?? []) {
      if (address.family === 'IPv4') {
        const mask = ipv4ToInt(address.netmask)
        const broadcast = intToIpv4((ipv4ToInt(address.address) & mask) | (~mask >>> 0))
        inet.push({ address: address.address, netmask: address.netmask, broadcast, label: name })
      } else {
        const prefixlen = Number(address.cidr?.split('/')[1] ?? 128)
        const scope = address.address === '::1' ? 'host' : address.address.toLowerCase().startsWith('fe80') ? 'link' : 'global'
        inet6.push({ address: address.address, prefixlen, scope })
      }
    }
    if (inet.length > 0) entry.inet = inet
    if (inet6.length > 0) entry.inet6 = inet6
    result[name] = entry
  }
  return result
}

/** `a.b.c.d/n` → a test of an IPv4 address; anything else refused by name. */
function cidrTest(cidr: string): (address: string) => boolean {
  const match = /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/.exec(cidr)
  if (match === null || isIP(match[1] as string) !== 4 || Number(match[2]) > 32) throw badArgument('cidr', "an IPv4 network such as '10.0.0.0/8'", cidr)
  const bits = Number(match[2])
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0
  const network = (ipv4ToInt(match[1] as string) & mask) >>> 0
  return (address) => (ipv4ToInt(address) & mask) >>> 0 === network
}

const PRIVATE = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16'].map(cidrTest)

async function ipAddrs(interfaceName: unknown, includeLoopback: unknown, cidr: unknown, type: unknown): Promise<string[]> {
  const only = optionalString(interfaceName, 'interface')
  const loopback = toBool(includeLoopback, 'include_loopback')
  const inCidr = isSet(cidr) ? cidrTest(requireString(cidr, 'cidr')) : () => true
  if (isSet(type) && type !== 'public' && type !== 'private') throw badArgument('type', "'public' or 'private'", type)
  const addresses = new Set<string>()
  for (const [name, entries] of Object.entries(networkInterfaces())) {
    if (only !== undefined && name !== only) continue
    for (const entry of entries ?? []) {
      if (entry.family !== 'IPv4' || (!loopback && entry.address.startsWith('127.')) || !inCidr(entry.address)) continue
      const isPrivate = PRIVATE.some((test) => test(entry.address)) || entry.address.startsWith('127.')
      if ((type === 'public' && isPrivate) || (type === 'private' && !isPrivate)) continue
      addresses.add(entry.address)
    }
  }
  return [...addresses].sort((a, b) => ipv4ToInt(a) - ipv4ToInt(b))
}

/** A host name or an IP address, never an option to the command it is passed to. */
function hostOf(value: unknown, name = 'host'): string {
  const host = requireString(value, name)
  if (isIP(host) === 0 && !/^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})$/.test(host)) throw badArgument(name, 'a host name or an IP address', value)
  return host
}

/** One TCP connect or UDP send to host:port within `timeout` seconds. */
async function tryConnect(address: string, port: number, proto: 'tcp' | 'udp', timeoutMs: number): Promise<void> {
  if (proto === 'udp') {
    // node:dgram is loaded at the first UDP check, not with the execution modules (every minion loads them at start).
    const { createSocket } = process.getBuiltinModule('node:dgram')
    const socket = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4')
    try {
      await new Promise<void>((resolve, reject) => socket.send(Buffer.alloc(0), port, address, (error) => (error ? reject(error) : resolve())))
    } finally {
      socket.close()
    }
    return
  }
  const socket = new Socket()
  try {
    await new Promise<void>((resolve, reject) => {
      socket.setTimeout(timeoutMs, () => reject(new Error(`timed out after ${timeoutMs} ms`)))
      socket.once('error', reject)
      socket.connect(port, address, resolve)
    })
  } finally {
    socket.destroy()
  }
}

async function connect(host: unknown, portArg: unknown, kwargs: Record<string, unknown>): Promise<{ result: boolean; comment: string }> {
  if (!isSet(host)) throw new InvocationError('Required argument, host, is missing.', { argument: 'host' })
  if (!isSet(portArg)) throw new InvocationError('Required argument, port, is missing.', { argument: 'port' })
  const name = hostOf(host)
  const port = toInteger(portArg, 'port', 1, 65535)
  const proto = String(kwargs.proto ?? 'tcp').toLowerCase()
  if (proto !== 'tcp' && proto !== 'udp') throw badArgument('proto', "'tcp' or 'udp'", kwargs.proto)
  const timeoutMs = Math.round(msFromSeconds(toSeconds(kwargs.timeout ?? 5, 'timeout', 300)))
  const family = kwargs.family === 'ipv4' ? 4 : kwargs.family === 'ipv6' ? 6 : 0
  let address: string
  try {
    address = isIP(name) !== 0 ? name : (await lookup(name, { family })).address
  } catch (error) {
    return { result: false, comment: `Unable to resolve host ${name} on ${proto} port ${port}: ${(error as Error).message}` }
  }
  try {
    await tryConnect(address, port, proto, timeoutMs)
    return { result: true, comment: `Successfully connected to ${name} (${address}) on ${proto} port ${port}` }
  } catch (error) {
    return { result: false, comment: `Unable to connect to ${name} (${address}) on ${proto} port ${port}: ${(error as Error).message}` }
  }
}

const TCP_STATES = ['', 'ESTABLISHED', 'SYN_SENT', 'SYN_RECV', 'FIN_WAIT1', 'FIN_WAIT2', 'TIME_WAIT', 'CLOSE', 'CLOSE_WAIT', 'LAST_ACK', 'LISTEN', 'CLOSING']

/** A /proc/net address (`0100007F:1F90`, little-endian words) as `ip:port`. */
export function procAddress(text: string): string {
  const [hex = '', portHex = '0'] = text.split(':')
  const port = Number.parseInt(portHex, 16)
  if (hex.length === 8) return `${intToIpv4(Number.parseInt(hex.match(/../g)?.reverse().join('') ?? '0', 16))}:${port}`
  const words = (hex.match(/.{8}/g) ?? []).map((word) => (word.match(/../g) ?? []).reverse().join(''))
  const groups = words.join('').match(/.{4}/g) ?? []
  return `${groups
    .map((group) => group.replace(/^0{1,3}/, ''))
    .join(':')
    .replace(/(^|:)0(:0)+(:|$)/, '::')}:${port}`
}

/** socket inode → `pid/comm`, from /proc/<pid>/fd (bounded: the first 4096 processes). */
async function socketOwners(): Promise<Map<string, string>> {
  const owners = new Map<string, string>()
  const pids = (await readdir('/proc').catch(() => [] as string[])).filter((entry) => /^\d+$/.test(entry)).slice(0, 4096)
  for (const pid of pids) {
    const comm = ((await readText(`/proc/${pid}/comm`)) ?? '').trim()
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')
      const match = /^socket:\[(\d+)\]$/.exec(target)
      if (match !== null) owners.set(match[1] as string, `${pid}/${comm}`)
    }
  }
  return owners
}

/** Salt's netstat list, from /proc/net/{tcp,tcp6,udp,udp6}. */
async function netstat(): Promise<Record<string, unknown>[]> {
  const owners = await socketOwners()
  const sockets: Record<string, unknown>[] = []
  for (const proto of ['tcp', 'tcp6', 'udp', 'udp6']) {
    const lines = ((await readText(`/proc/net/${proto}`)) ?? '').split('\n').slice(1)
    for (const line of lines) {
      const columns = line.trim().split(/\s+/)
      if (columns.length < 10) continue
      const [, local = '', remote = '', state = '0', queues = '0:0', , , uid = '', , inode = ''] = columns
      const [send = '0', recv = '0'] = queues.split(':')
      sockets.push({
        proto,
        'recv-q': Number.parseInt(recv, 16),
        'send-q': Number.parseInt(send, 16),
        'local-address': procAddress(local),
        'remote-address': procAddress(remote),
        state: proto.startsWith('tcp') ? (TCP_STATES[Number.parseInt(state, 16)] ?? state) : '',
        user: Number(uid),
        inode: Number(inode),
        program: owners.get(inode) ?? '',
      })
    }
  }
  return sockets
}

/** Salt's routes list, from /proc/net/route and /proc/net/ipv6_route. */
async function routes(family?: string): Promise<Record<string, string>[]> {
  const list: Record<string, string>[] = []
  if (family !== 'inet6') {
    for (const line of ((await readText('/proc/net/route')) ?? '').split('\n').slice(1)) {
      const [iface, destination, gateway, flags, , , , mask] = line.trim().split(/\s+/)
      if (iface === undefined || mask === undefined) continue
      const ip = (hex: string): string => intToIpv4(Number.parseInt(hex.match(/../g)?.reverse().join('') ?? '0', 16))
      const bits = Number.parseInt(flags ?? '0', 16)
      list.push({
        addr_family: 'inet',
        destination: ip(destination as string),
        gateway: ip(gateway as string),
        netmask: ip(mask),
        flags: `${bits & 1 ? 'U' : ''}${bits & 2 ? 'G' : ''}${bits & 4 ? 'H' : ''}`,
        interface: iface,
      })
    }
  }
  if (family !== 'inet') {
    for (const line of ((await readText('/proc/net/ipv6_route')) ?? '').split('\n')) {
      const columns = line.trim().split(/\s+/)
      if (columns.length < 10) continue
      const expand = (hex: string): string =>
        (hex.match(/.{4}/g) ?? [])
          .map((group) => group.replace(/^0{1,3}/, ''))
          .join(':')
          .replace(/(^|:)0(:0)+(:|$)/, '::')
      const bits = Number.parseInt(columns[8] as string, 16)
      list.push({
        addr_family: 'inet6',
        destination: `${expand(columns[0] as string)}/${Number.parseInt(columns[1] as string, 16)}`,
        gateway: expand(columns[4] as string),
        netmask: '',
        flags: `${bits & 1 ? 'U' : ''}${bits & 2 ? 'G' : ''}`,
        interface: columns[9] as string,
      })
    }
  }
  return list
}

function familyOf(value: unknown): string | undefined {
  if (!isSet(value)) return undefined
  if (value !== 'inet' && value !== 'inet6') throw new CommandExecutionError(`Invalid address family ${String(value)}`, { argument: 'family' })
  return value
}

async function ping(ctx: JobContext, hostArg: unknown, timeout: unknown, returnBoolean: unknown): Promise<unknown> {
  const host = hostOf(hostArg)
  const seconds = timeout === false || !isSet(timeout) ? undefined : toInteger(timeout, 'timeout', 1, 3600)
  const argv = ['ping', '-W', '2', '-c', '4', ...(seconds === undefined ? [] : ['-w', String(seconds)]), host]
  const result = await execArgv(ctx, argv, { timeout: (seconds ?? 60) + 10 })
  if (toBool(returnBoolean, 'return_boolean')) return result.retcode === 0
  return result.stdout || result.stderr
}

export const networkModule: ModuleDefinition = {
  interfaces: {
    doc: "Return a dictionary of information about all the interfaces on the minion: hwaddr, up, inet (address, netmask, broadcast, label), inet6 (address, prefixlen, scope).\n\nCLI Example:\n\n    brine '*' network.interfaces",
    run: async () => await interfaces(),
  },
  ip_addrs: {
    doc: "Return a sorted list of IPv4 addresses assigned to the host (127.x only with include_loopback=True), optionally of one interface, inside a cidr, or of a type ('public' or 'private').\n\nCLI Example:\n\n    brine '*' network.ip_addrs\n    brine '*' network.ip_addrs cidr=10.0.0.0/8",
    args: ['interface', 'include_loopback', 'cidr', 'type'],
    defaults: { interface: null, include_loopback: false, cidr: null, type: null },
    run: async ([interfaceName, includeLoopback, cidr, type]) => await ipAddrs(interfaceName, includeLoopback, cidr, type),
  },
  ping: {
    doc: "Perform a ping to a host (4 packets): returns ping's output, or True/False with return_boolean=True. Needs the system's ping.\n\ntimeout\n    Seconds before ping gives up (default: none).\n\nCLI Example:\n\n    brine '*' network.ping archlinux.org\n    brine '*' network.ping archlinux.org return_boolean=True timeout=3",
    args: ['host', 'timeout', 'return_boolean'],
    defaults: { timeout: false, return_boolean: false },
    run: async ([host, timeout, returnBoolean], _kwargs, ctx) => await ping(ctx, host, timeout, returnBoolean),
  },
  connect: {
    doc: "Test connectivity to a host on a port from the minion: {result, comment}.\n\nproto\n    tcp (default) or udp (a datagram sent: udp cannot confirm a listener).\ntimeout\n    Seconds (default 5).\nfamily\n    ipv4 or ipv6 for the name lookup.\n\nCLI Example:\n\n    brine '*' network.connect archlinux.org 80\n    brine '*' network.connect archlinux.org 80 timeout=3 family=ipv4",
    args: ['host', 'port'],
    defaults: { port: null },
    kwargs: true,
    run: async ([host, port], kwargs) => await connect(host, port, kwargs),
  },
  netstat: {
    doc: "Return information on open ports and states: a list of {proto, recv-q, send-q, local-address, remote-address, state, user, inode, program}.\n\nCLI Example:\n\n    brine '*' network.netstat",
    run: async () => await netstat(),
  },
  routes: {
    doc: "Return the routing table: a list of {addr_family, destination, gateway, netmask, flags, interface}; family limits it to inet or inet6.\n\nCLI Example:\n\n    brine '*' network.routes",
    args: ['family'],
    defaults: { family: null },
    run: async ([family]) => await routes(familyOf(family)),
  },
  default_route: {
    doc: "Return the default route(s) (0.0.0.0 for inet, ::/0 for inet6), as routes shows them; family limits it to inet or inet6.\n\nCLI Example:\n\n    brine '*' network.default_route",
    args: ['family'],
    defaults: { family: null },
    run: async ([family]) =>
      (await routes(familyOf(family))).filter((route) =>
        route.addr_family === 'inet' ? route.destination === '0.0.0.0' && route.netmask === '0.0.0.0' : route.destination === '::/0',
      ),
  },
}
