import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { MasterConfig, MinionConfig, SyndicConfig } from '@brine/config'
import { deadline, deferred } from '@brine/transport-compliance'
import { runApi } from '../src/commands/api.js'
import { runMaster, runMinion, runSyndic, type Daemon } from '../src/commands/daemon.js'
import { heapGrowthFlag, MASTER_HEAP_GROWING_PERCENT, WORKER_HEAP_FLAG } from '../src/daemon-process.js'
import { MINION_IDLE_COLLECTION, type IdleCollection } from '../src/idle-collector.js'
import { memoryIO } from './helpers.js'

let dir = ''
/** A config directory with no config file in it: the daemon runs on defaults and the flags given. */
const emptyConfigDir = (): string => join(dir, 'empty')
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'brine-daemon-'))
  await mkdir(emptyConfigDir())
})
afterAll(() => rm(dir, { recursive: true, force: true }))

/** A daemon class that records its config and lifecycle. */
function fakeDaemon<C>(options: { failStart?: string; onStart?: () => void } = {}) {
  const record = { opts: undefined as C | undefined, started: deferred(), stopped: 0 }
  class FakeDaemon implements Daemon {
    constructor(opts: C) {
      record.opts = opts
    }
    async start(): Promise<void> {
      if (options.failStart !== undefined) throw new Error(options.failStart)
      options.onStart?.()
      record.started.resolve()
    }
    async stop(): Promise<void> {
      record.stopped++
    }
  }
  return { record, load: async () => FakeDaemon }
}

