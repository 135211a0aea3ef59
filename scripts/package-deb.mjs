#!/usr/bin/env node
// Builds brine_<version>_<arch>.deb: /opt/brine holds the project's own Node runtime (scripts/runtime.sh, the
// pinned Node 24) and the installed @brine packages with their production dependencies (the tarballs
// scripts/pack.mjs makes, installed offline: nothing compiled); /usr/bin holds
// one small wrapper per command that runs it on that runtime, so the machine's own Node (if any) plays no part.
// Units go to /lib/systemd/system, the config files to /etc/brine (conffiles), logrotate's snippet to
// /etc/logrotate.d; packaging/deb/ has the maintainer scripts. Needs dpkg-deb; reaches only the npm registry
// (through scripts/runtime.sh, once).
//
//   node scripts/package-deb.mjs <destination directory> [tarball...]     (npm run package:deb -- <dir>)
//   node scripts/package-deb.mjs <destination directory> --installed <prefix>
//   node scripts/package-deb.mjs <destination directory> --fast ...      (no compression instead of gzip level 9)
//
// Given the tarballs scripts/pack.mjs made (the e2e tests pack once per run), it installs those instead of packing.
// Given a prefix those tarballs were installed into (`npm install -g --prefix <prefix>`, as the e2e tests do once per
// run), it links that prefix's lib/ into the package's tree (hard links, or a copy across file systems) instead of
// installing them again. With --fast, dpkg-deb leaves the data member uncompressed (data.tar, `-Znone`): the same files
// in the same .deb format, which dpkg installs alike, a file three times larger made and unpacked without gzip's CPU
// (the e2e tests' build, which only installs it).
// Prints the .deb's path on stdout. The build must be current (`npm run build`).
import { execFileSync } from 'node:child_process'
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const DEB_ARCH = { x64: 'amd64', arm64: 'arm64' }

const run = (command, args, options = {}) => execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...options }).trim()

/** Installs the packages from their tarballs (packing them first when none are given) into `opt`, as `npm install -g` lays them out. */
function installPackages(opt, work, packed) {
  const tarballs = packed.length > 0 ? packed : run(process.execPath, [join(root, 'scripts/pack.mjs'), join(work, 'tarballs')]).split('\n')
  run('npm', [
    'install',
    '--global',
    '--prefix',
    opt,
    '--offline',
    '--cache',
    join(work, 'cache'),
    '--no-audit',
    '--no-fund',
    '--loglevel',
    'error',
    ...tarballs,
  ])
}

/** /opt/brine: the runtime, and the packages installed from their tarballs (or copied from a prefix they were installed into). */
function stageOpt(stage, work, packed, installed) {
  const opt = join(stage, 'opt/brine')
  if (installed === undefined) installPackages(opt, work, packed)
  else linkTree(join(installed, 'lib'), join(opt, 'lib'))
  // npm's links in opt/bin would run the commands on whatever `node` the PATH has; the wrappers below replace them.
  rmSync(join(opt, 'bin'), { recursive: true, force: true })
  mkdirSync(join(opt, 'bin'))
  const runtime = run('bash', [join(root, 'scripts/runtime.sh'), '24'])
  copyFileSync(join(runtime, 'node'), join(opt, 'bin/node'))
  chmodSync(join(opt, 'bin/node'), 0o755)
  copyFileSync(join(runtime, '../LICENSE'), join(opt, 'NODE-LICENSE'))
  return run(join(opt, 'bin/node'), ['-p', 'process.versions.node'])
}

/**
 * `to` as a tree of hard links to the files under `from` (symlinks kept as they are): dpkg-deb only reads them, and a
 * link costs a fraction of a copy's writes over thousands of small files. Across file systems, a copy.
 */
function linkTree(from, to) {
  mkdirSync(join(to, '..'), { recursive: true })
  try {
    execFileSync('cp', ['-al', from, to], { stdio: ['ignore', 'ignore', 'pipe'] })
  } catch {
    rmSync(to, { recursive: true, force: true })
    cpSync(from, to, { recursive: true, verbatimSymlinks: true })
  }
}

