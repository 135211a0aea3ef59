#!/usr/bin/env node
// Builds Brine the way a user wants to see it: one line while it builds, the full log only when it fails.
// Run by `npm ci` (the root `prepare` script, so the brine* commands work right after it), `npm run demo` and
// `npm test`. A build whose every dist/ file is newer than every source, config and the lock file is skipped;
// `npm run build` always builds (through lerna) and prints its log.
//
//   node scripts/quiet-build.mjs [--force] [--label <text>] [-- <command> [args...]]
//
// The command defaults to scripts/build-packages.mjs: what `lerna run build` runs (each package's build script, in
// dependency order), without lerna's, nx's and npm's processes around each. The full log is also kept in .tmp/build.log.
import { spawn } from 'node:child_process'
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

function parseArgs(argv) {
  const options = { force: false, label: 'Building Brine', command: undefined }
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]
    if (arg === '--force') options.force = true
    else if (arg === '--label') options.label = argv[++index] ?? options.label
    else if (arg === '--') {
      options.command = argv.slice(index + 1)
      break
    } else {
      process.stderr.write(`quiet-build: unknown argument '${arg}'\n`)
      process.exit(2)
    }
  }
  return options
}

/** Newest and oldest modification times under `path` (directories count too: a deleted file changes its directory). */
function mtimes(path, into = { newest: 0, oldest: Infinity, files: 0 }) {
  if (!existsSync(path)) return into
  const stat = statSync(path)
  if (stat.isDirectory()) {
    into.newest = Math.max(into.newest, stat.mtimeMs)
    for (const entry of readdirSync(path)) mtimes(join(path, entry), into)
  } else {
    into.newest = Math.max(into.newest, stat.mtimeMs)
    into.oldest = Math.min(into.oldest, stat.mtimeMs)
    into.files++
  }
  return into
}

/** Why the build must run, or undefined when every package's dist/ is newer than everything it is built from. */
function staleReason() {
  const shared = ['tsup.base.ts', 'tsconfig.base.json', 'package-lock.json'].map((file) => mtimes(join(root, file)).newest)
  const sharedNewest = Math.max(...shared)
  for (const name of readdirSync(join(root, 'packages')).sort()) {
    const dir = join(root, 'packages', name)
    const manifest = join(dir, 'package.json')
    if (!existsSync(manifest) || JSON.parse(readFileSync(manifest, 'utf8')).scripts?.build === undefined) continue
    const dist = mtimes(join(dir, 'dist'))
    if (dist.files === 0) return `packages/${name}/dist is missing`
    const inputs = ['src', 'package.json', 'tsup.config.ts', 'tsconfig.json'].map((file) => mtimes(join(dir, file)).newest)
    if (Math.max(sharedNewest, ...inputs) > dist.oldest) return `packages/${name} changed since its last build`
  }
  return undefined
}

const options = parseArgs(process.argv.slice(2))
const reason = options.force || options.command !== undefined ? 'forced' : staleReason()
if (reason === undefined) {
  process.stdout.write(`${options.label}: up to date (every dist/ is newer than its sources)\n`)
  process.exit(0)
}

const [command, ...args] = options.command ?? [process.execPath, join(root, 'scripts/build-packages.mjs')]
mkdirSync(join(root, '.tmp'), { recursive: true })
const logPath = join(root, '.tmp/build.log')
const log = createWriteStream(logPath)
const chunks = []
const started = Date.now()
const tty = process.stdout.isTTY === true
process.stdout.write(`${options.label} …`)

const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FORCE_COLOR: '0' } })
for (const stream of [child.stdout, child.stderr]) {
  stream.on('data', (chunk) => {
    chunks.push(chunk)
    log.write(chunk)
  })
}
const [code, signal] = await new Promise((resolve) => {
  child.once('error', (error) => {
    chunks.push(Buffer.from(`${command}: ${error.message}\n`))
    resolve([127, null])
  })
  child.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]))
})
await new Promise((resolve) => log.end(resolve))
const seconds = Math.round((Date.now() - started) / 1000)
if (code === 0) {
  process.stdout.write(tty ? `\r${options.label}: done in ${seconds} s\n` : ` done in ${seconds} s\n`)
  process.exit(0)
}
process.stdout.write('\n')
process.stderr.write(Buffer.concat(chunks))
process.stderr.write(
  `\n${options.label} failed (${signal === null ? `exit code ${code}` : `signal ${signal}`}) after ${seconds} s; the log above is also in ${logPath}\n`,
)
process.exit(code === null || code === 0 ? 1 : code)
