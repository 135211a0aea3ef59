import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { DaemonProcess, deadline, freeLoopbackPort, HarnessSetupError, NatsServerProcess, ProcessWaitError, runProcess, type RunResult } from '@brine/testkit'
import type { BrokerOptions } from '@brine/transport'
import { binPath, daemonStart, type DaemonStart } from './bins.js'

export type TransportName = 'zeromq' | 'tcp' | 'nats'

/** One event of the master's bus, as the fleet reads it. */
export interface FleetEvent {
  tag: string
  data: Record<string, unknown>
}

/** A reader of the master's event bus; `MasterEvent` from `@brine/client` is one. */
export interface FleetEventReader {
  connect(): Promise<void>
  iter(options: { match: string; matchType: 'regex'; hwm: number; signal?: AbortSignal }): AsyncIterable<FleetEvent>
  close(): Promise<void>
  /** Resolves at the reader's next connection (after a master restart); without it a restart does not wait for the reader. */
  nextConnection?(): Promise<void>
}

/**
 * How a fleet hears its master, handed in by the caller: `{ open: (options) => new MasterEvent(options), tags }`
 * with `MasterEvent` from `@brine/client` and `tags` from `@brine/protocol`.
 */
export interface FleetBus {
  /** Opens a reader of the bus under `sockDir` that reconnects by itself after a master restart. */
  open(options: { sockDir: string; reconnect: { initial: number; max: number } }): FleetEventReader
  /** The protocol's tags the fleet waits for: `salt/minion/<id>/start`, `salt/syndic/<id>/start` and `salt/auth`. */
  tags: { minionStart(id: string): string; syndicStart(id: string): string; readonly auth: string }
}

export interface FleetMinion {
  id: string
  transport: TransportName
  grains?: Record<string, unknown>
  /** Extra minion config keys. */
  config?: Record<string, unknown>
}

export interface FleetOptions {
  minions: FleetMinion[]
  /** The master's event bus, as this fleet reads it. */
  bus: FleetBus
  /** Transports the master serves (default: every transport a minion uses, zeromq first). */
  transports?: TransportName[]
  /** auto_accept on the master (default true: a demo or bench fleet accepts its own minions). */
  autoAccept?: boolean
  /** Extra master config keys. */
  masterConfig?: Record<string, unknown>
  /** Log level passed to every daemon (default warning; the master always logs its start-up lines). */
  logLevel?: string
  /**
   * Opens a wheel client on the master, handed in by the caller (`(options) => new WheelClient(options)` with
   * `WheelClient` from `@brine/client`): the harness's own key operations ({@link Fleet.acceptSyndic}) are then
   * wheel calls from this process instead of a `brine-key` process each. Without it they run `brine-key`.
   */
  wheel?: (options: { configDir: string }) => FleetWheelClient
  /** Wait for every minion's `salt/minion/<id>/start` event (default: when autoAccept). */
  waitForMinions?: boolean
  /** Bound on every start-up wait, ms (default 30 s). */
  readyTimeoutMs?: number
  /** Node options for every daemon and swarm process, e.g. `['--cpu-prof', '--cpu-prof-dir', dir]`. */
  nodeArgs?: string[]
  /**
   * Run the brine* commands installed in this directory (e.g. `<prefix>/bin` of an `npm install -g`), executed as
   * a user runs them from the PATH, instead of the commands of the `@brine/cli` package this harness resolves.
   */
  binDir?: string
  /** Mode of the fleet's temporary root (default 0700); 0755 lets a daemon that switches to another user reach its files. */
  rootMode?: number
  /**
   * A command the master runs under, its own arguments first, e.g. `['prlimit', '--nofile=1024:1024', '--']`
   * (it must exec the master in its place, so the pid is the master's).
   */
  masterPrefix?: readonly string[]
  /** The loopback address the master binds and its minions use (default 127.0.0.1; any 127.x.y.z works on Linux). */
  interface?: string
  /**
   * Servers in the fleet's own NATS cluster (default 1), routed to each other on loopback; the master and
   * minions use the first unless a minion's config names others (`nats_servers`).
   */
  natsCluster?: number
  /** Serve on the same port numbers as this fleet (on another `interface`): several upper masters of one syndic share Salt's `syndic_master_port`. */
  portsFrom?: Fleet
  /**
   * Use this fleet's nats-server, on ports of its own: two masters on one NATS cluster, told apart by their ports
   * (a broker has no hosts to tell them apart by, as `interface` does on the socket transports).
   */
  natsFrom?: Fleet
  /**
   * A nats-server of the caller's own for the master (e.g. the hub of a leaf-node topology): the fleet uses it
   * and neither starts nor stops it; minions use it too unless their config names others (`nats_servers`).
   */
  natsServer?: NatsServerProcess
  /**
   * Runs once the fleet's root exists (the path is passed in), before its broker and master start: what the caller
   * prepares before a timed launch (the bench makes its swarm minions' key pairs here).
   */
  beforeLaunch?: (root: string) => Promise<void>
  /**
   * Makes this fleet a syndic node under another fleet's master: a `brine-syndic` beside this fleet's
   * master, its keys in the master's config file as in Salt, connected to the upper fleet's master.
   */
  syndic?: FleetSyndic
}

