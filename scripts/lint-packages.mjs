#!/usr/bin/env node
// Checks what review keeps missing: every package has the same small set of files, package.json is
// publishable, and imports follow DESIGN.md §1 (a package depends only on packages below it; daemons
// never import a concrete transport). Inside @brine/transport the contract (src/contract/) imports
// nothing from the runtime (src/runtime/). The test kit stays a test kit: only tests, test-e2e/,
// scripts/, the harness, the bench and the compliance suite import @brine/testkit, only tests, test-e2e/,
// scripts/ and the bench import the process harness @brine/harness, no other package exports one of
// their helpers (ports, processes, Fleet), and the demo and the e2e tests do not depend on the bench.
// Exits 1 with one line per problem.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

const root = new URL('..', import.meta.url).pathname
/**
 * DESIGN.md §1's order: lower layers first. A package may import only from a strictly lower layer. In DESIGN's
 * "crypt, config/protocol/targeting" tier, config and protocol stand on core (config on the transport contract
 * too), targeting on protocol's target shapes, and common (the composition they share: the transport
 * registration, the job cache's interface, the return collector, schedules) on all three; crypt shares
 * targeting's fnmatch instead of keeping a twin. Within the "master, minion, client, returners" tier, returners
 * sits below master: the master opens the job cache `master_job_cache` names itself (returners implements
 * common's JobCache and needs nothing of the master).
 */
const LAYERS = [
  // Errors and their registry, the logger, queues, the codec and frame bounds: what every package stands on.
  ['core'],
  ['transport'],
  // The test kit sits just above the contract and depends on nothing else of Brine's, so the compliance suite
  // (and through it every package's tests) can use it without a cycle.
  ['testkit'],
  ['transport-compliance', 'transport-zeromq', 'transport-tcp', 'transport-nats'],
  // Salt's config keys and units; the protocol's loads, tags and jids: neither needs the other.
  ['config', 'protocol'],
  ['targeting'],
  ['common'],
  ['crypt'],
  ['returners'],
  // A minion's link to its masters: the minion and the syndic both stand on it.
  ['link'],
  ['master', 'minion', 'client'],
  // The web console's package imports nothing of Brine's (its app speaks HTTP); it sits just below the API,
  // which serves its built assets.
  ['console'],
  ['syndic', 'api'],
  ['cli'],
  // The process harness runs the CLI's commands, resolved as a package; the bench runs on its Fleet.
  ['harness'],
  ['bench'],
]
/** Exceptions DESIGN.md names: common is the composition root that registers the built-in transports. */
const ALLOWED = new Set(['common->transport-zeromq', 'common->transport-tcp', 'common->transport-nats'])
const DAEMONS = new Set(['link', 'master', 'minion', 'syndic', 'client', 'returners', 'api', 'cli', 'harness', 'bench'])
const REQUIRED = ['README.md', 'package.json', 'tsconfig.json', 'tsup.config.ts', 'src/index.ts']
/** The packages whose src/ may import the test kit: the harness and the bench start processes, the compliance suite is test code. */
const TESTKIT_USERS = new Set(['harness', 'bench', 'transport-compliance'])
/** The packages whose src/ may import the process harness: the bench runs on its Fleet. */
const HARNESS_USERS = new Set(['bench'])
/** The test packages' modules whose exported names no other package may export (nothing else ships a test helper). */
const TEST_HELPER_MODULES = ['testkit/src/ports.ts', 'testkit/src/processes.ts', 'harness/src/fleet.ts']
const TEST_PACKAGES = new Set(['testkit', 'harness'])
/** Where code outside packages/ lives, and the packages it must not depend on. */
const OUTSIDE = [
  { dir: 'scripts', forbidden: ['bench'] },
  { dir: 'test-e2e', forbidden: ['bench'] },
]

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

