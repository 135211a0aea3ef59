#!/usr/bin/env node
// Packs Brine for installation on another machine: `npm pack` of @brine/cli and every @brine package it needs,
// each tarball carrying its third-party dependencies (bundleDependencies) exactly as this repository's
// package-lock.json tested them, native addons included (msgpackr's optional extractor). A user then runs
//
//   npm install -g ./brine-*.tgz
//
// on a host with nothing but Node 20 and npm, and gets every brine* command on the PATH. The install needs no
// registry, no cache and no compiler: npm 11's registry look-ups need full package metadata, which `npm ci`
// does not cache, so a plain `npm pack` tarball could not be installed offline from that cache.
//
//   node scripts/pack.mjs <destination directory>     (npm run pack -- <dir>)
//
// Prints the tarballs' paths, one per line, on stdout. The build must be current (`npm run build`).
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'))
const manifestOf = (name) => JSON.parse(readFileSync(join(root, 'packages', name.replace('@brine/', ''), 'package.json'), 'utf8'))

/** @brine/cli and every @brine package it depends on, directly or not. */
export function packageClosure(start = '@brine/cli') {
  const seen = new Set()
  const visit = (name) => {
    if (seen.has(name)) return
    seen.add(name)
    for (const dep of Object.keys(manifestOf(name).dependencies ?? {})) if (dep.startsWith('@brine/')) visit(dep)
  }
  visit(start)
  return [...seen]
}

/** The lock path a dependency `name` of the package at `from` resolves to, as Node walks node_modules upward. */
function resolveIn(from, name) {
  for (let base = from; ;) {
    const candidate = `${base === '' ? '' : `${base}/`}node_modules/${name}`
    if (lock.packages[candidate] !== undefined) return candidate
    if (base === '') return undefined
    const index = base.lastIndexOf('/node_modules/')
    base = index >= 0 ? base.slice(0, index) : ''
  }
}

function edgesOf(entry) {
  const edges = []
  for (const name of Object.keys(entry.dependencies ?? {})) edges.push({ name, optional: false })
  for (const name of Object.keys(entry.optionalDependencies ?? {})) edges.push({ name, optional: true })
  for (const name of Object.keys(entry.peerDependencies ?? {})) edges.push({ name, optional: entry.peerDependenciesMeta?.[name]?.optional === true })
  return edges
}

/**
 * The third-party dependency tree of one workspace package as the lock file has it, laid out from the package's
 * own root: a map from the path in the repository to the path inside the package (`node_modules/...`).
 * @brine packages are left out: they are installed from their own tarballs beside it. Optional dependencies
 * that are not installed here (other platforms' builds of msgpackr-extract) are left out too.
 */
export function dependencyLayout(packageName) {
  const from = `packages/${packageName.replace('@brine/', '')}`
  const self = lock.packages[from]
  if (self === undefined) throw new Error(`${from} is not in package-lock.json; run npm install`)
  const seen = new Set()
  const walk = (path, entry) => {
    for (const edge of edgesOf(entry)) {
      if (edge.name.startsWith('@brine/')) continue
      const target = resolveIn(path, edge.name)
      if (target === undefined || !existsSync(join(root, target))) {
        if (edge.optional) continue
        throw new Error(`${path}: dependency ${edge.name} is not installed; run npm ci`)
      }
      if (seen.has(target)) continue
      seen.add(target)
      walk(target, lock.packages[target])
    }
  }
  walk(from, self)
  const layout = new Map()
  const taken = new Map()
  for (const path of [...seen].sort()) {
    // The package's own nested node_modules become its top level.
    const to = path.startsWith(`${from}/`) ? path.slice(from.length + 1) : path
    if (taken.has(to)) throw new Error(`${packageName}: ${taken.get(to)} and ${path} would both live at ${to}`)
    taken.set(to, path)
    layout.set(path, to)
  }
  const direct = Object.keys({ ...self.dependencies, ...self.optionalDependencies }).filter((name) => !name.startsWith('@brine/'))
  return { layout, direct: direct.filter((name) => layout.has(resolveIn(from, name) ?? '')) }
}

/**
 * Lays out one package for packing with its dependencies bundled: its npm pack tarball unpacked, given
 * node_modules and bundleDependencies. Returns the directory to pack again.
 */
function stageBundled(name, plainTarball, staging) {
  const dir = join(staging, basename(plainTarball, '.tgz'))
  mkdirSync(dir, { recursive: true })
  execFileSync('tar', ['-xzf', plainTarball, '-C', dir])
  const packageDir = join(dir, 'package')
  const { layout, direct } = dependencyLayout(name)
  for (const [path, to] of layout) {
    // Each lock entry is copied without its nested node_modules, which are entries of their own.
    const source = join(root, path)
    cpSync(source, join(packageDir, to), {
      recursive: true,
      filter: (file) => file === source || !file.slice(source.length).split('/').includes('node_modules'),
    })
  }
  const manifestPath = join(packageDir, 'package.json')
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
  manifest.bundleDependencies = direct.sort()
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`)
  return packageDir
}

function main() {
  const destination = process.argv[2]
  if (destination === undefined) {
    process.stderr.write('usage: node scripts/pack.mjs <destination directory>\n')
    process.exit(2)
  }
  const dest = isAbsolute(destination) ? destination : resolve(process.cwd(), destination)
  const names = packageClosure()
  for (const name of names) {
    const dist = join(root, 'packages', name.replace('@brine/', ''), 'dist')
    if (!existsSync(dist)) throw new Error(`${name} is not built (${dist} is missing); run npm run build first`)
  }
  mkdirSync(dest, { recursive: true })
  const staging = mkdtempSync(join(tmpdir(), 'brine-pack-'))
  try {
    const output = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', staging, ...names.flatMap((name) => ['-w', name])], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const dirs = JSON.parse(output).map((packed) => stageBundled(packed.name, join(staging, packed.filename), staging))
    // One npm for every package's second pack (a folder spec each, from outside the workspace): an npm process
    // per package cost about a second of CPU each.
    const bundled = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dest, ...dirs], {
      cwd: staging,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    for (const packed of JSON.parse(bundled)) process.stdout.write(`${join(dest, packed.filename)}\n`)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main()
