import { execFileSync } from 'node:child_process'
import { readFileSync, statSync, watch } from 'node:fs'
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { binPath } from '@brine/harness'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { killAll, REPO_ROOT, run } from './helpers/processes.js'

// Operating the daemons as a service would: log_file, logrotate's SIGHUP, pidfile, `user:` and --check-config,
// on real processes. The tests run as root here, so the master really switches to `nobody`.
const FILE_WAIT_MS = 15_000
const COMMAND_MS = 60_000

afterAll(() => killAll())
const startFleet = useFleets()

const nobody = {
  uid: Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' })),
  gid: Number(execFileSync('id', ['-g', 'nobody'], { encoding: 'utf8' })),
}

/** Resolves with the text of `path` once `ready(text)` holds, checking on every change in its directory; fails after `ms` naming `what`. */
function waitForFile(path: string, ready: (text: string) => boolean, ms: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      let text: string
      try {
        text = readFileSync(path, 'utf8')
      } catch {
        return // not there yet
      }
      if (ready(text)) finish(() => resolve(text))
    }
    const watcher = watch(dirname(path), check)
    const timer = setTimeout(() => finish(() => reject(new Error(`gave up after ${ms} ms waiting for ${what} in ${path}`))), ms)
    const finish = (settle: () => void): void => {
      clearTimeout(timer)
      watcher.close()
      settle()
    }
    check()
  })
}

/** The postrotate script of packaging/logrotate/brine, with its pidfiles replaced by `pidfiles`. */
async function postrotateScript(pidfiles: string[]): Promise<string> {
  const snippet = await readFile(join(REPO_ROOT, 'packaging/logrotate/brine'), 'utf8')
  const script = /^\s*postrotate\n([\s\S]*?)^\s*endscript$/m.exec(snippet)?.[1]
  expect(script).toContain('/var/run/brine-master.pid /var/run/brine-minion.pid')
  return script!.replace('/var/run/brine-master.pid /var/run/brine-minion.pid', pidfiles.join(' '))
}

