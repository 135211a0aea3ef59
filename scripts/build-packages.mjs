#!/usr/bin/env node
// Builds every package as `lerna run build` does (each package's own `build` script, a package after the @brine
// packages it depends on, as many at once as the machine has cores), without lerna, nx and an `npm run` per package:
// those cost about twice the CPU of the builds themselves (docs/performance.md, "npm in the test run"). The build
// that `npm ci` (prepare), `npm run demo` and `npm test` run (scripts/quiet-build.mjs); `npm run build` is lerna's.
//
//   node scripts/build-packages.mjs
//
// Each script runs in its package's directory under `sh -c`, with the package's and the root's node_modules/.bin
// first on PATH, as `npm run` runs it. Prints each package's output when it ends, prefixed with its name; stops
// starting builds after the first failure and exits with its code.
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

/** The packages with a build script: name, directory, script, and the names of the @brine packages it depends on. */
function buildablePackages() {
  const packages = []
  for (const entry of readdirSync(join(root, 'packages')).sort()) {
    const dir = join(root, 'packages', entry)
    const manifestPath = join(dir, 'package.json')
    if (!existsSync(manifestPath)) continue
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
    const fields = ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies']
    const deps = new Set(fields.flatMap((field) => Object.keys(manifest[field] ?? {})))
    packages.push({ name: manifest.name, dir, script: manifest.scripts?.build, deps })
  }
  // Only workspace packages order the builds (a package without a build script orders nothing).
  const built = new Set(packages.filter((pkg) => pkg.script !== undefined).map((pkg) => pkg.name))
  return packages.filter((pkg) => pkg.script !== undefined).map((pkg) => ({ ...pkg, deps: [...pkg.deps].filter((dep) => built.has(dep)) }))
}

/** Runs one package's build script as `npm run build` would; resolves with its exit code and output. */
function runBuild(pkg) {
  return new Promise((resolve) => {
    const path = [join(pkg.dir, 'node_modules/.bin'), join(root, 'node_modules/.bin'), process.env.PATH ?? ''].join(delimiter)
    const child = spawn('sh', ['-c', pkg.script], { cwd: pkg.dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: path } })
    const chunks = []
    child.stdout.on('data', (chunk) => chunks.push(chunk))
    child.stderr.on('data', (chunk) => chunks.push(chunk))
    child.once('error', (error) => chunks.push(Buffer.from(`${error.message}\n`)))
    child.once('close', (code, signal) => resolve({ code: code ?? (signal === null ? 1 : 128), output: Buffer.concat(chunks).toString('utf8') }))
  })
}

/** Prints a finished build's output, each line prefixed with the package's name (as lerna prefixes it). */
function report(pkg, result) {
  const lines = result.output.split('\n').filter((line) => line !== '')
  const out = result.code === 0 ? process.stdout : process.stderr
  for (const line of lines) out.write(`${pkg.name}: ${line}\n`)
  if (result.code !== 0) out.write(`${pkg.name}: build failed (exit code ${result.code})\n`)
}

/**
 * The number of builds that wait on each package, one after another at the most: the packages that head the longest
 * chains start first, so that the chain through the layers (core, transport, … cli) never waits for a side branch.
 */
function chainLengths(packages) {
  const lengths = new Map()
  const dependents = (name) => packages.filter((pkg) => pkg.deps.includes(name))
  const length = (name, seen = new Set()) => {
    if (lengths.has(name)) return lengths.get(name)
    if (seen.has(name)) return 0
    seen.add(name)
    const longest = Math.max(0, ...dependents(name).map((pkg) => 1 + length(pkg.name, seen)))
    lengths.set(name, longest)
    return longest
  }
  for (const pkg of packages) length(pkg.name)
  return lengths
}

/** Builds `packages` in dependency order, `width` at a time; resolves with the first failure's code, or 0. */
async function buildAll(packages, width) {
  const chains = chainLengths(packages)
  const done = new Set()
  const pending = [...packages].sort((a, b) => chains.get(b.name) - chains.get(a.name))
  const running = new Map()
  let failed = 0
  while (pending.length > 0 || running.size > 0) {
    while (failed === 0 && running.size < width) {
      const index = pending.findIndex((pkg) => pkg.deps.every((dep) => done.has(dep)))
      if (index < 0) break
      const [pkg] = pending.splice(index, 1)
      running.set(
        pkg.name,
        runBuild(pkg).then((result) => ({ pkg, result })),
      )
    }
    if (running.size === 0) {
      // Nothing can start: a failure stopped the rest, or the dependencies form a cycle.
      if (failed === 0) {
        process.stderr.write(`build-packages: a dependency cycle among ${pending.map((pkg) => pkg.name).join(', ')}\n`)
        failed = 1
      }
      break
    }
    const { pkg, result } = await Promise.race(running.values())
    running.delete(pkg.name)
    report(pkg, result)
    if (result.code === 0) done.add(pkg.name)
    else if (failed === 0) failed = result.code
  }
  return failed
}

process.exit(await buildAll(buildablePackages(), availableParallelism()))
