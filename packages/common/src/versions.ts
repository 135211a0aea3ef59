import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { arch, machine, release, type, version as osVersion } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** A package to report, found from the start directory through `via` (each a package found from the previous one). */
export interface ReportedDependency {
  name: string
  via?: readonly string[]
}

export interface VersionsReportOptions {
  /** Brine's version, as `--version` prints it. */
  version: string
  /** Where package look-ups start: a file URL or path inside the calling package (default: this module). */
  from?: string
  /** Packages to report beside the ones every daemon loads (e.g. the CLI's commander). */
  dependencies?: readonly ReportedDependency[]
}

/** Salt's sections, in Salt's order; a null value prints as `Not Installed`. */
export type VersionsReport = Array<[section: string, entries: Record<string, string | null>]>

/**
 * What every Brine process loads, found the way Node would find it from this package: each dependency is
 * looked up from the package that depends on it, so an `npm install -g` copy (where each package keeps its
 * own node_modules) reports what it really runs.
 */
const DEPENDENCIES: readonly ReportedDependency[] = [
  { name: 'msgpackr', via: ['@brine/core'] },
  { name: 'msgpackr-extract', via: ['@brine/core', 'msgpackr'] },
  { name: 'pg', via: ['@brine/returners'] },
  { name: 'tweetnacl', via: ['@brine/crypt'] },
  { name: 'yaml', via: ['@brine/config'] },
]

/** The directory of `name` as Node resolves it from `fromDir` (walking up through node_modules), or undefined. */
export function findPackageDir(name: string, fromDir: string): string | undefined {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate)
    if (dirname(dir) === dir) return undefined
  }
}

function readVersion(dir: string): string | null {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: unknown }
    return typeof manifest.version === 'string' ? manifest.version : null
  } catch {
    return null
  }
}

function resolveChain(dependency: ReportedDependency, start: string): string | undefined {
  let dir: string | undefined = start
  for (const name of [...(dependency.via ?? []), dependency.name]) {
    if (dir === undefined) return undefined
    dir = findPackageDir(name, dir)
  }
  return dir
}

/** /etc/os-release as Salt's `dist` and `version` lines show it. */
function distribution(): { dist: string | null; version: string } {
  try {
    const fields = new Map<string, string>()
    for (const line of readFileSync('/etc/os-release', 'utf8').split('\n')) {
      const match = /^([A-Z_]+)=(.*)$/.exec(line)
      if (match !== null) fields.set(match[1]!, match[2]!.replace(/^"(.*)"$/, '$1'))
    }
    const dist = [fields.get('ID'), fields.get('VERSION_ID'), fields.get('VERSION_CODENAME')].filter((part) => part !== undefined && part !== '').join(' ')
    return { dist: dist === '' ? null : dist, version: fields.get('PRETTY_NAME') ?? osVersion() }
  } catch {
    return { dist: null, version: osVersion() }
  }
}

/**
 * Salt's `--versions-report`: Brine's version, Node's, the libraries Brine loads (msgpackr, yaml, tweetnacl, pg,
 * plus `dependencies`) and the system's. No libzmq: both ends of the ZeroMQ transport speak ZMTP on node:net.
 */
export function collectVersions(options: VersionsReportOptions): VersionsReport {
  const here = dirname(fileURLToPath(import.meta.url))
  const start = options.from === undefined ? here : dirname(options.from.startsWith('file:') ? fileURLToPath(options.from) : options.from)
  const found = new Map<string, string | undefined>()
  for (const dependency of DEPENDENCIES) found.set(dependency.name, resolveChain(dependency, here))
  for (const dependency of options.dependencies ?? []) found.set(dependency.name, resolveChain(dependency, start))
  const dependencies: Record<string, string | null> = {}
  for (const [name, dir] of found) dependencies[name] = dir === undefined ? null : readVersion(dir)
  dependencies.OpenSSL = process.versions.openssl ?? null
  dependencies.libuv = process.versions.uv ?? null
  dependencies.V8 = process.versions.v8 ?? null
  const { dist, version } = distribution()
  const locale = process.env.LC_ALL || process.env.LC_CTYPE || process.env.LANG || Intl.DateTimeFormat().resolvedOptions().locale
  return [
    ['Brine Version', { Brine: options.version }],
    ['Node Version', { Node: process.versions.node }],
    ['Dependency Versions', dependencies],
    ['System Versions', { dist, locale, machine: typeof machine === 'function' ? machine() : arch(), release: release(), system: type(), version }],
  ]
}

/** Prints a report as Salt does: a heading per section, names right-aligned, sorted without regard to case. */
export function formatVersionsReport(report: VersionsReport): string {
  const width = Math.max(...report.flatMap(([, entries]) => Object.keys(entries).map((name) => name.length))) + 1
  const lines: string[] = []
  for (const [section, entries] of report) {
    lines.push(`${section}:`)
    for (const name of Object.keys(entries).sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase()))) {
      lines.push(`${name.padStart(width)}: ${entries[name] ?? 'Not Installed'}`)
    }
    lines.push(' ')
  }
  return `${lines.join('\n')}\n`
}
