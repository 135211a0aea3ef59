import { mkdtemp, readFile, rm, writeFile, readdir, realpath } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DaemonProcess, freeLoopbackPort } from '@brine/testkit'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { killAll, REPO_ROOT, run } from './helpers/processes.js'
import { installedPrefix } from './helpers/tarballs.js'

// What a user does on a machine with only Node 20 and npm: the tarballs `npm run pack` makes, installed with
// `npm install -g`. The install is --offline with an empty npm cache: the tarballs carry their third-party
// dependencies, so it needs neither the registry nor the cache `npm ci` filled.
const BINS = ['brine', 'brine-master', 'brine-minion', 'brine-syndic', 'brine-key', 'brine-call', 'brine-run', 'brine-api']
const PACK_MS = 600_000
const INSTALL_MS = 300_000
const COMMAND_MS = 60_000

let scratch = ''
let prefix = ''
let env: NodeJS.ProcessEnv = {}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'brine-install-'))
  // Installed once per run (the .deb's build copies it): --offline with an empty npm cache, so nothing may come from
  // anywhere but the tarballs.
  prefix = await installedPrefix(PACK_MS + INSTALL_MS)
  // The installed commands first on the PATH, as after a real global install.
  env = { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` }
}, PACK_MS + INSTALL_MS)

afterAll(async () => {
  killAll()
  if (scratch !== '') await rm(scratch, { recursive: true, force: true })
})

const startFleet = useFleets()

describe('npm pack, then npm install -g of the tarballs into a fresh prefix', () => {
  it('puts every brine* command on the PATH, each running the installed copy', async () => {
    expect((await readdir(join(prefix, 'bin'))).sort()).toEqual([...BINS].sort())
    for (const bin of BINS) {
      const which = await run('sh', ['-c', `command -v ${bin}`], { ms: COMMAND_MS, env })
      expect(which.stdout.trim()).toBe(join(prefix, 'bin', bin))
      const version = await run(bin, ['--version'], { ms: COMMAND_MS, env, cwd: scratch })
      expect({ bin, code: version.code, out: version.stdout }).toEqual({ bin, code: 0, out: '0.1.0\n' })
    }
    const launcher = await realpath(join(prefix, 'bin', 'brine-master'))
    expect(launcher).toBe(join(prefix, 'lib/node_modules/@brine/cli/bin/brine-master.js'))
  })

  it('runs brine and brine-minion from their one-file builds, which match the packages installed beside them', async () => {
    const cli = join(prefix, 'lib/node_modules/@brine/cli')
    const launcher = (await import(pathToFileURL(join(cli, 'bin/bundle.js')).href)) as {
      bundleTarget: (name: string, env: NodeJS.ProcessEnv, root: string) => string | undefined
    }
    expect(launcher.bundleTarget('brine', {}, cli)).toBe(join(cli, 'dist/bundle/brine.cjs'))
    expect(launcher.bundleTarget('brine-minion', {}, cli)).toBe(join(cli, 'dist/bundle/brine-minion.cjs'))
  })

  it('ships no zeromq addon (both ends of the ZeroMQ transport are node:net) and reports the bundled libraries in --versions-report', async () => {
    // Nothing shipped depends on zeromq any more: no tarball bundles it, so no native addon is installed for it.
    const found = await run('sh', ['-c', `find ${JSON.stringify(join(prefix, 'lib/node_modules'))} -type d -name zeromq | head -1`], {
      ms: COMMAND_MS,
      cwd: scratch,
    })
    expect({ code: found.code, out: found.stdout }).toEqual({ code: 0, out: '' })

    const report = await run('brine', ['--versions-report'], { ms: COMMAND_MS, env, cwd: scratch })
    expect(report.code).toBe(0)
    expect(report.stdout).not.toMatch(/libzmq|zeromq/)
    const lock = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> }
    for (const name of ['msgpackr', 'yaml', 'tweetnacl', 'pg']) {
      // Exactly the versions this repository's lock file tested, bundled into the tarballs.
      expect(report.stdout).toContain(`${name}: ${lock.packages[`node_modules/${name}`]!.version}\n`)
    }
  })

  describe.each(TRANSPORTS)('the installed brine-master and brine-minion over %s', (transport) => {
    it('accept each other, run jobs from the installed brine, and stop cleanly', async () => {
      const fleet = await startFleet({ minions: [{ id: 'web1', transport, grains: { role: 'web' } }], binDir: join(prefix, 'bin') })
      const cmdline = await readFile(`/proc/${fleet.master.pid}/cmdline`, 'utf8')
      expect(cmdline.split('\0')).toContain(join(prefix, 'bin', 'brine-master'))
      expect(fleet.master.stderr).toContain(`transport ${transport}: publish`)

      const ping = await fleet.run('brine', ['*', 'test.ping'], { env })
      expect({ code: ping.code, out: ping.stdout }).toEqual({ code: 0, out: 'web1:\n    True\n' })
      const grains = await fleet.run('brine', ['-G', 'role:web', 'grains.item', 'role', '--out', 'json', '--static'], { env })
      expect(JSON.parse(grains.stdout)).toEqual({ web1: { role: 'web' } })
      const keys = await fleet.run('brine-key', ['-L'], { env })
      expect(keys.stdout).toMatch(/^Accepted Keys:\nweb1\n/)

      expect(await fleet.minions.get('web1')!.stop('SIGTERM')).toEqual({ code: 0, signal: null })
      expect(await fleet.master.stop('SIGTERM')).toEqual({ code: 0, signal: null })
    })
  })

  it('serves the web console bundled in the installed @brine/console from the installed brine-api', async () => {
    const configDir = join(scratch, 'etc-brine-api')
    await rm(configDir, { recursive: true, force: true })
    await run('mkdir', ['-p', configDir], { ms: COMMAND_MS })
    const port = await freeLoopbackPort()
    await writeFile(
      join(configDir, 'master'),
      `interface: 127.0.0.1\nsock_dir: ${join(scratch, 'api-sock')}\nrest_cherrypy:\n  port: ${port}\n  host: 127.0.0.1\n  disable_ssl: true\n`,
    )
    // No master: the API starts anyway (its requests answer 503 until one is up), and the console is static.
    const api = DaemonProcess.spawn('installed brine-api', join(prefix, 'bin', 'brine-api'), ['-c', configDir, '-l', 'info'], { env, cwd: scratch })
    try {
      const [, url] = await api.waitForOutput(/brine-api listening on (\S+)/, COMMAND_MS)
      const index = await fetch(`${url}/app/`, { signal: AbortSignal.timeout(COMMAND_MS) })
      expect(index.status).toBe(200)
      expect(index.headers.get('content-security-policy')).toContain("default-src 'none'")
      const script = /src="\.\/(assets\/index-[\w-]+\.js)"/.exec(await index.text())?.[1]
      expect(script).toBeDefined()
      const asset = await fetch(`${url}/app/${script}`, { signal: AbortSignal.timeout(COMMAND_MS) })
      expect(asset.status).toBe(200)
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
    } finally {
      await api.stop()
    }
  })

  it("starts each systemd unit's ExecStart from the installed commands (checked with --check-config)", async () => {
    const configDir = join(scratch, 'etc-brine')
    await rm(configDir, { recursive: true, force: true })
    await run('mkdir', ['-p', configDir], { ms: COMMAND_MS })
    await writeFile(join(configDir, 'master'), 'interface: 127.0.0.1\n')
    await writeFile(join(configDir, 'minion'), 'id: web1\nmaster: 127.0.0.1\n')
    for (const role of ['master', 'minion', 'syndic']) {
      const unit = await readFile(join(REPO_ROOT, `packaging/systemd/brine-${role}.service`), 'utf8')
      const execStart = /^ExecStart=(.*)$/m.exec(unit)?.[1]
      // The units name the .deb's /usr/bin; after npm install -g the same command is the prefix's.
      expect(execStart).toBe(`/usr/bin/brine-${role} -c /etc/brine`)
      expect(unit).toMatch(/^Restart=on-failure$/m)
      expect(unit).toMatch(/^ExecReload=\/bin\/kill -HUP \$MAINPID$/m)
      const [command, ...args] = execStart!.replace('/etc/brine', configDir).replace('/usr/bin/', '').split(' ')
      const checked = await run(command!, [...args, '--check-config'], { ms: COMMAND_MS, env, cwd: scratch })
      // The syndic reads the master's config file, as Salt's salt-syndic does.
      const file = role === 'syndic' ? 'master' : role
      expect({ code: checked.code, out: checked.stdout }).toEqual({
        code: 0,
        out: `brine-${role}: config OK: 0 errors, 0 warnings (${join(configDir, file)})\n`,
      })
    }
  })
})