/** A wheel client on a fleet's master, in the caller's process; `WheelClient` from `@brine/client` is one. */
export interface FleetWheelClient {
  cmd(fun: string, kwarg?: Record<string, unknown>): Promise<unknown>
  close(): Promise<void>
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
  /**
   * Once each upper master has accepted the syndic's key, mark it a syndic's there as an operator does
   * (`brine-key --accept-syndic ID -y`); only then does the upper master take its returns and events
   * (default: when the upper masters auto-accept).
   */
  acceptAsSyndic?: boolean
}

/** A process running many minions at once (the bench's brine-swarm). */
export interface SwarmProcess {
  process: DaemonProcess
  ids: string[]
  transport: TransportName
}

/** A command started without runtime flags or variables. */
const NO_RUNTIME: DaemonStart = { nodeArgs: [], vars: {} }

/** Stands in for an id while a tag is turned into a pattern. */
const ID_SLOT = '\u0000id\u0000'
const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A regex source matching the minion and syndic start tags and the auth tag, built from the protocol's own tag functions. */
function startupTagPattern(tags: FleetBus['tags']): string {
  const withId = (tag: (id: string) => string): string => escapeRegExp(tag(ID_SLOT)).replace(escapeRegExp(ID_SLOT), '[^/]+')
  return `^(?:${withId(tags.minionStart)}|${withId(tags.syndicStart)}|${escapeRegExp(tags.auth)})$`
}

/**
 * A master and its minions as real processes on loopback, in a temporary root: what the README demo,
 * the end-to-end tests and the bench run. Everything it starts, it stops by pid.
 */
export class Fleet {
  readonly minions = new Map<string, DaemonProcess>()
  readonly swarms: SwarmProcess[] = []
  /** brine-api processes started with {@link startApi}. */
  readonly apis: DaemonProcess[] = []
  master!: DaemonProcess
  /** The brine-syndic beside this fleet's master, when the fleet is a syndic node. */
  syndic: DaemonProcess | undefined
  /** Every pid this fleet spawned (daemons, swarms, restarted masters), for after-the-fact checks. */
  readonly spawnedPids: number[] = []
  readonly ports = new Map<TransportName, { publish: number; ret: number }>()
  readonly transports: TransportName[]
  /** The nats-server of a fleet that serves NATS (its own, or shared through `portsFrom`). */
  natsServer: NatsServerProcess | undefined
  /** Every server of the fleet's own NATS cluster (`natsCluster`), the master's first. */
  natsServers: NatsServerProcess[] = []
  private ownsNatsServer = false
  /** Bound on every start-up wait, ms. */
  readonly readyTimeoutMs: number
  private events: FleetEventReader | undefined
  private readonly startEvents: FleetEvent[] = []
  /** Each tag's indices in startEvents, and each tag's waiters: a swarm's launch waits on tens of thousands of tags at once. */
  private readonly startEventsByTag = new Map<string, number[]>()
  private readonly startWatchers = new Map<string, Set<(event: FleetEvent) => void>>()

