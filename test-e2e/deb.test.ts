import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { holdHostLock } from './helpers/host-lock.js'
import { installedPrefix } from './helpers/tarballs.js'
import { killAll, REPO_ROOT, run } from './helpers/processes.js'

// The .deb an operator installs: built by `npm run package:deb`, installed with the machine's own dpkg (these tests
// run as root on a Debian machine, as CI does; no throwaway root), used from /usr/bin, then purged.
const BUILD_MS = 900_000
const DPKG_MS = 300_000
const COMMAND_MS = 60_000
const BINS = ['brine', 'brine-api', 'brine-call', 'brine-key', 'brine-master', 'brine-minion', 'brine-run', 'brine-syndic']
const UNITS = ['brine-api', 'brine-master', 'brine-minion', 'brine-syndic'].map((name) => `/lib/systemd/system/${name}.service`)

/** How long this file waits for the other file that installs packages (host-modules) to finish with dpkg. */
const HOST_LOCK_MS = 1_500_000

let scratch = ''
let deb = ''
let packageFiles: string[] = []

/** Runs `step` holding the dpkg lock the files that install packages share: only dpkg itself needs taking turns. */
async function withHostLock<T>(step: () => Promise<T>): Promise<T> {
  const release = await holdHostLock(HOST_LOCK_MS)
  try {
    return await step()
  } finally {
    release()
  }
}

async function purgeIfInstalled(): Promise<void> {
  const status = await run('dpkg-query', ['-W', '-f=${db:Status-Status}', 'brine'], { ms: COMMAND_MS })
  if (status.code === 0 && status.stdout !== 'not-installed') {
    const purged = await run('dpkg', ['--purge', 'brine'], { ms: DPKG_MS })
    expect(purged.code, purged.stderr).toBe(0)
  }
}

beforeAll(
  async () => {
    expect(process.getuid?.(), 'the .deb tests install a package with dpkg: run them as root').toBe(0)
    scratch = await mkdtemp(join(tmpdir(), 'brine-deb-'))
    // From the prefix the run's tarballs were installed into once (install uses it too): the same lib/ npm lays out.
    // --fast: the data member uncompressed, the same files in the same format: this file installs it, it does not ship it.
    const built = await run(process.execPath, ['scripts/package-deb.mjs', scratch, '--fast', '--installed', await installedPrefix(BUILD_MS)], {
      ms: BUILD_MS,
    })
    expect(built.code, built.stderr).toBe(0)
    deb = built.stdout.trim()
    const installed = await withHostLock(async () => {
      await purgeIfInstalled()
      return await run('dpkg', ['-i', deb], { ms: DPKG_MS })
    })
    expect(installed.code, installed.stderr).toBe(0)
    const listed = await run('dpkg', ['-L', 'brine'], { ms: COMMAND_MS })
    packageFiles = listed.stdout.trim().split('\n')
  },
  HOST_LOCK_MS + 2 * BUILD_MS + 2 * DPKG_MS,
)

afterAll(async () => {
  killAll()
  await withHostLock(purgeIfInstalled)
  if (scratch !== '') await rm(scratch, { recursive: true, force: true })
}, HOST_LOCK_MS + DPKG_MS)

const startFleet = useFleets()

