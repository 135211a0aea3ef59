import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stringify } from 'yaml'
import { MasterEvent } from '@brine/client'
import { tags, type BusEvent } from '@brine/common'
import { freeLoopbackPort } from '@brine/transport'

export type TransportName = 'zeromq' | 'tcp'

export interface FleetMinion {
  id: string
  transport: TransportName
  grains?: Record<string, unknown>
  /** Extra minion config keys. */
  config?: Record<string, unknown>
}

export interface FleetOptions {
  minions: FleetMinion[]
  /** Transports the master serves (default: every transport a minion uses, zeromq first). */
  transports?: TransportName[]
  /** auto_accept on the master (default true: a demo or bench fleet accepts its own minions). */
  autoAccept?: boolean
  /** Extra master config keys. */
  masterConfig?: Record<string, unknown>
  /** Log level passed to every daemon (default warning; the master always logs its start-up lines). */
  logLevel?: string
  /** Wait for every minion's `salt/minion/<id>/start` event (default: when autoAccept). */
  waitForMinions?: boolean
  /** Bound on every start-up wait, ms (default 30 s). */
  readyTimeoutMs?: number
  /** Node options for every daemon and swarm process, e.g. `['--cpu-prof', '--cpu-prof-dir', dir]`. */
  nodeArgs?: string[]
  /**
   * Run the brine* commands installed in this directory (e.g. `<prefix>/bin` of an `npm install -g`), executed as
   * a user runs them from the PATH, instead of this repository's built `packages/cli/dist/bin/*.js`.
   */
  binDir?: string
  /** Mode of the fleet's temporary root (default 0700); 0755 lets a daemon that switches to another user reach its files. */
  rootMode?: number
  /** The loopback address the master binds and its minions use (default 127.0.0.1; any 127.x.y.z works on Linux). */
  interface?: string
  /** Serve on the same port numbers as this fleet (on another `interface`): several upper masters of one syndic share Salt's `syndic_master_port`. */
  portsFrom?: Fleet
  /**
   * Makes this fleet a syndic node under another fleet's master: a `brine-syndic` beside this fleet's
   * master, its keys in the master's config file as in Salt, connected to the upper fleet's master.
   */
  syndic?: FleetSyndic
}

/** A syndic beside a fleet's master, connected to an upper fleet's master. */
export interface FleetSyndic {
  /** The syndic's id (what the upper master sees and accepts). */
  id: string
  /** The upper masters (their fleets); several make a multi-syndic. */
  upper: Fleet | Fleet[]
  /** The transport to the upper masters (each must serve it). */
  transport: TransportName
  /** Extra config keys for the syndic (`--set key=value` on its command line), e.g. `syndic_wait`. */
  config?: Record<string, unknown>
  /** Wait for `salt/syndic/<id>/start` on every upper master (default: when the upper master auto-accepts). */
  waitForStart?: boolean
}

export interface RunResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/**
 * This package's directory: found by walking up, because this module runs from src/ (tests),
 * dist/index.js and dist/bin/*.js (each bundle has its own import.meta.url).
 */
function benchRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, 'package.json')
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === '@brine/bench') return dir
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`cannot find @brine/bench's package.json above ${fileURLToPath(import.meta.url)}`)
    dir = parent
  }
}

const BENCH_ROOT = benchRoot()
/** The built command-line entry points, beside this package in the repository. */
const BIN_DIR = join(BENCH_ROOT, '../cli/dist/bin')
export const binPath = (name: string): string => join(BIN_DIR, `${name}.js`)
/** The built swarm entry point of this package (`npm run build` first). */
export const swarmBinPath = join(BENCH_ROOT, 'dist/bin/brine-swarm.js')

/** Every daemon process any fleet in this process started, so an interrupt can stop them all. */
const liveProcesses = new Set<ChildProcess>()

