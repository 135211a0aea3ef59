/**
 * Salt's core grains, computed from node:os and /etc files, and the `grains` module. Grains set
 * with grains.setval persist to `<cachedir>/grains` (JSON, which is also valid YAML) and are read
 * back by {@link collectGrains}, so they survive a restart.
 */
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, readFile } from 'node:fs/promises'
import * as os from 'node:os'
import { dirname, join } from 'node:path'
import { resolveSaltScalar } from '@brine/config'
import { writeFileAtomic } from '@brine/crypt'
import { isPlainObject, traverseDictAndList } from './args.js'
import { CommandExecutionError, InvocationError } from '../errors.js'
import type { Grains, JobContext, MinionOpts, ModuleDefinition } from './types.js'
import { brineVersion, brineVersionInfo } from './version.js'

/** os-release IDs to Salt's `os` grain spelling (salt/grains/core.py _OS_NAME_MAP and friends). */
const OS_NAMES: Record<string, string> = {
  debian: 'Debian',
  ubuntu: 'Ubuntu',
  raspbian: 'Raspbian',
  linuxmint: 'Mint',
  devuan: 'Devuan',
  kali: 'Kali',
  rhel: 'RedHat',
  redhat: 'RedHat',
  centos: 'CentOS',
  fedora: 'Fedora',
  rocky: 'Rocky',
  almalinux: 'AlmaLinux',
  ol: 'OEL',
  amzn: 'Amazon',
  sles: 'SUSE',
  opensuse: 'SUSE',
  'opensuse-leap': 'Leap',
  'opensuse-tumbleweed': 'openSUSE Tumbleweed',
  arch: 'Arch',
  manjaro: 'Manjaro',
  alpine: 'Alpine',
  gentoo: 'Gentoo',
  void: 'Void',
  nixos: 'NixOS',
}

/** Salt's `os_family` for each `os`. */
const OS_FAMILIES: Record<string, string> = {
  Debian: 'Debian',
  Ubuntu: 'Debian',
  Raspbian: 'Debian',
  Mint: 'Debian',
  Devuan: 'Debian',
  Kali: 'Debian',
  RedHat: 'RedHat',
  CentOS: 'RedHat',
  Fedora: 'RedHat',
  Rocky: 'RedHat',
  AlmaLinux: 'RedHat',
  OEL: 'RedHat',
  Amazon: 'RedHat',
  SUSE: 'Suse',
  Leap: 'Suse',
  'openSUSE Tumbleweed': 'Suse',
  Arch: 'Arch',
  Manjaro: 'Arch',
  Alpine: 'Alpine',
  Gentoo: 'Gentoo',
  Void: 'Void',
  NixOS: 'NixOS',
}

/** Debian calls x86_64 amd64 and so on; Salt's `osarch` is what the package manager says. */
const DEBIAN_ARCH: Record<string, string> = { x86_64: 'amd64', aarch64: 'arm64', armv7l: 'armhf', i686: 'i386', ppc64le: 'ppc64el' }

/** Where grains.setval persists grains. */
export function grainsFilePath(opts: MinionOpts): string | undefined {
  const cachedir = opts.cachedir
  return typeof cachedir === 'string' && cachedir !== '' ? join(cachedir, 'grains') : undefined
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

/** Parses /etc/os-release: KEY=value lines, values optionally quoted. */
export function parseOsRelease(text: string): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const match = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim())
    if (match === null) continue
    let value = (match[2] as string).trim()
    if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'"))) {
      value = value.slice(1, -1).replace(/\\(["$`\\])/g, '$1')
    }
    fields[match[1] as string] = value
  }
  return fields
}

/** Salt's `os` and `os_family` from os-release's ID, ID_LIKE and NAME. */
function osIdentity(release: Record<string, string>): { name: string; family: string } {
  const id = (release.ID ?? os.type()).toLowerCase()
  const name = OS_NAMES[id] ?? (release.NAME?.split(' ')[0] || os.type())
  const likes = (release.ID_LIKE ?? '')
    .split(/\s+/)
    .map((like) => OS_NAMES[like])
    .filter((like) => like !== undefined)
  const family = OS_FAMILIES[name] ?? (likes[0] === undefined ? name : (OS_FAMILIES[likes[0]] ?? likes[0]))
  return { name, family }
}