const IMPORT = /(?:from\s+|import\(\s*|^import\s+)['"]([^'"]+)['"]/gm
/** Names of the values (functions, classes, constants) a module exports: the helpers; types are not. */
const exportedNames = (text) =>
  [...text.matchAll(/^export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let)\s+([A-Za-z_$][\w$]*)/gm)].map((m) => m[1])
const reexportedNames = (text) =>
  [...text.matchAll(/^export\s+\{([^}]*)\}/gm)].flatMap((m) =>
    m[1]
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part !== '' && !part.startsWith('type '))
      .map((part) => part.split(/\s+as\s+/).pop()),
  )

const testkitHelpers = new Set()
for (const module of TEST_HELPER_MODULES) {
  const file = join(root, 'packages', module)
  if (existsSync(file)) for (const name of exportedNames(readFileSync(file, 'utf8'))) testkitHelpers.add(name)
}

// @brine/transport: the contract and the runtime, one folder each; the contract imports nothing from the runtime.
const transportSrc = join(root, 'packages/transport/src')
for (const file of sourceFiles(transportSrc)) {
  const where = file.slice(root.length)
  const folder = relative(transportSrc, file).split('/')[0]
  if (folder !== 'contract' && folder !== 'runtime' && folder !== 'index.ts')
    problems.push(`${where}: @brine/transport keeps its code in src/contract/ or src/runtime/`)
  if (folder !== 'contract') continue
  for (const [, target] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    if (target.startsWith('.') && relative(transportSrc, resolve(dirname(file), target)).split('/')[0] !== 'contract') {
      problems.push(`${where}: the contract imports ${target}; src/contract/ imports nothing from the runtime`)
    }
  }
}