  private constructor(
    readonly root: string,
    readonly options: FleetOptions,
  ) {
    const used = new Set(options.minions.map((minion) => minion.transport))
    this.transports = options.transports ?? (['zeromq', 'tcp', 'nats'] as const).filter((name) => used.has(name))
    if (this.transports.length === 0) this.transports.push('zeromq')
    this.readyTimeoutMs = options.readyTimeoutMs ?? 30_000
  }

  static async start(options: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(await mkdtemp(join(tmpdir(), 'brine-')), options)
    if (options.rootMode !== undefined) await chmod(fleet.root, options.rootMode)
    try {
      await options.beforeLaunch?.(fleet.root)
      await fleet.startMaster()
      await Promise.all(options.minions.map((minion) => fleet.startMinion(minion)))
      if (options.waitForMinions ?? options.autoAccept ?? true) {
        await Promise.all(options.minions.map((minion) => fleet.waitForMinionStart(minion.id)))
      }
      if (options.syndic !== undefined) {
        const uppers = upperFleets(options.syndic)
        const marks = uppers.map((upper) => upper.startEventCount)
        await fleet.launchSyndic()
        const autoAccepted = uppers.every((upper) => upper.options.autoAccept ?? true)
        if (options.syndic.acceptAsSyndic ?? autoAccepted) {
          await Promise.all(
            uppers.map(async (upper, index) => {
              await upper.waitForAuth(options.syndic!.id, 'accept', marks[index])
              await upper.acceptSyndic(options.syndic!.id)
            }),
          )
        }
        if (options.syndic.waitForStart ?? autoAccepted) {
          await Promise.all(uppers.map((upper, index) => upper.waitForSyndicStart(options.syndic!.id, marks[index])))
        }
      }
      return fleet
    } catch (error) {
      await fleet.stop()
      throw error
    }
  }