describe('brine-master and brine-minion', () => {
  it('start with flag overrides and stop cleanly when signalled (exit 0)', async () => {
    const { record, load } = fakeDaemon<MasterConfig>()
    const controller = new AbortController()
    const io = memoryIO({ signal: controller.signal })
    const running = runMaster(['-c', dir, '--root-dir', dir, '--transport', 'tcp', '--ret-port', '4606', '--set', 'timeout=9'], io, { load })
    await deadline(record.started.promise, 5000, 'the master to start')
    expect(record.opts).toMatchObject({ transport: 'tcp', ret_port: 4606, timeout: 9 })
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    expect(record.stopped).toBe(1)
  })

  it("keeps its config file's parse in the user's cache, and a second start reads the same config from it", async () => {
    const configDir = join(dir, 'cached')
    await mkdir(configDir)
    await writeFile(join(configDir, 'minion'), `root_dir: ${configDir}\nid: web2\nmaster: [m1, m2]\nrandom_reauth_delay: 0.5\n`)
    const env = { XDG_CACHE_HOME: join(dir, 'cache') }
    const starts: MinionConfig[] = []
    for (let run = 0; run < 2; run++) {
      const minion = fakeDaemon<MinionConfig>()
      const controller = new AbortController()
      const running = runMinion(['-c', configDir], { ...memoryIO({ signal: controller.signal }), env }, { load: minion.load })
      await deadline(minion.record.started.promise, 5000, 'the minion to start')
      controller.abort()
      expect(await deadline(running, 5000, 'the minion to stop')).toBe(0)
      starts.push(minion.record.opts!)
      expect(await readdir(join(dir, 'cache', 'brine', 'config'))).toHaveLength(1)
    }
    expect(starts[0]).toMatchObject({ id: 'web2', master: ['m1', 'm2'], random_reauth_delay: 0.5 })
    expect(starts[1]).toEqual(starts[0])
  })

  it('the master sets its heap growth once started, unless its node command line names one, and clears the semi-space bound its workers would inherit; a minion sets none', async () => {
    const flags: string[] = []
    const setV8Flags = (value: string): void => {
      flags.push(value)
    }
    const master = fakeDaemon<MasterConfig>({ onStart: () => flags.push('started') })
    const controller = new AbortController()
    // The governor's own flags (the test process's resident size decides them) are the next test's.
    const heapGovernor = () => ({ start: () => {}, stop: () => {} })
    const running = runMaster(['-c', dir, '--root-dir', dir], memoryIO({ signal: controller.signal }), { load: master.load, setV8Flags, heapGovernor })
    await deadline(master.record.started.promise, 5000, 'the master to start')
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    expect(flags).toEqual(['started', `--heap-growing-percent=${MASTER_HEAP_GROWING_PERCENT}`, WORKER_HEAP_FLAG])

    const minion = fakeDaemon<MinionConfig>()
    const stopMinion = new AbortController()
    const minionRun = runMinion(['-c', dir, '--root-dir', dir, '--id', 'web1'], memoryIO({ signal: stopMinion.signal }), { load: minion.load, setV8Flags })
    await deadline(minion.record.started.promise, 5000, 'the minion to start')
    stopMinion.abort()
    expect(await deadline(minionRun, 5000, 'the minion to stop')).toBe(0)
    expect(flags).toHaveLength(3)

    expect(heapGrowthFlag('master', ['--heap-growing-percent=0'])).toBeUndefined()
    expect(heapGrowthFlag('master', ['--heap_growing_percent', '50'])).toBeUndefined()
    expect(heapGrowthFlag('master', ['--heap-growing-percentage=5', '--max-old-space-size=4096'])).toBe(`--heap-growing-percent=${MASTER_HEAP_GROWING_PERCENT}`)
    expect(heapGrowthFlag('syndic', [])).toBeUndefined()
  })

  it('the master governs its heap growth from the share it set, through the same flag setter, while it runs; a minion does not', async () => {
    const steps: string[] = []
    const setV8Flags = (value: string): void => {
      steps.push(value)
    }
    const heapGovernor = (setGrowingPercent: (percent: number) => void, relaxedPercent: number) => {
      steps.push(`governor from ${relaxedPercent}`)
      return {
        start: () => {
          steps.push('governor started')
          setGrowingPercent(25)
        },
        stop: () => steps.push('governor stopped'),
      }
    }
    const master = fakeDaemon<MasterConfig>({ onStart: () => steps.push('master started') })
    const controller = new AbortController()
    const running = runMaster(['-c', dir, '--root-dir', dir], memoryIO({ signal: controller.signal }), { load: master.load, setV8Flags, heapGovernor })
    await deadline(master.record.started.promise, 5000, 'the master to start')
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    expect(steps).toEqual([
      'master started',
      `--heap-growing-percent=${MASTER_HEAP_GROWING_PERCENT}`,
      `governor from ${MASTER_HEAP_GROWING_PERCENT}`,
      'governor started',
      '--heap-growing-percent=25',
      WORKER_HEAP_FLAG,
      'governor stopped',
    ])

    const minion = fakeDaemon<MinionConfig>()
    const stopMinion = new AbortController()
    const minionRun = runMinion(['-c', dir, '--root-dir', dir, '--id', 'web1'], memoryIO({ signal: stopMinion.signal }), {
      load: minion.load,
      setV8Flags,
      heapGovernor,
    })
    await deadline(minion.record.started.promise, 5000, 'the minion to start')
    stopMinion.abort()
    expect(await deadline(minionRun, 5000, 'the minion to stop')).toBe(0)
    expect(steps).toHaveLength(7)
  })

  it('the master and a minion start their idle collectors once started, each with its settings, and stop them as they stop', async () => {
    const steps: string[] = []
    const settingsSeen: IdleCollection[] = []
    const idleCollector = (_logger: unknown, settings: IdleCollection) => {
      steps.push('made')
      settingsSeen.push(settings)
      return { start: () => steps.push('collector started'), stop: () => steps.push('collector stopped') }
    }
    const master = fakeDaemon<MasterConfig>({ onStart: () => steps.push('master started') })
    const controller = new AbortController()
    const running = runMaster(['-c', dir, '--root-dir', dir], memoryIO({ signal: controller.signal }), { load: master.load, idleCollector })
    await deadline(master.record.started.promise, 5000, 'the master to start')
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    expect(steps).toEqual(['master started', 'made', 'collector started', 'collector stopped'])

    const minion = fakeDaemon<MinionConfig>()
    const stopMinion = new AbortController()
    const minionRun = runMinion(['-c', dir, '--root-dir', dir, '--id', 'web1'], memoryIO({ signal: stopMinion.signal }), { load: minion.load, idleCollector })
    await deadline(minion.record.started.promise, 5000, 'the minion to start')
    stopMinion.abort()
    expect(await deadline(minionRun, 5000, 'the minion to stop')).toBe(0)
    expect(steps.slice(4)).toEqual(['made', 'collector started', 'collector stopped'])
    expect(settingsSeen).toEqual([{}, MINION_IDLE_COLLECTION])
  })

  it('exits 1 with the ConfigError text on a bad config', async () => {
    await writeFile(join(dir, 'minion'), 'id: web1\nmaster_port: lots\n')
    const io = memoryIO()
    expect(await runMinion(['-c', dir, '--root-dir', dir], io, { load: fakeDaemon<MinionConfig>().load })).toBe(1)
    expect(io.err()).toMatch(/^brine-minion: .*minion:2: master_port must be a port number/)
    const badFlag = memoryIO()
    expect(await runMinion(['-c', emptyConfigDir(), '--root-dir', dir, '--transport', 'zmq'], badFlag, { load: fakeDaemon<MinionConfig>().load })).toBe(1)
    expect(badFlag.err()).toMatch(/unknown transport 'zmq'.*did you mean 'zeromq'/)
  })

  it('exits 64 naming a -c directory that does not exist or is a file, instead of starting on defaults', async () => {
    for (const [given, problem] of [
      [join(dir, 'typo'), 'does not exist'],
      [join(dir, 'minion'), 'is not a directory'],
    ] as const) {
      await writeFile(join(dir, 'minion'), 'id: web1\n')
      const io = memoryIO()
      expect(await runMinion(['-c', given, '--root-dir', dir], io, { load: fakeDaemon<MinionConfig>().load })).toBe(64)
      expect(io.err()).toMatch(new RegExp(`\\nbrine-minion: error: config directory '${given}' \\(-c\\) ${problem}\\n$`))
    }
  })

  it('brine-master, brine-minion, brine-syndic and brine-api exit 1 naming a config file that is a symlink to nothing or a directory', async () => {
    const root = await mkdtemp(join(dir, 'unreadable-'))
    await symlink(join(root, 'gone'), join(root, 'master'))
    await mkdir(join(root, 'minion'))
    const runs: Array<[string, (io: ReturnType<typeof memoryIO>) => Promise<number>, string]> = [
      ['brine-master', (io) => runMaster(['-c', root], io, { load: fakeDaemon<MasterConfig>().load }), 'master'],
      ['brine-syndic', (io) => runSyndic(['-c', root], io, { load: fakeDaemon<SyndicConfig>().load }), 'master'],
      ['brine-api', (io) => runApi(['-c', root], io), 'master'],
      ['brine-minion', (io) => runMinion(['-c', root], io, { load: fakeDaemon<MinionConfig>().load }), 'minion'],
    ]
    for (const [bin, run, file] of runs) {
      const io = memoryIO()
      expect(await run(io)).toBe(1)
      const why =
        file === 'master'
          ? `config file is a symbolic link to ${JSON.stringify(join(root, 'gone'))}, which does not exist`
          : 'cannot read config file: it is a directory, not a file'
      expect(io.err()).toContain(`${join(root, file)}: ${why}`)
      expect(io.err()).toMatch(new RegExp(`^${bin}: `))
    }
  })

  it('brine-minion exits 1 naming the id rule for an id the master would refuse, instead of retrying forever', async () => {
    for (const [id, reason] of [
      ['a/b', 'contains a path separator'],
      ['m'.repeat(300), 'is 300 bytes long; the limit is 237'],
    ]) {
      const io = memoryIO()
      // The real Minion (the default loader): it refuses the id before it touches a key or a socket.
      expect(await runMinion(['-c', emptyConfigDir(), '--root-dir', dir, '--id', id!], io)).toBe(1)
      expect(io.err()).toContain(`brine-minion: cannot start: invalid minion id`)
      expect(io.err()).toContain(reason)
    }
  })

  it('exits 1 when the daemon cannot start, and refuses -d', async () => {
    const { load } = fakeDaemon<MinionConfig>({ failStart: 'address 0.0.0.0:4506 is already in use' })
    const io = memoryIO()
    expect(await runMinion(['-c', emptyConfigDir(), '--root-dir', dir, '--id', 'web1'], io, { load })).toBe(1)
    expect(io.err()).toBe('brine-minion: cannot start: address 0.0.0.0:4506 is already in use\n')
    const daemonize = memoryIO()
    expect(await runMaster(['-d'], daemonize, { load: fakeDaemon<MasterConfig>().load })).toBe(64)
    expect(daemonize.err()).toMatch(/-d\/--daemon is not supported/)
  })
})