/** Salt's `osrelease`: Debian's point release lives in /etc/debian_version ("12.5"); os-release only has "12". */
function osReleaseOf(name: string, release: Record<string, string>): string {
  const debianVersion = name === 'Debian' ? readText('/etc/debian_version')?.trim() : undefined
  return debianVersion !== undefined && /^\d+(\.\d+)*$/.test(debianVersion) ? debianVersion : (release.VERSION_ID ?? '')
}

function osGrains(): Grains {
  const release = parseOsRelease(readText('/etc/os-release') ?? readText('/usr/lib/os-release') ?? '')
  const { name, family } = osIdentity(release)
  const osrelease = osReleaseOf(name, release)
  const releaseInfo = osrelease
    .split('.')
    .map((part) => Number.parseInt(part, 10))
    .filter((part) => Number.isFinite(part))
  const major = releaseInfo[0]
  // Salt reports Debian's NAME ("Debian GNU/Linux") as lsb_release does: "Debian".
  const fullname = (release.NAME ?? name).replace(/ GNU\/Linux$/, '')
  const codename = release.VERSION_CODENAME ?? /\(([^)]+)\)/.exec(release.VERSION ?? '')?.[1] ?? ''
  const cpuarch = os.machine()
  const grains: Grains = {
    os: name,
    os_family: family,
    oscodename: codename,
    osrelease,
    osrelease_info: releaseInfo,
    osfullname: fullname,
    osarch: family === 'Debian' ? (DEBIAN_ARCH[cpuarch] ?? cpuarch) : cpuarch,
    lsb_distrib_id: fullname,
    lsb_distrib_release: release.VERSION_ID ?? osrelease,
    lsb_distrib_codename: codename,
    lsb_distrib_description: release.PRETTY_NAME ?? fullname,
  }
  if (major !== undefined) {
    grains.osmajorrelease = major
    grains.osfinger = `${fullname}-${major}`
  }
  return grains
}

function networkGrains(): Grains {
  const ipv4 = new Set<string>()
  const ipv6 = new Set<string>()
  const ip4Interfaces: Record<string, string[]> = {}
  const ip6Interfaces: Record<string, string[]> = {}
  const ipInterfaces: Record<string, string[]> = {}
  const hwaddr: Record<string, string> = {}
  for (const [name, addresses] of Object.entries(os.networkInterfaces())) {
    ip4Interfaces[name] = []
    ip6Interfaces[name] = []
    for (const address of addresses ?? []) {
      const family = String(address.family)
      // Salt lists link-local v6 addresses without their zone.
      const ip = address.address.split('%')[0] as string
      if (family === 'IPv4' || family === '4') {
        ipv4.add(ip)
        ip4Interfaces[name].push(ip)
      } else {
        ipv6.add(ip)
        ip6Interfaces[name].push(ip)
      }
      hwaddr[name] = address.mac
    }
    ipInterfaces[name] = [...ip4Interfaces[name], ...ip6Interfaces[name]]
  }
  return {
    ipv4: [...ipv4].sort(),
    ipv6: [...ipv6].sort(),
    ip4_interfaces: ip4Interfaces,
    ip6_interfaces: ip6Interfaces,
    ip_interfaces: ipInterfaces,
    hwaddr_interfaces: hwaddr,
  }
}

/**
 * The fully qualified name without a DNS query (which could hang a minion start): the hostname if
 * it already has a dot, else the first dotted name /etc/hosts gives that host.
 */