  /** The log level every daemon of this fleet runs at. */
  get logLevel(): string {
    return this.options.logLevel ?? 'warning'
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

  /**
   * The fleet's reader of its master's bus, connected since the master started; it reconnects on its own
   * after a master restart, and {@link launchMaster} returns only once it has, so a reader iterating it
   * across a restart misses nothing the restarted master fires.
   */
  get bus(): FleetEventReader {
    if (this.events === undefined) throw new HarnessSetupError("the fleet's master is not started (or the fleet is stopped): no bus to read")
    return this.events
  }

  /** The address this fleet's master binds and its minions connect to. */
  get host(): string {
    return this.options.interface ?? '127.0.0.1'
  }

  /**
   * The nats-server a NATS fleet runs on: its own, started here on a free loopback port, or the caller's
   * (`natsServer`), or the one of the fleet it shares ports (`portsFrom`) or its broker (`natsFrom`) with, or of
   * the masters above it (a syndic node).
   */
  private async startBroker(): Promise<void> {
    const syndic = this.options.syndic
    if (!this.transports.includes('nats') && syndic?.transport !== 'nats') return
    // A syndic node shares its upper masters' broker: one cluster, told apart by ports.
    const shared =
      this.options.natsServer ??
      this.options.natsFrom?.natsServer ??
      this.options.portsFrom?.natsServer ??
      (syndic === undefined ? undefined : upperFleets(syndic)[0]?.natsServer)
    if (shared !== undefined) {
      this.natsServer = shared
      return
    }
    const count = this.options.natsCluster ?? 1
    if (count === 1) {
      this.natsServers = [await NatsServerProcess.start({ name: `nats for ${this.root}` })]
    } else {
      this.natsServers = await NatsServerProcess.startCluster(count, (index) => `nats-${index} for ${this.root}`)
    }
    this.natsServer = this.natsServers[0]
    this.ownsNatsServer = true
  }

  /** The transport options that point an endpoint a test makes by hand at the fleet's nats-server. */
  get broker(): BrokerOptions {
    return this.natsServer === undefined ? {} : { servers: [this.natsServer.url] }
  }

  /** The keys that point a daemon at the fleet's nats-server (none when the fleet has no NATS). */
  get natsConfig(): Record<string, unknown> {
    return this.natsServer === undefined ? {} : { nats_servers: [this.natsServer.url] }
  }

  private async startMaster(): Promise<void> {
    await this.startBroker()
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
      ...this.natsConfig,
      ...this.options.masterConfig,
    }
    if (others.length > 0) {
      config['transport_opts'] = Object.fromEntries(others.map((name) => [name, { publish_port: portsOf(name).publish, ret_port: portsOf(name).ret }]))
    }
    if (this.options.syndic !== undefined) Object.assign(config, this.#syndicConfig(this.options.syndic))
    await mkdir(this.masterConfigDir, { recursive: true })
    await writeFile(join(this.masterConfigDir, 'master'), stringify(config))
    await this.launchMaster()
  }

  /**
   * Salt's syndic keys, which live in the master's config file: upper masters that serve the syndic's transport
   * on the same ports, each on its own host, share `syndic_master_port`; upper masters on ports of their own
   * (on one NATS broker) are named `host:port`.
   * The upper masters' publish port is left out: the syndic learns it from their auth replies.
   */
  #syndicConfig(syndic: FleetSyndic): Record<string, unknown> {
    const uppers = upperFleets(syndic)
    const rets = uppers.map((upper) => {
      const ports = upper.ports.get(syndic.transport)
      if (ports === undefined) throw new HarnessSetupError(`the upper fleet's master does not serve ${syndic.transport}`, { transport: syndic.transport })
      return ports.ret
    })
    // Upper masters on one broker (`natsFrom`) are told apart by their ports, not hosts: each entry names its own (`host:port`).
    const samePort = rets.every((port) => port === rets[0])
    const entries = uppers.map((upper, index) => (samePort ? upper.host : `${upper.host}:${rets[index]!}`))
    return {
      syndic_master: entries.length === 1 ? entries[0] : entries,
      syndic_master_port: rets[0],
      syndic_transport: syndic.transport,
    }
  }

  /**
   * Starts (or restarts) this fleet's brine-syndic (the fleet must have `syndic` options) and waits for
   * its start-up line; `salt/syndic/<id>/start` on the upper master comes after the upper master accepts it.
   */
  async launchSyndic(): Promise<DaemonProcess> {
    const syndic = this.options.syndic
    if (syndic === undefined) throw new HarnessSetupError('this fleet has no syndic (FleetOptions.syndic)')
    // The upper master accepts the key as a syndic's only after the syndic's first start event was refused; the
    // syndic asks again after return_retry_timer(_max) (5–10 s by default), a wait every syndic fleet would pay.
    const settings = { acceptance_wait_time: 0.2, random_reauth_delay: 0.2, return_retry_timer: 1, return_retry_timer_max: 2, ...syndic.config }
    const sets = Object.entries(settings).flatMap(([key, value]) => ['--set', `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`])
    this.syndic = this.spawnBin(`brine-syndic ${syndic.id}`, 'brine-syndic', ['-c', this.masterConfigDir, '-l', 'info', '--id', syndic.id, ...sets])
    await this.syndic.waitForOutput(new RegExp(`syndic ${escapeRegExp(syndic.id)}: transport`), this.readyTimeoutMs)
    return this.syndic
  }

