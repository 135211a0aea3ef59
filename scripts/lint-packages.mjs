#!/usr/bin/env node
// Checks what review keeps missing: every package has the same small set of files, package.json is
// publishable, and imports follow DESIGN.md §1 (a package depends only on packages below it; daemons
// never import a concrete transport). Exits 1 with one line per problem.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
/**
 * DESIGN.md §1's order: lower layers first. A package may import only from a strictly lower layer. Within DESIGN's
 * "crypt, common" tier, common sits below crypt so crypt can share common's fnmatch instead of keeping a twin.
 * Within the "master, minion, client, returners" tier, returners sits below master: the master opens the job cache
 * `master_job_cache` names itself (returners implements common's JobCache and needs nothing of the master).
 */
const LAYERS = [
  ['transport'],
  ['transport-compliance', 'transport-zeromq', 'transport-tcp'],
  ['common'],
  ['crypt'],
  ['returners'],
  ['master', 'minion', 'client'],
  ['syndic', 'api'],
  ['cli', 'bench'],
]
/** Exceptions DESIGN.md names: common is the composition root that registers the built-in transports. */
const ALLOWED = new Set(['common->transport-zeromq', 'common->transport-tcp'])
const DAEMONS = new Set(['master', 'minion', 'syndic', 'client', 'returners', 'api', 'cli', 'bench'])
const REQUIRED = ['README.md', 'package.json', 'tsconfig.json', 'tsup.config.ts', 'src/index.ts']

const layerOf = (name) => LAYERS.findIndex((layer) => layer.includes(name))
const problems = []

function* sourceFiles(dir) {
  if (!existsSync(dir)) return
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) yield* sourceFiles(path)
    else if (/\.(ts|mts|js|mjs)$/.test(entry)) yield path
  }
}

for (const name of readdirSync(join(root, 'packages')).sort()) {
  const dir = join(root, 'packages', name)
  if (!existsSync(join(dir, 'package.json'))) continue
  for (const file of REQUIRED) if (!existsSync(join(dir, file))) problems.push(`packages/${name}: missing ${file}`)
  const tests = [...sourceFiles(join(dir, 'test'))].filter((f) => f.endsWith('.test.ts'))
  if (tests.length === 0) problems.push(`packages/${name}: no test/*.test.ts`)
  if (layerOf(name) < 0) problems.push(`packages/${name}: not placed in a layer of scripts/lint-packages.mjs (DESIGN.md §1)`)

  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (pkg.name !== `@brine/${name}`) problems.push(`packages/${name}: package name is ${pkg.name}, expected @brine/${name}`)
  const dot = pkg.exports?.['.']
  if (dot === undefined || Object.keys(dot)[0] !== 'types') problems.push(`packages/${name}: exports["."] must list "types" first`)
  for (const [dep, range] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
    if (String(range).startsWith('workspace:')) problems.push(`packages/${name}: ${dep} uses ${range}; npm needs a version or "*"`)
  }
  const index = existsSync(join(dir, 'src/index.ts')) ? readFileSync(join(dir, 'src/index.ts'), 'utf8') : ''
  if (!index.includes('@packageDocumentation')) problems.push(`packages/${name}: src/index.ts lacks a @packageDocumentation block`)

  for (const file of sourceFiles(join(dir, 'src'))) {
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(/(?:from\s+|import\(\s*)['"]@brine\/([a-z-]+)['"]/g)) {
      const target = match[1]
      const where = file.slice(root.length)
      if (target === name) problems.push(`${where}: imports its own package by name`)
      else if (DAEMONS.has(name) && target.startsWith('transport-')) {
        problems.push(`${where}: ${name} imports @brine/${target}; daemons ask the registry (getTransport) instead`)
      } else if (!ALLOWED.has(`${name}->${target}`) && layerOf(target) >= layerOf(name)) {
        problems.push(`${where}: @brine/${name} may not import @brine/${target} (DESIGN.md §1 order)`)
      } else if (!(pkg.dependencies ?? {})[`@brine/${target}`] && !(pkg.peerDependencies ?? {})[`@brine/${target}`]) {
        problems.push(`${where}: imports @brine/${target}, which package.json does not list in dependencies`)
      }
    }
  }
}

if (problems.length > 0) {
  process.stderr.write(`lint-packages: ${problems.length} problem(s)\n${problems.map((p) => `  ${p}`).join('\n')}\n`)
  process.exit(1)
}
process.stderr.write('lint-packages: every package is complete and imports only from below it\n')