describe.each(TRANSPORTS)('a master configured with user: nobody, started as root, over %s', (transport) => {
  it('switches to nobody after binding and reading its keys, and still accepts keys, stores jobs, logs, rotates its log and removes its pidfile', async () => {
    const fleet = await startFleet({
      minions: [{ id: 'web1', transport }],
      masterConfig: { user: 'nobody', log_level_logfile: 'info' },
      rootMode: 0o755,
    })
    const master = fleet.master
    const status = readFileSync(`/proc/${master.pid}/status`, 'utf8')
    expect(status).toMatch(new RegExp(`^Uid:\\t${nobody.uid}\\t${nobody.uid}\\t${nobody.uid}\\t${nobody.uid}$`, 'm'))
    expect(status).toMatch(new RegExp(`^Gid:\\t${nobody.gid}\\t${nobody.gid}\\t${nobody.gid}\\t${nobody.gid}$`, 'm'))
    await master.waitForOutput(/running as user nobody/, FILE_WAIT_MS)

    // A minion that arrives after the switch: the master, now nobody, stores its key and its returns.
    await fleet.startMinion({ id: 'web2', transport })
    await fleet.waitForMinionStart('web2')
    const pki = join(fleet.masterConfigDir, 'etc/brine/pki/master')
    expect(statSync(join(pki, 'minions/web2')).uid).toBe(nobody.uid)
    const ping = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(JSON.parse(ping.stdout)).toEqual({ web1: true, web2: true })
    const jobs = join(fleet.masterConfigDir, 'var/cache/brine/master/jobs')
    expect(statSync(jobs).uid).toBe(nobody.uid)

    // log_file, at log_level_logfile, owned by the user the master runs as; pidfile holds the master's pid.
    const logFile = join(fleet.masterConfigDir, 'var/log/brine/master')
    const pidfile = join(fleet.masterConfigDir, 'var/run/brine-master.pid')
    expect(await readFile(logFile, 'utf8')).toMatch(/\[INFO {4}\] \[brine-master\] running as user nobody/)
    expect(statSync(logFile).uid).toBe(nobody.uid)
    expect(await readFile(pidfile, 'utf8')).toBe(`${master.pid}\n`)
    const minionPidfile = join(fleet.minionConfigDir('web1'), 'var/run/brine-minion.pid')
    expect(await readFile(minionPidfile, 'utf8')).toBe(`${fleet.minions.get('web1')!.pid}\n`)

    // logrotate: the file is moved, then the snippet's postrotate sends SIGHUP through the pidfiles.
    await rename(logFile, `${logFile}.1`)
    const minionLog = join(fleet.minionConfigDir('web1'), 'var/log/brine/minion')
    await rename(minionLog, `${minionLog}.1`)
    const rotated = await run('sh', ['-c', await postrotateScript([pidfile, minionPidfile])], { ms: COMMAND_MS })
    expect(rotated.code).toBe(0)
    const fresh = await waitForFile(logFile, (text) => text.includes('reopened log_file'), FILE_WAIT_MS, 'the master to reopen its log file')
    expect(fresh).toMatch(/^\S+ \[INFO {4}\] \[brine-master\] reopened log_file /)
    expect(statSync(logFile).uid).toBe(nobody.uid)
    await waitForFile(minionLog, () => true, FILE_WAIT_MS, 'the minion to open a new log file')
    const again = await fleet.run('brine', ['web1', 'test.ping'])
    expect(again.stdout).toBe('web1:\n    True\n')
    expect(master.running).toBe(true)
    expect(await readFile(`${logFile}.1`, 'utf8')).not.toContain('reopened log_file')

    expect(await master.stop('SIGTERM')).toEqual({ code: 0, signal: null })
    expect(() => statSync(pidfile)).toThrow(/ENOENT/)
    // The shutdown is logged to the file opened after the rotation, with the worker pool's account after it.
    const afterRotation = await readFile(logFile, 'utf8')
    expect(afterRotation).toMatch(/\] brine-master stopping\n/)
    expect(afterRotation).toMatch(/worker_threads: \d+ task\(s\) ran on \d+ of \d+ worker threads.*\n$/)
  })
})

describe('--check-config on the built daemons', () => {
  it('lists every problem of every file with its line and exits 1; a clean config exits 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'brine-check-e2e-'))
    try {
      await writeFile(join(dir, 'master'), 'interface: 127.0.0.1\npublish_port: 99999\ntimeout: soon\nuser: no-such-user-here\n')
      await mkdir(join(dir, 'master.d'))
      await writeFile(join(dir, 'master.d', 'cache.conf'), 'keep_jobs: forever\ntransport: zmq\n')
      const bad = await run(process.execPath, [binPath('brine-master'), '-c', dir, '--check-config'], { ms: COMMAND_MS })
      const main = join(dir, 'master')
      const cache = join(dir, 'master.d', 'cache.conf')
      expect(bad.code).toBe(1)
      expect(bad.stdout.split('\n').map((line) => line.split(': error: ')[0])).toEqual([
        `${main}:2`,
        `${main}:3`,
        `${main}:4`,
        `${cache}:1`,
        `${cache}:2`,
        `brine-master: config has errors: 5 errors, 0 warnings (${main}, ${cache})`,
        '',
      ])
      expect(bad.stdout).toContain(`${main}:2: error: publish_port must be a port number (an integer from 0 to 65535), got number 99999\n`)

      await writeFile(join(dir, 'minion'), 'id: web1\nmaster: 127.0.0.1\ntransport: tcp\n')
      const clean = await run(process.execPath, [binPath('brine-minion'), '-c', dir, '--check-config'], { ms: COMMAND_MS })
      expect({ code: clean.code, out: clean.stdout, err: clean.stderr }).toEqual({
        code: 0,
        out: `brine-minion: config OK: 0 errors, 0 warnings (${join(dir, 'minion')})\n`,
        err: '',
      })
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