  /** Starts (or restarts) the master process and waits for every transport's start-up line. */
  async launchMaster(): Promise<DaemonProcess> {
    // A restarted master: the bus reader must be back before launchMaster returns, so what the master fires from then on is read.
    const reconnected = this.events?.nextConnection?.()
    const args = ['-c', this.masterConfigDir, '-l', 'info']
    const prefix = this.options.masterPrefix
    // Started with Node here, the master gets its runtime's flags at once instead of re-executing itself into them; an
    // installed command is run as a user runs it, and re-executes by itself.
    const start = this.options.binDir === undefined ? await daemonStart('brine-master', this.options.nodeArgs) : NO_RUNTIME
    if (prefix === undefined || prefix.length === 0) {
      this.master = this.spawnBin('brine-master', 'brine-master', args, start)
    } else {
      const command =
        this.options.binDir === undefined
          ? [process.execPath, ...start.nodeArgs, ...(this.options.nodeArgs ?? []), binPath('brine-master')]
          : [join(this.options.binDir, 'brine-master')]
      const env = { ...process.env, ...start.vars }
      this.master = DaemonProcess.spawn('brine-master', prefix[0]!, [...prefix.slice(1), ...command, ...args], { env })
      if (this.master.pid > 0) this.spawnedPids.push(this.master.pid)
    }
    for (const transport of this.transports) {
      await this.master.waitForOutput(new RegExp(`transport ${transport}: publish`), this.readyTimeoutMs)
    }
    await this.connectEvents()
    if (reconnected !== undefined) await deadline(reconnected, this.readyTimeoutMs, "the fleet's bus reader to reconnect to the restarted master")
    return this.master
  }

  /**
   * Closes the fleet's own reader of its master's bus, for a test that fires much on the bus once every wait on the fleet
   * is behind it: the master then writes those events to one reader fewer. Waits on the fleet's events after it fail at
   * their bound; a master restarted with {@link launchMaster} opens a reader again.
   */
  async closeBus(): Promise<void> {
    await this.events?.close()
    this.events = undefined
  }

  private async connectEvents(): Promise<void> {
    if (this.events !== undefined) return
    const { bus } = this.options
    // Reconnects fast: after a master restart the reader is back before the minions (which back off for a second) return.
    const events = bus.open({ sockDir: this.sockDir, reconnect: { initial: 10, max: 20 } })
    this.events = events
    await events.connect()
    void (async () => {
      for await (const event of events.iter({ match: startupTagPattern(bus.tags), matchType: 'regex', hwm: 1_000_000 })) {
        const indices = this.startEventsByTag.get(event.tag)
        if (indices === undefined) this.startEventsByTag.set(event.tag, [this.startEvents.length])
        else indices.push(this.startEvents.length)
        this.startEvents.push(event)
        for (const watcher of this.startWatchers.get(event.tag) ?? []) watcher(event)
      }
    })()
  }

  async startMinion(minion: FleetMinion): Promise<DaemonProcess> {
    const dir = await this.writeMinionConfig(minion)
    const process = this.spawnBin(`brine-minion ${minion.id}`, 'brine-minion', ['-c', dir, '-l', this.logLevel])
    this.minions.set(minion.id, process)
    return process
  }

  /** Writes one minion config directory (`<root>/minions/<id>/minion`) and returns it. */
  async writeMinionConfig(minion: FleetMinion): Promise<string> {
    const dir = this.minionConfigDir(minion.id)
    const config = this.minionConfig(minion)
    await mkdir(dir, { recursive: true })
    await writeFile(join(dir, 'minion'), stringify(config))
    return dir
  }

  /**
   * Writes `<dir>/minion` for many minions to share (the bench's swarm): what {@link minionConfig} makes for `minion`,
   * without its root_dir and id, which each instance sets for itself. Returns `dir`.
   */
  async writeSharedMinionConfig(dir: string, minion: Omit<FleetMinion, 'id'>): Promise<string> {
    const { root_dir: _rootDir, id: _id, ...shared } = this.minionConfig({ ...minion, id: 'shared' })
    await mkdir(dir, { recursive: true })
    await writeFile(join(dir, 'minion'), stringify(shared))
    return dir
  }

  /** The config keys of one minion of this fleet (root_dir its config directory): what {@link writeMinionConfig} writes. */
  minionConfig(minion: FleetMinion): Record<string, unknown> {
    const ports = this.ports.get(minion.transport)
    if (ports === undefined) throw new HarnessSetupError(`the fleet's master does not serve ${minion.transport}`, { transport: minion.transport })
    return {
      root_dir: this.minionConfigDir(minion.id),
      id: minion.id,
      master: this.host,
      master_port: ports.ret,
      publish_port: ports.publish,
      transport: minion.transport,
      acceptance_wait_time: 0.2,
      // Quick as the acceptance wait: a test's fleet is small, and its jobs' timeouts are short.
      random_reauth_delay: 0.2,
      grains: minion.grains ?? {},
      ...this.natsConfig,
      ...minion.config,
    }
  }