// Code outside packages/: the demo and the e2e tests run on the test kit and the harness, not the bench.
for (const { dir, forbidden } of OUTSIDE) {
  for (const file of sourceFiles(join(root, dir))) {
    for (const [, target] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const name = target.startsWith('@brine/') ? target.slice('@brine/'.length) : undefined
      if (name !== undefined && forbidden.includes(name)) problems.push(`${file.slice(root.length)}: imports @brine/${name}; use @brine/harness`)
    }
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

  if (name !== 'testkit' && !TESTKIT_USERS.has(name) && (pkg.dependencies ?? {})['@brine/testkit'] !== undefined) {
    problems.push(`packages/${name}: lists @brine/testkit in dependencies; a test kit is a devDependency`)
  }
  if (name !== 'harness' && !HARNESS_USERS.has(name) && (pkg.dependencies ?? {})['@brine/harness'] !== undefined) {
    problems.push(`packages/${name}: lists @brine/harness in dependencies; a process harness is a devDependency`)
  }

  for (const file of sourceFiles(join(dir, 'src'))) {
    const text = readFileSync(file, 'utf8')
    const where = file.slice(root.length)
    if (!TEST_PACKAGES.has(name)) {
      const shipped = [...exportedNames(text), ...reexportedNames(text)].filter((exported) => testkitHelpers.has(exported))
      for (const helper of shipped) problems.push(`${where}: exports ${helper}, a test helper; only @brine/testkit and @brine/harness export it`)
      if (/^export\s+\*\s+from\s+['"]@brine\/(?:testkit|harness)['"]/m.test(text))
        problems.push(`${where}: re-exports a test package; only the test kit and the harness ship test helpers`)
    }
    for (const match of text.matchAll(/(?:from\s+|import\(\s*|^import\s+)['"]@brine\/([a-z-]+)['"]/gm)) {
      const target = match[1]
      if (target === name) problems.push(`${where}: imports its own package by name`)
      else if (target === 'testkit' && !TESTKIT_USERS.has(name)) {
        problems.push(`${where}: imports @brine/testkit; only tests, test-e2e, scripts, the harness, the bench and the compliance suite may`)
      } else if (target === 'harness' && !HARNESS_USERS.has(name)) {
        problems.push(`${where}: imports @brine/harness; only tests, test-e2e, scripts and the bench may`)
      } else if (DAEMONS.has(name) && target.startsWith('transport-')) {
        problems.push(`${where}: ${name} imports @brine/${target}; daemons ask the registry (getTransport) instead`)
      } else if (!ALLOWED.has(`${name}->${target}`) && layerOf(target) >= layerOf(name)) {
        problems.push(`${where}: @brine/${name} may not import @brine/${target} (DESIGN.md §1 order)`)
      } else if (!(pkg.dependencies ?? {})[`@brine/${target}`] && !(pkg.peerDependencies ?? {})[`@brine/${target}`]) {
        problems.push(`${where}: imports @brine/${target}, which package.json does not list in dependencies`)
      }
    }
  }
}

// Every error class a package defines is one a user can meet: docs/errors.md lists it, and its name is its class name.
const errorsDoc = readFileSync(join(root, 'docs', 'errors.md'), 'utf8')
for (const name of readdirSync(join(root, 'packages')).sort()) {
  for (const file of sourceFiles(join(root, 'packages', name, 'src'))) {
    const text = readFileSync(file, 'utf8')
    // An error class, and the literal name it sets when the name follows the class line.
    // Registered where it is defined, so an error of its class that crosses the wire comes back as that class.
    const registered = new Set([...text.matchAll(/^registerErrors\(\{([^}]*)\}\)/gm)].flatMap((call) => call[1].split(',').map((key) => key.trim())))
    for (const match of text.matchAll(/^export class (\w+Error) extends \w+(?: \{\n\s+override name(?::\s*string)?\s*=\s*'(\w+)')?/gm)) {
      const where = relative(root, file)
      if (!errorsDoc.includes(`\`${match[1]}\``)) problems.push(`${where}: ${match[1]} is not listed in docs/errors.md`)
      if (match[2] !== undefined && match[2] !== match[1]) problems.push(`${where}: ${match[1]} sets name '${match[2]}'`)
      if (!registered.has(match[1])) problems.push(`${where}: ${match[1]} is not in its file's registerErrors({ … }) (see @brine/core's errorFromWire)`)
    }
  }
}

// No import circle inside a package: module A imports B imports … A, through relative imports (types included).
function relativeImports(file) {
  const targets = []
  for (const match of readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)) {
    const target = resolve(dirname(file), match[1]).replace(/\.js$/, '.ts')
    const candidates = [target, target.replace(/\.ts$/, '.tsx'), join(target.replace(/\.ts$/, ''), 'index.ts')]
    const found = candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile())
    if (found !== undefined) targets.push(found)
  }
  return targets
}
function findCircle(graph) {
  const state = new Map() // 1: on the current path, 2: done
  const path = []
  const visit = (file) => {
    state.set(file, 1)
    path.push(file)
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 1) return [...path.slice(path.indexOf(next)), next]
      if (state.get(next) === undefined) {
        const circle = visit(next)
        if (circle !== undefined) return circle
      }
    }
    path.pop()
    state.set(file, 2)
    return undefined
  }
  for (const file of graph.keys())
    if (state.get(file) === undefined) {
      const circle = visit(file)
      if (circle !== undefined) return circle
    }
  return undefined
}
for (const name of readdirSync(join(root, 'packages')).sort()) {
  const graph = new Map()
  for (const file of sourceFiles(join(root, 'packages', name, 'src'))) graph.set(file, relativeImports(file))
  const circle = findCircle(graph)
  if (circle !== undefined)
    problems.push(`packages/${name}/src: import circle ${circle.map((file) => relative(join(root, 'packages', name, 'src'), file)).join(' → ')}`)
}

if (problems.length > 0) {
  process.stderr.write(`lint-packages: ${problems.length} problem(s)\n${problems.map((p) => `  ${p}`).join('\n')}\n`)
  process.exit(1)
}
process.stderr.write(
  'lint-packages: every package is complete and imports only from below it; the contract stays apart from the runtime; the test kit and the harness stay test code; every error class is in docs/errors.md and registered; no import circle inside a package\n',
)