/** /usr/bin/<command> for each bin of @brine/cli: exec the launcher on /opt/brine's Node. */
function stageWrappers(stage) {
  const cli = JSON.parse(readFileSync(join(root, 'packages/cli/package.json'), 'utf8'))
  mkdirSync(join(stage, 'usr/bin'), { recursive: true })
  for (const [name, path] of Object.entries(cli.bin)) {
    const launcher = join('/opt/brine/lib/node_modules/@brine/cli', path)
    writeFileSync(join(stage, 'usr/bin', name), `#!/bin/sh\nexec /opt/brine/bin/node ${launcher} "$@"\n`, { mode: 0o755 })
  }
  return Object.keys(cli.bin)
}

/** Units, config files (conffiles), logrotate, and DEBIAN/. */
function stageSystem(stage, version, arch) {
  const units = join(stage, 'lib/systemd/system')
  mkdirSync(units, { recursive: true })
  for (const unit of readdirSync(join(root, 'packaging/systemd'))) copyFileSync(join(root, 'packaging/systemd', unit), join(units, unit))
  const conffiles = ['/etc/brine/master', '/etc/brine/minion', '/etc/logrotate.d/brine']
  mkdirSync(join(stage, 'etc/brine'), { recursive: true })
  mkdirSync(join(stage, 'etc/logrotate.d'), { recursive: true })
  copyFileSync(join(root, 'packaging/deb/master'), join(stage, 'etc/brine/master'))
  copyFileSync(join(root, 'packaging/deb/minion'), join(stage, 'etc/brine/minion'))
  copyFileSync(join(root, 'packaging/logrotate/brine'), join(stage, 'etc/logrotate.d/brine'))
  const debian = join(stage, 'DEBIAN')
  mkdirSync(debian)
  for (const script of ['postinst', 'prerm', 'postrm']) {
    copyFileSync(join(root, 'packaging/deb', script), join(debian, script))
    chmodSync(join(debian, script), 0o755)
  }
  writeFileSync(join(debian, 'conffiles'), `${conffiles.join('\n')}\n`)
  const sizeKiB = run('du', ['-sk', '--exclude=DEBIAN', stage]).split('\t')[0]
  const control = readFileSync(join(root, 'packaging/deb/control'), 'utf8').replace('@VERSION@', version).replace('@ARCH@', arch).replace('@SIZE@', sizeKiB)
  writeFileSync(join(debian, 'control'), control)
}

function main() {
  const [destination, ...flagged] = process.argv.slice(2)
  const fast = flagged.includes('--fast')
  const rest = flagged.filter((arg) => arg !== '--fast')
  const installed = rest[0] === '--installed' ? rest[1] : undefined
  const tarballs = installed === undefined ? rest : []
  if (destination === undefined) {
    process.stderr.write('usage: node scripts/package-deb.mjs <destination directory> [--fast] [tarball... | --installed <prefix>]\n')
    process.exit(2)
  }
  const arch = DEB_ARCH[process.arch]
  if (arch === undefined) throw new Error(`no Debian architecture for ${process.arch}; supported: ${Object.keys(DEB_ARCH).join(', ')}`)
  const version = JSON.parse(readFileSync(join(root, 'packages/cli/package.json'), 'utf8')).version
  const work = mkdtempSync(join(tmpdir(), 'brine-deb-'))
  try {
    const stage = join(work, 'root')
    stageOpt(
      stage,
      work,
      tarballs.map((tarball) => resolve(tarball)),
      installed === undefined ? undefined : resolve(installed),
    )
    stageWrappers(stage)
    stageSystem(stage, version, arch)
    const dest = resolve(destination)
    mkdirSync(dest, { recursive: true })
    const deb = join(dest, `brine_${version}_${arch}.deb`)
    run('dpkg-deb', ['--root-owner-group', ...(fast ? ['-Znone'] : ['-Zgzip']), '--build', stage, deb])
    process.stdout.write(`${deb}\n`)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main()