/** A daemon started as a real process in its own process group, with what it printed so far. */
export class DaemonProcess {
  stderr = ''
  stdout = ''
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private readonly watchers = new Set<() => void>()

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    liveProcesses.add(child)
    child.stdout?.on('data', (chunk: Buffer) => {
      this.stdout += chunk.toString()
      this.notify()
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString()
      this.notify()
    })
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        liveProcesses.delete(child)
        this.notify()
        resolve({ code, signal })
      })
    })
  }

  get pid(): number {
    return this.child.pid ?? -1
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  private notify(): void {
    for (const watcher of this.watchers) watcher()
  }

  /** Waits until stderr+stdout match `pattern`; fails naming the pattern, or at once if the process exits. */
  waitForOutput(pattern: RegExp, ms: number): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const match = (this.stderr + this.stdout).match(pattern)
        if (match !== null) finish(() => resolve(match))
        else if (!this.running) finish(() => reject(new Error(`${this.name} (pid ${this.pid}) exited before printing ${pattern}:\n${this.stderr}`)))
      }
      const timer = setTimeout(() => finish(() => reject(new Error(`${this.name} (pid ${this.pid}) did not print ${pattern} within ${ms} ms:\n${this.stderr}`))), ms)
      const finish = (settle: () => void): void => {
        clearTimeout(timer)
        this.watchers.delete(check)
        settle()
      }
      this.watchers.add(check)
      check()
    })
  }

  /** Sends `signal` to the process group and waits (bounded) for the exit; SIGKILL after `ms`. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', ms = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.running) return this.exited
    killGroup(this.child, signal)
    const timer = setTimeout(() => killGroup(this.child, 'SIGKILL'), ms)
    const result = await this.exited
    clearTimeout(timer)
    return result
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // The group is already gone.
  }
}

/** Kills every daemon any fleet started (by pid, as a group); for signal handlers and test teardown. */
export function killAllFleetProcesses(): void {
  for (const child of liveProcesses) killGroup(child, 'SIGKILL')
}

/** Whether `pid` is a running process (a zombie awaiting its reaper counts as gone). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').startsWith('Z')
  } catch {
    return false
  }
}

/** Resident memory of `pid` from /proc/<pid>/status (`VmRSS`, or `VmHWM` for the peak), in bytes; 0 if gone. */
export function rssBytes(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match === null ? 0 : Number(match[1]) * 1024
  } catch {
    return 0
  }
}


/**
 * A master and its minions as real processes on loopback, in a temporary root: what the README demo,
 * the end-to-end tests and the bench run. Everything it starts, it stops by pid.
 */
export interface SwarmOptions {
  /** Minion instances in this process. */
  count: number
  transport: TransportName
  /** Id prefix; the ids are `<prefix><index>` with index 0…count-1. */
  prefix: string
  /** Extra minion config keys for every instance. */
  config?: Record<string, unknown>
  /** How many instances start at once (default 50): keys, grains and connects are spread out. */
  batch?: number
}

/** One brine-swarm process: many real Minion instances sharing one Node process. */
export interface SwarmProcess {
  process: DaemonProcess
  ids: string[]
  transport: TransportName
}

export class Fleet {
  readonly minions = new Map<string, DaemonProcess>()
  readonly swarms: SwarmProcess[] = []
  master!: DaemonProcess
  /** The brine-syndic beside this fleet's master, when the fleet is a syndic node. */
  syndic: DaemonProcess | undefined
  /** Every pid this fleet spawned (daemons, swarms, restarted masters), for after-the-fact checks. */
  readonly spawnedPids: number[] = []
  readonly ports = new Map<TransportName, { publish: number; ret: number }>()
  readonly transports: TransportName[]
  private events: MasterEvent | undefined
  private readonly startEvents: BusEvent[] = []
  private readonly startWatchers = new Set<() => void>()
  private readonly readyMs: number

  private constructor(
    readonly root: string,
    readonly options: FleetOptions,
  ) {
    const used = new Set(options.minions.map((minion) => minion.transport))
    this.transports = options.transports ?? (['zeromq', 'tcp'] as const).filter((name) => used.has(name))
    if (this.transports.length === 0) this.transports.push('zeromq')
    this.readyMs = options.readyTimeoutMs ?? 30_000
  }