describe('the daemon process: log_file, pidfile, user, --check-config', () => {
  it('logs to log_file at log_level_logfile, holds its pid in pidfile while running, reopens the log on SIGHUP and removes the pidfile on stop', async () => {
    const root = await mkdtemp(join(tmpdir(), 'brine-daemon-proc-'))
    const { record, load } = fakeDaemon<MasterConfig>()
    const controller = new AbortController()
    const io = memoryIO({ signal: controller.signal })
    const running = runMaster(['-c', root, '--root-dir', root, '--log-file-level', 'info', '-l', 'error'], io, { load })
    await deadline(record.started.promise, 5000, 'the master to start')
    const logFile = join(root, 'var/log/brine/master')
    const pidfile = join(root, 'var/run/brine-master.pid')
    expect(record.opts).toMatchObject({ log_file: logFile, pidfile, log_level_logfile: 'info' })
    expect(await readFile(pidfile, 'utf8')).toBe(`${process.pid}\n`)
    await deadline(
      until(async () => (await readFile(logFile, 'utf8')).includes('brine-master started')),
      5000,
      'the start line in log_file',
    )
    expect(io.err()).toBe('') // -l error keeps the console quiet

    await rename(logFile, `${logFile}.1`)
    process.emit('SIGHUP', 'SIGHUP')
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    expect(await readFile(`${logFile}.1`, 'utf8')).toMatch(/\[INFO {4}\] \[brine-master\] brine-master started \(transport zeromq, id .*, pid \d+\)\n$/)
    expect(await readFile(logFile, 'utf8')).toMatch(/reopened log_file .*\n.*brine-master stopping\n$/)
    expect(existsSync(pidfile)).toBe(false)
    expect(process.listenerCount('SIGHUP')).toBe(0)
    await rm(root, { recursive: true, force: true })
  })

  it('refuses to start when the pidfile names a running daemon of its kind, and replaces a stale one', async () => {
    const root = await mkdtemp(join(tmpdir(), 'brine-daemon-pid-'))
    const pidfile = join(root, 'master.pid')
    // A live process whose command line names brine-master, as a running master's does.
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', 'brine-master'], { stdio: 'ignore' })
    try {
      await writeFile(pidfile, `${other.pid}\n`)
      const io = memoryIO()
      const { record, load } = fakeDaemon<MasterConfig>()
      expect(await runMaster(['-c', root, '--root-dir', root, '--pid-file', pidfile], io, { load })).toBe(1)
      expect(io.err()).toBe(`brine-master: cannot start: brine-master is already running as pid ${other.pid} (pidfile ${pidfile}); stop it first\n`)
      expect(record.opts).toBeUndefined()
      expect(await readFile(pidfile, 'utf8')).toBe(`${other.pid}\n`)
    } finally {
      other.kill('SIGKILL')
    }
    await new Promise((resolve) => other.once('exit', resolve))
    // Its process is gone now: the pidfile is stale and a new daemon takes it over.
    const controller = new AbortController()
    const { record, load } = fakeDaemon<MasterConfig>()
    const running = runMaster(['-c', root, '--root-dir', root, '--pid-file', pidfile], memoryIO({ signal: controller.signal }), { load })
    await deadline(record.started.promise, 5000, 'the master to start over a stale pidfile')
    expect(await readFile(pidfile, 'utf8')).toBe(`${process.pid}\n`)
    controller.abort()
    expect(await deadline(running, 5000, 'the master to stop')).toBe(0)
    await rm(root, { recursive: true, force: true })
  })

  it('refuses a user that does not exist, before writing anything', async () => {
    const root = await mkdtemp(join(tmpdir(), 'brine-daemon-user-'))
    await writeFile(join(root, 'minion'), 'id: web1\nuser: no-such-user-here\n')
    const io = memoryIO()
    const { record, load } = fakeDaemon<MinionConfig>()
    expect(await runMinion(['-c', root, '--root-dir', root], io, { load })).toBe(1)
    expect(io.err()).toBe(`brine-minion: user 'no-such-user-here' (user at ${join(root, 'minion')}:2) does not exist\n`)
    expect(record.opts).toBeUndefined()
    expect(existsSync(join(root, 'var'))).toBe(false)
    await rm(root, { recursive: true, force: true })
  })

  it('--check-config prints every problem with file and line and exits 1; a clean config exits 0', async () => {
    const root = await mkdtemp(join(tmpdir(), 'brine-check-'))
    await writeFile(join(root, 'master'), 'publish_port: lots\ninterface: 127.0.0.1\nbogus_key: 1\nuser: no-such-user-here\n')
    await mkdir(join(root, 'master.d'))
    await writeFile(join(root, 'master.d', 'tuning.conf'), 'worker_threads: many\ntransport: zmq\n')
    const io = memoryIO()
    const { record, load } = fakeDaemon<MasterConfig>()
    expect(await runMaster(['-c', root, '--check-config', '--set', 'timeout=soon'], io, { load })).toBe(1)
    expect(record.opts).toBeUndefined()
    const main = join(root, 'master')
    const tuning = join(root, 'master.d', 'tuning.conf')
    expect(io.out().split('\n')).toEqual([
      `${main}:1: error: publish_port must be a port number (an integer from 0 to 65535), got string 'lots'`,
      `${main}:3: warning: unknown config key 'bogus_key'; ignored`,
      `${main}:4: error: user 'no-such-user-here' does not exist on this host`,
      `${tuning}:1: error: worker_threads must be an integer, got string 'many'`,
      expect.stringMatching(new RegExp(`^${tuning}:2: error: unknown transport 'zmq' .*did you mean 'zeromq'`)),
      "command line: error: timeout must be a number (seconds), got 'soon'",
      `brine-master: config has errors: 5 errors, 1 warning (${main}, ${tuning})`,
      '',
    ])

    await writeFile(join(root, 'minion'), 'id: web1\nmaster: 10.0.0.1\n')
    const clean = memoryIO()
    expect(await runMinion(['-c', root, '--check-config'], clean, { load: fakeDaemon<MinionConfig>().load })).toBe(0)
    expect(clean.out()).toBe(`brine-minion: config OK: 0 errors, 0 warnings (${join(root, 'minion')})\n`)
    const badId = memoryIO()
    expect(await runMinion(['-c', root, '--check-config', '--id', 'a/b'], badId, { load: fakeDaemon<MinionConfig>().load })).toBe(1)
    expect(badId.out()).toContain('command line: error: id "a/b" contains a path separator\n')
    await rm(root, { recursive: true, force: true })
  })
})

/** Resolves once `check` is true, checking again on each turn of the event loop (bound it with deadline()). */
async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check().catch(() => false))) await new Promise((resolve) => setImmediate(resolve))
}