  /** Waits for `salt/minion/<id>/start` on the master's bus (at or after event index `from`). */
  waitForMinionStart(id: string, from = 0): Promise<void> {
    const tag = this.options.bus.tags.minionStart(id)
    return this.waitForEvent(tag, () => true, `minion ${id} to fire ${tag}`, id, from)
  }

  /** Waits for `salt/syndic/<id>/start` on this fleet's master (a syndic below it connected; at or after event index `from`). */
  waitForSyndicStart(id: string, from = 0): Promise<void> {
    const tag = this.options.bus.tags.syndicStart(id)
    return this.waitForEvent(tag, () => true, `syndic ${id} to fire ${tag}`, id, from)
  }

  /**
   * The operator's `brine-key --accept-syndic ID -y` on this fleet's master: `id`'s key becomes a syndic's
   * (docs/security.md). With `FleetOptions.wheel`, the wheel call that command makes, from this process.
   */
  async acceptSyndic(id: string): Promise<void> {
    const open = this.options.wheel
    if (open === undefined) {
      const result = await this.run('brine-key', ['--accept-syndic', id, '-y'])
      if (result.code !== 0 || !result.stdout.includes(`Key for syndic ${id} accepted.`)) {
        throw new HarnessSetupError(`brine-key --accept-syndic ${id} failed (exit ${String(result.code)}):\n${result.stdout}${result.stderr}`, { id })
      }
      return
    }
    const wheel = open({ configDir: this.masterConfigDir })
    try {
      // Literal names, as brine-key passes the keys its glob selected.
      const result = (await wheel.cmd('key.accept_syndic', { match: [id] })) as { syndics?: unknown } | undefined
      const syndics = Array.isArray(result?.syndics) ? result.syndics : []
      if (!syndics.includes(id)) throw new HarnessSetupError(`wheel key.accept_syndic ${id} marked ${JSON.stringify(syndics)}, not ${id}`, { id })
    } finally {
      await wheel.close()
    }
  }

  /** Waits for a `salt/auth` event of `act` (e.g. 'pend' once a pending minion has asked) for `id`. */
  waitForAuth(id: string, act: string, from = 0): Promise<void> {
    const tag = this.options.bus.tags.auth
    return this.waitForEvent(tag, (event) => event.data['id'] === id && event.data['act'] === act, `a ${tag} '${act}' event for ${id}`, id, from)
  }