  static async start(options: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(await mkdtemp(join(tmpdir(), 'brine-')), options)
    if (options.rootMode !== undefined) await chmod(fleet.root, options.rootMode)
    try {
      await fleet.startMaster()
      await Promise.all(options.minions.map((minion) => fleet.startMinion(minion)))
      if (options.waitForMinions ?? options.autoAccept ?? true) {
        await Promise.all(options.minions.map((minion) => fleet.waitForMinionStart(minion.id)))
      }
      if (options.syndic !== undefined) {
        const uppers = Array.isArray(options.syndic.upper) ? options.syndic.upper : [options.syndic.upper]
        const marks = uppers.map((upper) => upper.startEventCount)
        await fleet.launchSyndic()
        if (options.syndic.waitForStart ?? uppers.every((upper) => upper.options.autoAccept ?? true)) {
          await Promise.all(uppers.map((upper, index) => upper.waitForSyndicStart(options.syndic!.id, marks[index])))
        }
      }
      return fleet
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }

  /** Master config directory (pass as `-c`). */
  get masterConfigDir(): string {
    return join(this.root, 'master')
  }

  minionConfigDir(id: string): string {
    return join(this.root, 'minions', id)
  }

  /** Where the master's event bus lives (its sock_dir under the fleet's root_dir). */
  get sockDir(): string {
    return join(this.masterConfigDir, 'var/run/brine/master')
  }

  /** The address this fleet's master binds and its minions connect to. */
  get host(): string {
    return this.options.interface ?? '127.0.0.1'
  }

  private async startMaster(): Promise<void> {
    for (const transport of this.transports) {
      const shared = this.options.portsFrom?.ports.get(transport)
      this.ports.set(transport, shared ?? { publish: await freeLoopbackPort(), ret: await freeLoopbackPort() })
    }
    const [first, ...others] = this.transports
    const portsOf = (name: TransportName) => this.ports.get(name)!
    const config: Record<string, unknown> = {
      root_dir: this.masterConfigDir,
      interface: this.host,
      transport: first,
      publish_port: portsOf(first!).publish,
      ret_port: portsOf(first!).ret,
      auto_accept: this.options.autoAccept ?? true,
      worker_threads: 2,
      ...this.options.masterConfig,
    }
    if (others.length > 0) {
      config['transport_opts'] = Object.fromEntries(others.map((name) => [name, { publish_port: portsOf(name).publish, ret_port: portsOf(name).ret }]))
    }
    const syndic = this.options.syndic
    if (syndic !== undefined) {
      // Salt's syndic keys live in the master's config file. Every upper master serves the syndic's transport on its own ports.
      const uppers = Array.isArray(syndic.upper) ? syndic.upper : [syndic.upper]
      const portsAbove = uppers.map((upper) => {
        const ports = upper.ports.get(syndic.transport)
        if (ports === undefined) throw new Error(`the upper fleet's master does not serve ${syndic.transport}`)
        return ports
      })
      const [first] = portsAbove
      if (portsAbove.some((ports) => ports.ret !== first!.ret || ports.publish !== first!.publish)) {
        // Salt's syndic_master_port is one port for every upper master: give them one (portsFrom) on distinct hosts (interface).
        throw new Error('the upper fleets of a multi-syndic must serve the same ports (FleetOptions.portsFrom) on distinct interfaces')
      }
      config['syndic_master'] = uppers.length === 1 ? uppers[0]!.host : uppers.map((upper) => upper.host)
      config['syndic_master_port'] = first!.ret
      config['syndic_master_publish_port'] = first!.publish
      config['syndic_transport'] = syndic.transport
    }
    await mkdir(this.masterConfigDir, { recursive: true })
    await writeFile(join(this.masterConfigDir, 'master'), stringify(config))
    await this.launchMaster()
  }

  /**
   * Starts (or restarts) this fleet's brine-syndic (the fleet must have `syndic` options) and waits for
   * its start-up line; `salt/syndic/<id>/start` on the upper master comes after the upper master accepts it.
   */
  async launchSyndic(): Promise<DaemonProcess> {
    const syndic = this.options.syndic
    if (syndic === undefined) throw new Error('this fleet has no syndic (FleetOptions.syndic)')
    const settings = { acceptance_wait_time: 0.2, ...syndic.config }
    const sets = Object.entries(settings).flatMap(([key, value]) => ['--set', `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`])
    this.syndic = this.spawnDaemon(`brine-syndic ${syndic.id}`, ['-c', this.masterConfigDir, '-l', 'info', '--id', syndic.id, ...sets], 'brine-syndic')
    await this.syndic.waitForOutput(new RegExp(`syndic ${syndic.id}: transport`), this.readyMs)
    return this.syndic
  }

  /** Starts (or restarts) the master process and waits for every transport's start-up line. */
  async launchMaster(): Promise<DaemonProcess> {
    // A restarted master: the bus reader must be back before launchMaster returns, so what the master fires from then on is read.
    const reconnected = this.events?.nextConnection()
    this.master = this.spawnDaemon('brine-master', ['-c', this.masterConfigDir, '-l', 'info'])
    for (const transport of this.transports) {
      await this.master.waitForOutput(new RegExp(`transport ${transport}: publish`), this.readyMs)
    }
    await this.connectEvents()
    if (reconnected !== undefined) await this.within(reconnected, "the fleet's bus reader to reconnect to the restarted master")
    return this.master
  }

  /** `promise`, or an error naming `what` after the fleet's ready timeout. */
  private async within<T>(promise: Promise<T>, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`gave up after ${this.readyMs} ms waiting for ${what}`)), this.readyMs)))
    try {
      return await Promise.race([promise, expired])
    } finally {
      clearTimeout(timer)
    }
  }

  private async connectEvents(): Promise<void> {
    if (this.events !== undefined) return
    // Reconnects fast: after a master restart the reader is back before the minions (which back off for a second) return.
    this.events = new MasterEvent({ sockDir: this.sockDir, reconnect: { initial: 10, max: 20 } })
    await this.events.connect()
    void (async () => {
      for await (const event of this.events!.iter({ match: '^(salt/minion/|salt/syndic/|salt/auth$)', matchType: 'regex', hwm: 1_000_000 })) {
        this.startEvents.push(event)
        for (const watcher of this.startWatchers) watcher()
      }
    })()
  }

  /** The master's bus, connected; it reconnects on its own after a master restart. */
  get bus(): MasterEvent {
    if (this.events === undefined) throw new Error('the fleet has no master yet')
    return this.events
  }

  async startMinion(minion: FleetMinion): Promise<DaemonProcess> {
    const dir = await this.writeMinionConfig(minion)
    const process = this.spawnDaemon(`brine-minion ${minion.id}`, ['-c', dir, '-l', this.options.logLevel ?? 'warning'], 'brine-minion')
    this.minions.set(minion.id, process)
    return process
  }

  /** Writes one minion config directory (`<root>/minions/<id>/minion`) and returns it. */
  private async writeMinionConfig(minion: FleetMinion): Promise<string> {
    const dir = this.minionConfigDir(minion.id)
    const ports = this.ports.get(minion.transport)
    if (ports === undefined) throw new Error(`the fleet's master does not serve ${minion.transport}`)
    await mkdir(dir, { recursive: true })
    const config = {
      root_dir: dir,
      id: minion.id,
      master: this.host,
      master_port: ports.ret,
      publish_port: ports.publish,
      transport: minion.transport,
      acceptance_wait_time: 0.2,
      grains: minion.grains ?? {},
      ...minion.config,
    }
    await writeFile(join(dir, 'minion'), stringify(config))
    return dir
  }

  /** Waits for `salt/minion/<id>/start` on the master's bus (at or after event index `from`). */
  waitForMinionStart(id: string, from = 0): Promise<void> {
    const tag = tags.minionStart(id)
    return this.waitForEvent((event) => event.tag === tag, `minion ${id} to fire ${tag}`, id, from)
  }

  /** Waits for `salt/syndic/<id>/start` on this fleet's master (a syndic below it connected; at or after event index `from`). */
  waitForSyndicStart(id: string, from = 0): Promise<void> {
    const tag = tags.syndicStart(id)
    return this.waitForEvent((event) => event.tag === tag, `syndic ${id} to fire ${tag}`, id, from)
  }

  /** Waits for a `salt/auth` event of `act` (e.g. 'pend' once a pending minion has asked) for `id`. */
  waitForAuth(id: string, act: string, from = 0): Promise<void> {
    return this.waitForEvent(
      (event) => event.tag === tags.auth && event.data['id'] === id && event.data['act'] === act,
      `a salt/auth '${act}' event for ${id}`,
      id,
      from,
    )
  }

  private waitForEvent(predicate: (event: BusEvent) => boolean, what: string, id: string, from: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const minion = this.minions.get(id) ?? this.swarms.find((swarm) => swarm.ids.includes(id))?.process
      const finish = (settle: () => void): void => {
        clearTimeout(timer)
        this.startWatchers.delete(check)
        settle()
      }
      // Each check scans only the events it has not seen: a swarm waits on 1,000s of these at once.
      let scanned = from
      const check = (): void => {
        for (; scanned < this.startEvents.length; scanned++) {
          if (predicate(this.startEvents[scanned]!)) return finish(resolve)
        }
      }
      const timer = setTimeout(() => finish(() => reject(new Error(`gave up after ${this.readyMs} ms waiting for ${what}:\n${minion?.stderr ?? ''}`))), this.readyMs)
      void minion?.exited.then(() => finish(() => reject(new Error(`minion ${id} exited while waiting for ${what}:\n${minion.stderr}`))))
      this.startWatchers.add(check)
      check()
    })
  }

  /** How many minion and auth events have been seen; pass as `from` to wait for a later one. */
  get startEventCount(): number {
    return this.startEvents.length
  }

  /**
   * Starts one `brine-swarm` process running `count` real Minion instances (ids `<prefix>0`…), each
   * with its own config directory, keys, cache and sockets, as Salt's tests/minionswarm.py does.
   * Resolves when the process has started every instance (not when their keys are accepted: use
   * {@link waitForMinionStart}).
   */
  async startSwarm(options: SwarmOptions): Promise<SwarmProcess> {
    const ids = Array.from({ length: options.count }, (_, index) => `${options.prefix}${index}`)
    for (const id of ids) await this.writeMinionConfig({ id, transport: options.transport, config: options.config })
    const args = [swarmBinPath, '--dir', join(this.root, 'minions'), '--prefix', options.prefix, '--count', String(options.count)]
    args.push('--batch', String(options.batch ?? 50), '-l', this.options.logLevel ?? 'warning')
    const child = spawn(process.execPath, [...(this.options.nodeArgs ?? []), ...args], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    if (child.pid !== undefined) this.spawnedPids.push(child.pid)
    const swarm: SwarmProcess = { process: new DaemonProcess(`brine-swarm ${options.prefix}*`, child), ids, transport: options.transport }
    this.swarms.push(swarm)
    await swarm.process.waitForOutput(/brine-swarm: \d+ minions started/, Math.max(this.readyMs, options.count * 100))
    return swarm
  }

  /** The command line that starts `bin`: the installed command itself with `binDir`, else node and the built file. */
  private command(bin: string, args: string[], nodeArgs: readonly string[] = []): [string, string[]] {
    if (this.options.binDir !== undefined) return [join(this.options.binDir, bin), args]
    return [process.execPath, [...nodeArgs, binPath(bin), ...args]]
  }

  private spawnDaemon(name: string, args: string[], bin = name): DaemonProcess {
    const [command, argv] = this.command(bin, args, this.options.nodeArgs)
    const child = spawn(command, argv, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    if (child.pid !== undefined) this.spawnedPids.push(child.pid)
    return new DaemonProcess(name, child)
  }

  /**
   * Runs one of the CLIs to completion, bounded by `ms`, with `-c` set to the master's config directory
   * (or `configDir`, e.g. a minion's for brine-call).
   */
  run(bin: string, args: string[], options: { ms?: number; env?: NodeJS.ProcessEnv; configDir?: string } = {}): Promise<RunResult> {
    const ms = options.ms ?? 60_000
    const [executable, argv] = this.command(bin, ['-c', options.configDir ?? this.masterConfigDir, ...args])
    const child = spawn(executable, argv, {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: options.env ?? process.env,
    })
    const command = new DaemonProcess(`${bin} ${args.join(' ')}`, child)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        killGroup(child, 'SIGKILL')
        reject(new Error(`${command.name} did not finish within ${ms} ms\nstdout:\n${command.stdout}\nstderr:\n${command.stderr}`))
      }, ms)
      void command.exited.then(({ code, signal }) => {
        clearTimeout(timer)
        resolve({ code, signal, stdout: command.stdout, stderr: command.stderr })
      })
    })
  }

  /** Stops every process (SIGTERM, then SIGKILL when bounded waits run out) and removes the root. */
  async stop(options: { keepRoot?: boolean } = {}): Promise<void> {
    await this.events?.close()
    this.events = undefined
    await this.syndic?.stop()
    await Promise.all([...this.minions.values(), ...this.swarms.map((swarm) => swarm.process)].map((minion) => minion.stop()))
    if (this.master !== undefined) await this.master.stop()
    if (!options.keepRoot) await rm(this.root, { recursive: true, force: true })
  }
}
