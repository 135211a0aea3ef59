/**
 * The daily execution modules on the real host (we are root here), run by the built daemons over every
 * transport: a package the test builds with dpkg-deb, an init.d service and a user it installs, and
 * the read-only modules. Everything the test adds is removed again, whether the test passes or not.
 * The jobs go through a LocalClient, published as `brine` publishes them: the modules are what is tested
 * here, and a CLI process per call would be most of the file's CPU (the CLI has its own e2e files).
 */
import { execFile } from 'node:child_process'
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { LocalClient } from '@brine/client'
import { parseInput } from '@brine/config'
import type { Fleet } from '@brine/harness'
import { killAllProcesses } from '@brine/testkit'
import { TRANSPORTS, useSharedFleets } from './helpers/fleets.js'
import { holdHostLock } from './helpers/host-lock.js'

/** How long the package test waits for the other file that installs packages (the .deb's) to finish with dpkg. */
const HOST_LOCK_MS = 1_500_000

const exec = promisify(execFile)
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
})
afterAll(() => killAllProcesses())

const PACKAGE = 'brine-test'

/** Builds brine-test_1.0_all.deb (one file under /usr/share/brine-test) in `dir`. */
async function buildDeb(dir: string): Promise<string> {
  const tree = join(dir, 'pkg')
  await mkdir(join(tree, 'DEBIAN'), { recursive: true })
  await mkdir(join(tree, 'usr/share/brine-test'), { recursive: true })
  await writeFile(join(tree, 'usr/share/brine-test/hello.txt'), 'installed by Brine\n')
  await writeFile(
    join(tree, 'DEBIAN/control'),
    `Package: ${PACKAGE}\nVersion: 1.0\nArchitecture: all\nMaintainer: Brine <brine@example.invalid>\nDescription: Brine e2e test package\n`,
  )
  const deb = join(dir, `${PACKAGE}_1.0_all.deb`)
  await exec('dpkg-deb', ['--root-owner-group', '--build', tree, deb], { timeout: 60_000 })
  return deb
}

const installed = async (): Promise<boolean> =>
  (await exec('dpkg-query', ['-W', '-f', '${Status}', PACKAGE]).catch(() => ({ stdout: '' }))).stdout.includes(' installed')

function initScript(name: string): string {
  const pidfile = `/run/${name}.pid`
  return `#!/bin/sh
### BEGIN INIT INFO
# Provides:          ${name}
# Required-Start:
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: Brine e2e test service
### END INIT INFO
case "$1" in
  start) start-stop-daemon --start --background --make-pidfile --pidfile ${pidfile} --exec /bin/sleep -- 600 ;;
  stop) start-stop-daemon --stop --quiet --oknodo --pidfile ${pidfile} --remove-pidfile --retry 5 ;;
  status) start-stop-daemon --status --pidfile ${pidfile} ;;
  restart) "$0" stop; "$0" start ;;
  *) echo "usage: $0 start|stop|status|restart"; exit 3 ;;
esac
`
}

/** A LocalClient per fleet, made at its first call and closed before the fleet stops. */
const clients = new Map<Fleet, LocalClient>()

/**
 * The function's return on the fleet's single minion: the job `brine <id> <fun> <words…> -t 120` publishes (its
 * words typed by the CLI's own parse_input), the returns as its `--out json --static` prints them.
 */
async function call(fleet: Fleet, id: string, fun: string, ...words: string[]): Promise<unknown> {
  let client = clients.get(fleet)
  if (client === undefined) clients.set(fleet, (client = new LocalClient({ configDir: fleet.masterConfigDir })))
  const returns = JSON.parse(JSON.stringify(await client.cmd(id, fun, parseInput(words), { timeout: 120_000 }))) as Record<string, unknown>
  expect(Object.keys(returns), [fun, ...words].join(' ')).toEqual([id])
  return returns[id]
}