  /** Waits for an event of `tag` matching `predicate`, at or after event index `from`. */
  private waitForEvent(tag: string, predicate: (event: FleetEvent) => boolean, what: string, id: string, from: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const seen = this.startEventsByTag.get(tag)?.some((index) => index >= from && predicate(this.startEvents[index]!))
      if (seen === true) return resolve()
      const minion = this.minions.get(id) ?? this.swarms.find((swarm) => swarm.ids.includes(id))?.process
      const context = { process: minion?.name ?? id, pid: minion?.pid ?? -1, limit: this.readyTimeoutMs }
      const watchers = this.startWatchers.get(tag) ?? new Set()
      this.startWatchers.set(tag, watchers)
      const finish = (settle: () => void): void => {
        clearTimeout(timer)
        watchers.delete(watcher)
        if (watchers.size === 0 && this.startWatchers.get(tag) === watchers) this.startWatchers.delete(tag)
        settle()
      }
      const watcher = (event: FleetEvent): void => {
        if (predicate(event)) finish(resolve)
      }
      const timer = setTimeout(
        () => finish(() => reject(new ProcessWaitError(`gave up after ${this.readyTimeoutMs} ms waiting for ${what}:\n${minion?.stderr ?? ''}`, context))),
        this.readyTimeoutMs,
      )
      void minion?.exited.then(() => finish(() => reject(new ProcessWaitError(`minion ${id} exited while waiting for ${what}:\n${minion.stderr}`, context))))
      watchers.add(watcher)
    })
  }

  /** How many minion and auth events have been seen; pass as `from` to wait for a later one. */
  get startEventCount(): number {
    return this.startEvents.length
  }

  /**
   * Starts a Node script as a daemon of this fleet (with its `nodeArgs`, after `start`'s Node flags, and `start`'s
   * variables in its environment), its pid recorded in {@link spawnedPids}.
   */
  spawnNode(name: string, script: string, args: readonly string[], start: DaemonStart = NO_RUNTIME): DaemonProcess {
    const command = [...start.nodeArgs, ...(this.options.nodeArgs ?? []), script, ...args]
    const env = Object.keys(start.vars).length === 0 ? undefined : { ...process.env, ...start.vars }
    const daemon = DaemonProcess.spawn(name, process.execPath, command, { env })
    if (daemon.pid > 0) this.spawnedPids.push(daemon.pid)
    return daemon
  }

  /**
   * Starts `brine-api` beside the master (its settings come from the master config's `rest_cherrypy`,
   * so pass them as `masterConfig`) and waits for its "listening on <url>" line; resolves with the
   * process and that URL.
   */
  async startApi(extraArgs: string[] = []): Promise<{ process: DaemonProcess; url: string }> {
    const api = this.spawnBin('brine-api', 'brine-api', ['-c', this.masterConfigDir, '-l', 'info', ...extraArgs])
    this.apis.push(api)
    const match = await api.waitForOutput(/brine-api listening on (\S+)/, this.readyTimeoutMs)
    return { process: api, url: match[1] as string }
  }

  /** Starts one of the brine* commands as a daemon of this fleet: the installed one with `binDir`, else the one of the `@brine/cli` package the harness resolves ({@link binPath}). */
  spawnBin(name: string, bin: string, args: readonly string[], start: DaemonStart = NO_RUNTIME): DaemonProcess {
    if (this.options.binDir === undefined) return this.spawnNode(name, binPath(bin), args, start)
    const daemon = DaemonProcess.spawn(name, join(this.options.binDir, bin), args)
    if (daemon.pid > 0) this.spawnedPids.push(daemon.pid)
    return daemon
  }

  /**
   * Runs one of the CLIs to completion, bounded by `ms`, with `-c` set to the master's config directory
   * (or `configDir`, e.g. a minion's for brine-call).
   */
  run(bin: string, args: string[], options: { ms?: number; env?: NodeJS.ProcessEnv; configDir?: string } = {}): Promise<RunResult> {
    const argv = ['-c', options.configDir ?? this.masterConfigDir, ...args]
    const [command, commandArgs] = this.options.binDir === undefined ? [process.execPath, [binPath(bin), ...argv]] : [join(this.options.binDir, bin), argv]
    return runProcess(command, commandArgs, {
      ms: options.ms ?? 60_000,
      env: options.env,
      name: `${bin} ${args.join(' ')}`,
    })
  }

  /** Stops every process (SIGTERM, then SIGKILL when bounded waits run out) and removes the root. */
  async stop(options: { keepRoot?: boolean } = {}): Promise<void> {
    await this.events?.close()
    this.events = undefined
    await Promise.all(this.apis.map((api) => api.stop()))
    await this.syndic?.stop()
    await Promise.all([...this.minions.values(), ...this.swarms.map((swarm) => swarm.process)].map((minion) => minion.stop()))
    if (this.master !== undefined) await this.master.stop()
    if (this.ownsNatsServer) await Promise.all(this.natsServers.map((server) => server.close()))
    if (!options.keepRoot) await rm(this.root, { recursive: true, force: true })
  }
}

/** The upper fleets of a syndic, as a list. */
function upperFleets(syndic: FleetSyndic): Fleet[] {
  return Array.isArray(syndic.upper) ? syndic.upper : [syndic.upper]
}