describe('the .deb, installed with dpkg -i', () => {
  it('is named brine_<version>_amd64.deb and puts every command in /usr/bin, running on its own Node 24 under /opt/brine', async () => {
    const version = (JSON.parse(await readFile(join(REPO_ROOT, 'packages/cli/package.json'), 'utf8')) as { version: string }).version
    expect(deb.endsWith(`/brine_${version}_amd64.deb`)).toBe(true)
    const pinned = /^24 (\S+) x64 /m.exec(await readFile(join(REPO_ROOT, 'scripts/runtimes.txt'), 'utf8'))![1]
    const node = await run('/opt/brine/bin/node', ['--version'], { ms: COMMAND_MS })
    expect(node.stdout.trim()).toBe(`v${pinned}`)
    for (const bin of BINS) {
      expect(packageFiles).toContain(`/usr/bin/${bin}`)
      // An empty PATH but for /usr/bin: the machine's own node (if any) plays no part.
      const ran = await run(`/usr/bin/${bin}`, ['--version'], { ms: COMMAND_MS, env: { PATH: '/usr/bin:/bin' }, cwd: scratch })
      expect({ bin, code: ran.code, out: ran.stdout }).toEqual({ bin, code: 0, out: `${version}\n` })
    }
    expect(packageFiles).toEqual(expect.arrayContaining([...UNITS, '/etc/brine/master', '/etc/brine/minion', '/etc/logrotate.d/brine']))
    // Both ends of the ZeroMQ transport are node:net: the package carries no zeromq, and no native addon of it.
    expect(packageFiles.filter((file) => file.includes('/node_modules/zeromq/'))).toEqual([])
  })

  it('marks the config files as conffiles, creates the brine user and the log directory', async () => {
    const conffiles = await run('dpkg-query', ['-W', '-f=${Conffiles}', 'brine'], { ms: COMMAND_MS })
    expect(
      conffiles.stdout
        .trim()
        .split('\n')
        .map((line) => line.trim().split(' ')[0])
        .sort(),
    ).toEqual(['/etc/brine/master', '/etc/brine/minion', '/etc/logrotate.d/brine'])
    const user = await run('getent', ['passwd', 'brine'], { ms: COMMAND_MS })
    expect(user.stdout).toMatch(/^brine:x:\d+:\d+:[^:]*:\/var\/lib\/brine:\/usr\/sbin\/nologin\n$/)
    const owner = await run('stat', ['-c', '%U:%G', '/var/log/brine'], { ms: COMMAND_MS })
    expect(owner.stdout.trim()).toBe('brine:brine')
  })

  it('ships systemd units that systemd-analyze verify accepts, with the restart limits in [Unit]', async () => {
    const verified = await run('systemd-analyze', ['verify', ...UNITS], { ms: COMMAND_MS })
    expect({ code: verified.code, err: verified.stderr }).toEqual({ code: 0, err: '' })
    for (const unit of UNITS) {
      const text = await readFile(unit, 'utf8')
      const unitSection = text.slice(text.indexOf('[Unit]'), text.indexOf('[Service]'))
      expect(unitSection).toMatch(/^StartLimitIntervalSec=300$/m)
      expect(unitSection).toMatch(/^StartLimitBurst=10$/m)
      expect(text).toMatch(/^ExecStart=\/usr\/bin\/brine-[a-z]+ -c \/etc\/brine$/m)
    }
  })

  it('runs brine and brine-minion from their one-file builds, which match the packages installed beside them', async () => {
    const cli = '/opt/brine/lib/node_modules/@brine/cli'
    const launcher = (await import(pathToFileURL(join(cli, 'bin/bundle.js')).href)) as {
      bundleTarget: (name: string, env: NodeJS.ProcessEnv, root: string) => string | undefined
    }
    expect(launcher.bundleTarget('brine', {}, cli)).toBe(join(cli, 'dist/bundle/brine.cjs'))
    expect(launcher.bundleTarget('brine-minion', {}, cli)).toBe(join(cli, 'dist/bundle/brine-minion.cjs'))
  })

  describe.each(TRANSPORTS)('its brine-master and brine-minion over %s', (transport) => {
    it('accept each other and answer a job from its brine', async () => {
      const fleet = await startFleet({ minions: [{ id: 'deb1', transport }], binDir: '/usr/bin' })
      const cmdline = await readFile(`/proc/${fleet.master.pid}/cmdline`, 'utf8')
      // The package's own Node runs the master, which re-executed itself (same pid) into its runtime: its young
      // generation bounded.
      expect(cmdline.split('\0').slice(0, 3)).toEqual([
        '/opt/brine/bin/node',
        '--max-semi-space-size=8',
        '/opt/brine/lib/node_modules/@brine/cli/bin/brine-master.js',
      ])
      const ping = await fleet.run('brine', ['*', 'test.ping'], { env: { ...process.env, PATH: `/usr/bin:${process.env.PATH ?? ''}` } })
      expect({ code: ping.code, out: ping.stdout }).toEqual({ code: 0, out: 'deb1:\n    True\n' })
      expect(await fleet.minions.get('deb1')!.stop('SIGTERM')).toEqual({ code: 0, signal: null })
      expect(await fleet.master.stop('SIGTERM')).toEqual({ code: 0, signal: null })
    })
  })
})

describe('dpkg -P', () => {
  it('leaves no file of the package behind, nor the user, keys, cache or logs it made', { timeout: HOST_LOCK_MS + DPKG_MS }, async () => {
    expect(packageFiles.length).toBeGreaterThan(100)
    const purged = await withHostLock(() => run('dpkg', ['--purge', 'brine'], { ms: DPKG_MS }))
    expect(purged.code, purged.stderr).toBe(0)
    expect(packageFiles.filter((path) => !isSharedDirectory(path) && existsSync(path))).toEqual([])
    for (const path of ['/opt/brine', '/etc/brine', '/var/log/brine', '/var/cache/brine', '/var/lib/brine'])
      expect({ path, exists: existsSync(path) }).toEqual({ path, exists: false })
    expect((await run('getent', ['passwd', 'brine'], { ms: COMMAND_MS })).code).toBe(2)
  })
})

/** Directories a package shares with the rest of the system, which dpkg rightly leaves in place. */
function isSharedDirectory(path: string): boolean {
  return ['/.', '/etc', '/etc/logrotate.d', '/lib', '/lib/systemd', '/lib/systemd/system', '/opt', '/usr', '/usr/bin'].includes(path)
}