describe.each(TRANSPORTS)('daily execution modules on the real host over %s', (transport) => {
  const id = `host-${transport}`
  // One master and minion for this describe's tests: each test removes what it added to the host, and none stops a
  // daemon. The master's file_roots is a directory of the describe's, where the package test builds its .deb.
  const startShared = useSharedFleets()
  let shared: Promise<{ fleet: Fleet; fileRoot: string }> | undefined
  afterAll(async () => {
    const made = await shared?.catch(() => undefined)
    if (made === undefined) return
    await clients.get(made.fleet)?.close()
    clients.delete(made.fleet)
    await rm(made.fileRoot, { recursive: true, force: true })
  })
  const host = (): Promise<{ fleet: Fleet; fileRoot: string }> =>
    (shared ??= (async () => {
      const fileRoot = await mkdtemp(join(tmpdir(), 'brine-pkg-'))
      return { fleet: await startShared({ minions: [{ id, transport }], masterConfig: { file_roots: { base: [fileRoot] } } }), fileRoot }
    })())

  it(
    "pkg installs a package built with dpkg-deb from salt:// (the master's file_roots) and from a local path, shows its version, removes it, and leaves the machine as it was",
    { timeout: HOST_LOCK_MS + 60_000 },
    async () => {
      const { fleet, fileRoot: dir } = await host()
      // The .deb sits at the top of the master's file_roots: salt://brine-test_1.0_all.deb.
      const deb = await buildDeb(dir)
      // Only this test runs dpkg: it holds the lock the files that install packages share until its cleanup has purged,
      // and takes it once its fleet is up and its package built, which need no dpkg (the other file waits meanwhile).
      const releaseHostLock = await holdHostLock(HOST_LOCK_MS)
      cleanups.push(async () => releaseHostLock())
      expect(await installed()).toBe(false)
      cleanups.push(async () => (await installed()) && (await exec('dpkg', ['--purge', PACKAGE])))
      const salt = `salt://${PACKAGE}_1.0_all.deb`

      expect(await call(fleet, id, 'pkg.version', PACKAGE)).toBe('')
      expect(await call(fleet, id, 'pkg.install', `sources=[{"${PACKAGE}": "${salt}"}]`)).toEqual({ [PACKAGE]: { old: '', new: '1.0' } })
      expect(await call(fleet, id, 'pkg.version', PACKAGE)).toBe('1.0')
      expect(await readFile('/usr/share/brine-test/hello.txt', 'utf8')).toBe('installed by Brine\n')
      // cp.cache_file brought it into the minion's cache (hash checked), which pkg.install read.
      const cached = await call(fleet, id, 'cp.is_cached', salt)
      expect(cached).toEqual(expect.stringMatching(new RegExp(`/files/base/${PACKAGE}_1\\.0_all\\.deb$`)))
      expect(await call(fleet, id, 'pkg.list_pkgs')).toMatchObject({ [PACKAGE]: '1.0' })
      expect(await call(fleet, id, 'pkg.remove', PACKAGE)).toEqual({ [PACKAGE]: { old: '1.0', new: '' } })
      expect(await call(fleet, id, 'pkg.version', PACKAGE)).toBe('')

      // The same from a local path.
      expect(await call(fleet, id, 'pkg.install', `sources=[{"${PACKAGE}": "${deb}"}]`)).toEqual({ [PACKAGE]: { old: '', new: '1.0' } })
      expect(await call(fleet, id, 'pkg.version', PACKAGE)).toBe('1.0')
      expect(await call(fleet, id, 'pkg.remove', PACKAGE)).toEqual({ [PACKAGE]: { old: '1.0', new: '' } })

      // Sources that cannot be had are refused by name, and nothing is installed.
      expect(await call(fleet, id, 'pkg.install', `sources=[{"${PACKAGE}": "${join(dir, 'absent.deb')}"}]`)).toBe(
        `ERROR: package source ${join(dir, 'absent.deb')} is not a file`,
      )
      expect(await call(fleet, id, 'pkg.install', `sources=[{"${PACKAGE}": "salt://absent.deb"}]`)).toBe(
        'ERROR: Unable to cache salt://absent.deb from the master: no such file in its file_roots',
      )
      expect(await call(fleet, id, 'pkg.install', `sources=[{"${PACKAGE}": "salt://../etc/passwd"}]`)).toEqual(
        expect.stringMatching(/^ERROR: FileServerPathError: /),
      )
      expect(await call(fleet, id, 'pkg.version', PACKAGE)).toBe('')
      expect(await installed()).toBe(false)
    },
  )

  it('service starts, reports, stops, enables and disables an init.d service the test installs', async () => {
    const name = `brine-e2e-${transport}`
    const script = `/etc/init.d/${name}`
    await writeFile(script, initScript(name))
    await chmod(script, 0o755)
    cleanups.push(() => rm(script, { force: true }))
    cleanups.push(() => exec('update-rc.d', ['-f', name, 'remove']))
    cleanups.push(() => exec(script, ['stop']))
    const { fleet } = await host()

    expect(await call(fleet, id, 'service.available', name)).toBe(true)
    expect(await call(fleet, id, 'service.get_all')).toContain(name)
    expect(await call(fleet, id, 'service.status', name)).toBe(false)
    expect(await call(fleet, id, 'service.start', name)).toBe(true)
    expect(await call(fleet, id, 'service.status', name)).toBe(true)
    expect(await call(fleet, id, 'service.get_running')).toContain(name)
    expect(await call(fleet, id, 'service.restart', name)).toBe(true)
    expect(await call(fleet, id, 'service.stop', name)).toBe(true)
    expect(await call(fleet, id, 'service.status', name)).toBe(false)
    expect(await call(fleet, id, 'service.enable', name)).toBe(true)
    expect(await call(fleet, id, 'service.enabled', name)).toBe(true)
    expect(await call(fleet, id, 'service.disable', name)).toBe(true)
    expect(await call(fleet, id, 'service.disabled', name)).toBe(true)
    expect(await call(fleet, id, 'service.available', `${name}-absent`)).toBe(false)
  })

  it('user and group add, change, inspect and delete an account the test owns', async () => {
    const user = `brine-e2e-${transport}`.slice(0, 30)
    const group = `brine-g-${transport}`
    cleanups.push(() => exec('groupdel', [group]))
    cleanups.push(() => rm(`/home/${user}-moved`, { recursive: true, force: true }))
    cleanups.push(() => rm(`/home/${user}`, { recursive: true, force: true }))
    cleanups.push(() => exec('userdel', ['-r', user]))
    const { fleet } = await host()

    expect(await call(fleet, id, 'user.info', user)).toEqual({})
    expect(await call(fleet, id, 'user.add', user, 'shell=/bin/sh', 'fullname=Brine Test')).toBe(true)
    expect(await call(fleet, id, 'user.info', user)).toMatchObject({ name: user, shell: '/bin/sh', home: `/home/${user}`, fullname: 'Brine Test' })
    expect(await call(fleet, id, 'user.list_users')).toContain(user)
    expect(await call(fleet, id, 'user.chshell', user, '/bin/bash')).toBe(true)
    expect(await call(fleet, id, 'user.chhome', user, `/home/${user}-moved`, 'persist=True')).toBe(true)
    expect((await stat(`/home/${user}-moved`)).isDirectory()).toBe(true)
    expect(await call(fleet, id, 'group.add', group)).toBe(true)
    expect(await call(fleet, id, 'group.adduser', group, user)).toBe(true)
    expect(await call(fleet, id, 'group.info', group)).toMatchObject({ name: group, members: [user] })
    expect(await call(fleet, id, 'user.list_groups', user)).toContain(group)
    expect(await call(fleet, id, 'group.deluser', group, user)).toBe(true)
    expect(await call(fleet, id, 'user.delete', user, 'remove=True')).toBe(true)
    expect(await call(fleet, id, 'group.delete', group)).toBe(true)
    expect(await call(fleet, id, 'user.info', user)).toEqual({})
    await expect(stat(`/home/${user}-moved`)).rejects.toMatchObject({ code: 'ENOENT' })
    expect(await call(fleet, id, 'user.chshell', user, '/bin/sh')).toBe(`ERROR: User '${user}' does not exist`)
  })

  it('file, disk, status, network and environ on the real host', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-file-'))
    cleanups.push(() => rm(dir, { recursive: true, force: true }))
    const { fleet } = await host()
    const path = join(dir, 'app.conf')

    expect(await call(fleet, id, 'file.write', path, 'port = 80', 'debug = off')).toBe(`Wrote 2 lines to "${path}"`)
    expect(await call(fleet, id, 'file.replace', path, 'pattern=^port = (\\d+)$', 'repl=port = 8\\1')).toContain('+port = 880')
    expect(await call(fleet, id, 'file.read', path)).toBe('port = 880\ndebug = off\n')
    expect(await call(fleet, id, 'file.search', path, 'debug')).toBe(true)
    expect(await call(fleet, id, 'file.stats', path)).toMatchObject({ size: 23, type: 'file', user: 'root' })
    expect(await call(fleet, id, 'file.set_mode', path, '0640')).toBe('0640')
    expect(await call(fleet, id, 'file.find', dir, 'name=*.conf')).toEqual([path])
    expect(await call(fleet, id, 'file.read', 'relative/path')).toBe(`ERROR executing 'file.read': path must be an absolute path, got "relative/path"`)

    expect(await call(fleet, id, 'disk.usage')).toMatchObject({ '/': { capacity: expect.stringMatching(/%$/) } })
    expect(await call(fleet, id, 'disk.inodeusage')).toMatchObject({ '/': { inodes: expect.any(String) } })
    expect(await call(fleet, id, 'status.uptime')).toMatchObject({ seconds: expect.any(Number), users: expect.any(Number) })
    expect(Object.keys((await call(fleet, id, 'status.loadavg')) as object)).toEqual(['1-min', '5-min', '15-min'])
    expect(await call(fleet, id, 'status.meminfo')).toMatchObject({ MemTotal: { unit: 'kB' } })
    expect(await call(fleet, id, 'status.cpuinfo')).toMatchObject({ flags: expect.any(Array) })
    expect(await call(fleet, id, 'status.diskusage', '/')).toMatchObject({ '/': { total: expect.any(Number) } })
    expect(await call(fleet, id, 'status.netstats')).toMatchObject({ TcpExt: expect.any(Object) })

    // A port something listens on: the master's ret port, or on NATS (where the master binds nothing) the broker's.
    const retPort = transport === 'nats' ? fleet.natsServer!.port : (fleet.ports.get(transport)?.ret as number)
    expect(await call(fleet, id, 'network.interfaces')).toMatchObject({ lo: { up: true } })
    expect(await call(fleet, id, 'network.ip_addrs', 'include_loopback=True')).toContain('127.0.0.1')
    expect(await call(fleet, id, 'network.connect', '127.0.0.1', String(retPort))).toEqual({
      result: true,
      comment: `Successfully connected to 127.0.0.1 (127.0.0.1) on tcp port ${retPort}`,
    })
    const sockets = (await call(fleet, id, 'network.netstat')) as Record<string, unknown>[]
    expect(sockets).toContainEqual(expect.objectContaining({ proto: 'tcp', 'local-address': `127.0.0.1:${retPort}`, state: 'LISTEN' }))
    const routes = (await call(fleet, id, 'network.default_route', 'inet')) as Record<string, string>[]
    const table = await readFile('/proc/net/route', 'utf8')
    expect(routes.length).toBe(table.split('\n').filter((line) => /^\S+\s+00000000\s/.test(line) && /\s00000000\s+\d+\s+\d+\s+\d+\s*$/.test(line)).length)
    for (const route of routes) expect(route).toMatchObject({ addr_family: 'inet', destination: '0.0.0.0', netmask: '0.0.0.0' })
    // ping is the system's: where it is not installed, the error says so instead of a result.
    const ping = await call(fleet, id, 'network.ping', '127.0.0.1', 'return_boolean=True', 'timeout=5')
    const hasPing = await exec('sh', ['-c', 'command -v ping']).then(
      () => true,
      () => false,
    )
    if (hasPing) expect(ping).toBe(true)
    else expect(ping).toEqual(expect.stringContaining('ENOENT'))

    expect(await call(fleet, id, 'environ.setval', 'BRINE_E2E', 'enabled')).toBe('enabled')
    expect(await call(fleet, id, 'environ.get', 'BRINE_E2E')).toBe('enabled')
  })
})