function fqdnOf(hostname: string): string {
  if (hostname.includes('.')) return hostname
  for (const line of (readText('/etc/hosts') ?? '').split('\n')) {
    const names = line.replace(/#.*/, '').trim().split(/\s+/).slice(1)
    if (names.includes(hostname)) {
      const dotted = names.find((name) => name.includes('.') && name.startsWith(`${hostname}.`))
      if (dotted !== undefined) return dotted
    }
  }
  return hostname
}

function groupName(gid: number): string {
  for (const line of (readText('/etc/group') ?? '').split('\n')) {
    const [name, , id] = line.split(':')
    if (name !== undefined && id !== undefined && Number(id) === gid) return name
  }
  return String(gid)
}

function memoryGrains(): Grains {
  const swap = /^SwapTotal:\s+(\d+)\s+kB/m.exec(readText('/proc/meminfo') ?? '')
  return {
    mem_total: Math.floor(os.totalmem() / 1024 / 1024),
    swap_total: swap === null ? 0 : Math.floor(Number(swap[1]) / 1024),
  }
}

function virtualGrains(): Grains {
  if (existsSync('/.dockerenv')) return { virtual: 'container', virtual_subtype: 'Docker' }
  if (existsSync('/run/.containerenv')) return { virtual: 'container', virtual_subtype: 'Podman' }
  const product = `${readText('/sys/class/dmi/id/product_name') ?? ''} ${readText('/sys/class/dmi/id/sys_vendor') ?? ''}`
  if (/KVM|QEMU/i.test(product)) return { virtual: 'kvm' }
  if (/VMware/i.test(product)) return { virtual: 'VMware' }
  if (/VirtualBox/i.test(product)) return { virtual: 'VirtualBox' }
  if (/Microsoft Corporation/i.test(product)) return { virtual: 'VirtualPC' }
  return { virtual: 'physical' }
}

/**
 * The core grains that are this host's facts (os, kernel, cpus, memory, network, user…): the same for every
 * minion the host runs, so a process running many of them (the bench's swarm) computes them once.
 */
export function hostGrains(): Grains {
  const hostname = os.hostname()
  const fqdn = fqdnOf(hostname)
  const dot = fqdn.indexOf('.')
  const user = os.userInfo()
  const cpus = os.cpus()
  const machineId = (readText('/etc/machine-id') ?? readText('/var/lib/dbus/machine-id'))?.trim()
  const grains: Grains = {
    ...osGrains(),
    kernel: os.type(),
    kernelrelease: os.release(),
    kernelversion: os.version(),
    cpuarch: os.machine(),
    num_cpus: Math.max(1, cpus.length || os.availableParallelism()),
    cpu_model: cpus[0]?.model.trim() ?? 'unknown',
    ...memoryGrains(),
    ...networkGrains(),
    fqdn,
    host: dot === -1 ? fqdn : fqdn.slice(0, dot),
    domain: dot === -1 ? '' : fqdn.slice(dot + 1),
    localhost: hostname,
    nodename: hostname,
    ...virtualGrains(),
    saltversion: brineVersion(),
    saltversioninfo: brineVersionInfo(),
    path: process.env.PATH ?? '',
    shell: process.env.SHELL ?? '/bin/sh',
    username: user.username,
    uid: user.uid,
    gid: user.gid,
    groupname: groupName(user.gid),
    pid: process.pid,
    cwd: process.cwd(),
    nodejsversion: process.versions.node,
  }
  if (machineId !== undefined && machineId !== '') grains.machine_id = machineId
  return grains
}

/**
 * Salt's core grains for minion `id`: the host's facts ({@link hostGrains}, computed now unless `host` is given:
 * each minion then gets its own deep copy, so one minion's grains never change another's), then its `id` and `master`.
 * No static or persisted grains.
 */
export function coreGrains(id: string, opts: MinionOpts = {}, host?: Grains): Grains {
  const grains: Grains = { id, ...(host === undefined ? hostGrains() : structuredClone(host)) }
  if (typeof opts.master === 'string' || Array.isArray(opts.master)) grains.master = opts.master
  return grains
}

/**
 * Reads grains persisted by grains.setval. The file is JSON as Brine writes it; a hand-written
 * file of top-level `key: scalar` YAML lines is read too. A file that cannot be read is reported
 * as a CommandExecutionError naming it.
 */
export async function readPersistedGrains(path: string): Promise<Grains> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new CommandExecutionError(`cannot read grains file ${path}: ${(error as Error).message}`, { file: path }, { cause: error })
  }
  if (text.trim() === '') return {}
  try {
    const parsed: unknown = JSON.parse(text)
    if (isPlainObject(parsed)) return parsed
    throw new CommandExecutionError(`grains file ${path} does not hold a mapping`, { file: path })
  } catch (error) {
    if (error instanceof CommandExecutionError) throw error
  }
  const grains: Grains = {}
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '' || line.trimStart().startsWith('#')) return
    const match = /^([^\s:#][^:]*):\s*(.*)$/.exec(line)
    if (match === null) {
      throw new CommandExecutionError(`grains file ${path}:${index + 1}: only JSON or 'key: value' lines are supported`, { file: path, line: index + 1 })
    }
    const raw = (match[2] as string).replace(/\s+#.*$/, '')
    const quoted = /^(['"])(.*)\1$/.exec(raw)
    grains[(match[1] as string).trim()] = quoted === null ? resolveSaltScalar(raw) : quoted[2]
  })
  return grains
}

async function writePersistedGrains(path: string, grains: Grains): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  // Write then rename, so a crash never leaves a half-written grains file behind (nor a failed write its temporary file).
  await writeFileAtomic(path, `${JSON.stringify(grains, null, 2)}\n`, { mode: 0o644 })
}

/**
 * All grains for a minion, as Salt layers them: core grains (the host's facts from `host` when given, see
 * {@link coreGrains}), then the static `grains` from the minion config, then those persisted by grains.setval
 * (which win, so a setval survives restart).
 */
export async function collectGrains(id: string, opts: MinionOpts = {}, host?: Grains): Promise<Grains> {
  const grains = coreGrains(id, opts, host)
  if (isPlainObject(opts.grains)) Object.assign(grains, opts.grains)
  const path = grainsFilePath(opts)
  if (path !== undefined) Object.assign(grains, await readPersistedGrains(path))
  return grains
}

/** Replaces the shared grains object's contents in place, so every holder sees the new values. */
export function replaceGrains(target: Grains, fresh: Grains): void {
  for (const key of Object.keys(target)) if (!Object.hasOwn(fresh, key)) delete target[key]
  Object.assign(target, fresh)
}

/** grains.setvals: sets in memory and in the persisted file; returns what was set. */
export async function setGrains(ctx: Pick<JobContext, 'grains' | 'opts'>, values: Record<string, unknown>): Promise<Record<string, unknown>> {
  const path = grainsFilePath(ctx.opts)
  if (path !== undefined) {
    const persisted = await readPersistedGrains(path)
    await writePersistedGrains(path, { ...persisted, ...values })
  }
  Object.assign(ctx.grains, values)
  return values
}

const DEFAULT_DELIMITER = ':'

export const grainsModule: ModuleDefinition = {
  items: {
    doc: "Return all of the minion's grains\n\nCLI Example:\n\n    brine '*' grains.items",
    args: ['sanitize'],
    defaults: { sanitize: false },
    run: async (_args, _kwargs, ctx) => ({ ...ctx.grains }),
  },
  item: {
    doc: "Return one or more grains. Nested grains are addressed as 'key:subkey'; missing grains are ''.\n\nCLI Example:\n\n    brine '*' grains.item os\n    brine '*' grains.item os osrelease oscodename",
    varargs: true,
    kwargs: true,
    run: async (args, kwargs, ctx) => {
      const fallback = Object.hasOwn(kwargs, 'default') ? kwargs.default : ''
      const delimiter = typeof kwargs.delimiter === 'string' ? kwargs.delimiter : DEFAULT_DELIMITER
      return Object.fromEntries(args.map((key) => [String(key), traverseDictAndList(ctx.grains, String(key), fallback, delimiter)]))
    },
  },
  get: {
    doc: "Attempt to retrieve the named value from grains, if the named value is not available return the passed default. Nested values are addressed with the delimiter ('apache:user').\n\nCLI Example:\n\n    brine '*' grains.get pkg:apache\n    brine '*' grains.get abc::def|ghi delimiter='|'",
    args: ['key', 'default', 'delimiter', 'ordered'],
    defaults: { default: '', delimiter: DEFAULT_DELIMITER, ordered: true },
    run: async ([key, fallback, delimiter], _kwargs, ctx) =>
      traverseDictAndList(ctx.grains, String(key), fallback, typeof delimiter === 'string' ? delimiter : DEFAULT_DELIMITER),
  },
  ls: {
    doc: "Return a list of all available grains\n\nCLI Example:\n\n    brine '*' grains.ls",
    run: async (_args, _kwargs, ctx) => Object.keys(ctx.grains).sort(),
  },
  setval: {
    doc: "Set a grains value in the grains config file (<cachedir>/grains), so it survives a restart.\n\nCLI Example:\n\n    brine '*' grains.setval key val\n    brine '*' grains.setval key \"{'sub-key': 'val', 'sub-key2': 'val2'}\"",
    args: ['key', 'val', 'destructive', 'refresh_pillar'],
    defaults: { destructive: false, refresh_pillar: true },
    run: async ([key, val], _kwargs, ctx) => {
      if (typeof key !== 'string' || key === '') throw new InvocationError('grains.setval needs a non-empty key')
      return setGrains(ctx, { [key]: val })
    },
  },
  setvals: {
    doc: "Set new grains values in the grains config file\n\nCLI Example:\n\n    brine '*' grains.setvals \"{'key1': 'val1', 'key2': 'val2'}\"",
    args: ['grains', 'destructive', 'refresh_pillar'],
    defaults: { destructive: false, refresh_pillar: true },
    run: async ([values], _kwargs, ctx) => {
      if (!isPlainObject(values)) throw new InvocationError('setvals grains must be a dictionary.')
      return setGrains(ctx, values)
    },
  },
}
