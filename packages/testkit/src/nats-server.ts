import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { deadline } from './deadline.js'
import { HarnessSetupError } from './errors.js'
import { freeLoopbackPort } from './ports.js'
import { DaemonProcess } from './processes.js'

/** Bound on a nats-server's start; a failure limit on a loaded machine, never a measurement. */
const NATS_START_MS = 20_000

/**
 * The Go scheduler's processors (`GOMAXPROCS`) a nats-server started here runs on, unless the environment names
 * its own. These servers share their host's cores with the master, the minions and the tests that drive them, as
 * a broker beside its master on a small host does (docs/transports.md): with one processor per core, Go's idle
 * threads spin looking for work and hand each goroutine between threads, a wake-up and a context switch taken on
 * the cores the fleet needs, for every message a minion sends or receives (docs/performance.md, "NATS against
 * TCP, fourth look").
 */
export const NATS_GOMAXPROCS = 1

export interface NatsServerOptions {
  /** Client port (default: a free loopback port). Kept across restart(). */
  port?: number
  /** Cluster port, so other servers can route to this one (a 3-server cluster). */
  clusterPort?: number
  /** `nats-route://127.0.0.1:P` of the cluster's other servers. */
  routes?: readonly string[]
  /** Port leaf nodes connect to (a hub). */
  leafPort?: number
  /** `nats-leaf://127.0.0.1:P` of a hub this server joins as a leaf node (a site). */
  leafRemotes?: readonly string[]
  /** Extra lines of nats-server config (authorization, max_payload, …). */
  config?: string
  name?: string
  /** Monitoring port (`http:`), for `links()`; a cluster member, hub or site gets one of its own when not given. */
  monitorPort?: number
  /** `GOMAXPROCS` for the server (default: the environment's `GOMAXPROCS` when set and not empty, else {@link NATS_GOMAXPROCS}). */
  maxProcs?: number
}

/** The path of the nats-server binary, or a HarnessSetupError naming the script that installs it. */
export function natsServerBinary(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).trim()
  } catch {
    throw new HarnessSetupError("nats-server is not installed: run `npm run nats` (bash scripts/ensure-nats.sh) as root to install Debian's nats-server")
  }
}

/**
 * A nats-server process of a test's own, on loopback: started on a free port (or the one given),
 * stoppable and restartable on the same ports, so a test can take the broker away and bring it back.
 * Stopped by pid, never by name.
 */
export class NatsServerProcess {
  readonly port: number
  readonly name: string
  #process: DaemonProcess | undefined
  readonly #dir: string
  readonly #options: NatsServerOptions

  private constructor(port: number, options: NatsServerOptions) {
    this.port = port
    this.name = options.name ?? `nats-${port}`
    this.#options = options
    this.#dir = mkdtempSync(join(tmpdir(), 'brine-nats-'))
  }

  static async start(options: NatsServerOptions = {}): Promise<NatsServerProcess> {
    const linked = options.clusterPort !== undefined || options.leafPort !== undefined || options.leafRemotes !== undefined
    const monitorPort = options.monitorPort ?? (linked ? await freeLoopbackPort() : undefined)
    const server = new NatsServerProcess(options.port ?? (await freeLoopbackPort()), { ...options, monitorPort })
    await server.restart()
    return server
  }

  /**
   * `count` servers routed to each other on loopback, resolved once every one has a route to each other one: a
   * server that says it is ready may still be dialling its routes, and a message published before they are up
   * never crosses (core NATS keeps nothing for interest it has not heard of yet).
   */
  static async startCluster(count: number, name: (index: number) => string, ms = NATS_START_MS): Promise<NatsServerProcess[]> {
    const clusterPorts = await Promise.all(Array.from({ length: count }, () => freeLoopbackPort()))
    const routes = clusterPorts.map((port) => `nats-route://127.0.0.1:${port}`)
    const servers = await Promise.all(clusterPorts.map((clusterPort, index) => NatsServerProcess.start({ name: name(index), clusterPort, routes })))
    try {
      await Promise.all(servers.map((server) => server.waitForLinks('routes', count - 1, ms)))
    } catch (error) {
      await Promise.all(servers.map((server) => server.close()))
      throw error
    }
    return servers
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`
  }

  get pid(): number {
    return this.#process?.pid ?? -1
  }

  get running(): boolean {
    return this.#process?.running === true
  }

  #config(): string {
    const options = this.#options
    // nats-server refuses a server_name with spaces; the process keeps the readable name.
    const lines = [`server_name: "${this.name.replace(/[^A-Za-z0-9_-]+/g, '-')}"`, `listen: 127.0.0.1:${this.port}`]
    if (options.clusterPort !== undefined) {
      lines.push(`cluster { name: brine-test, listen: 127.0.0.1:${options.clusterPort}, routes: [${(options.routes ?? []).join(', ')}] }`)
    }
    if (options.leafPort !== undefined) lines.push(`leafnodes { listen: 127.0.0.1:${options.leafPort} }`)
    if (options.leafRemotes !== undefined) lines.push(`leafnodes { remotes: [${options.leafRemotes.map((url) => `{ url: "${url}" }`).join(', ')}] }`)
    if (options.monitorPort !== undefined) lines.push(`http: 127.0.0.1:${options.monitorPort}`)
    if (options.config !== undefined) lines.push(options.config)
    return lines.join('\n') + '\n'
  }

  /** Starts the server (again, on the same ports) and waits until it accepts clients. */
  async restart(): Promise<void> {
    if (this.running) return
    const file = join(this.#dir, 'nats.conf')
    writeFileSync(file, this.#config())
    const fromEnvironment = process.env.GOMAXPROCS
    const maxProcs = this.#options.maxProcs ?? (fromEnvironment === undefined || fromEnvironment === '' ? NATS_GOMAXPROCS : fromEnvironment)
    this.#process = DaemonProcess.spawn(this.name, natsServerBinary(), ['-c', file], { env: { ...process.env, GOMAXPROCS: String(maxProcs) } })
    await this.#process.waitForOutput(/Server is ready/, NATS_START_MS)
  }

  /** How many routes to other cluster members, or leaf node connections, the server has (its monitoring endpoint). */
  async links(kind: 'routes' | 'leafnodes'): Promise<number> {
    if (this.#options.monitorPort === undefined) throw new HarnessSetupError(`${this.name} has no monitoring port: links() needs one`)
    const response = await fetch(`http://127.0.0.1:${this.#options.monitorPort}/${kind === 'routes' ? 'routez' : 'leafz'}`)
    const body = (await response.json()) as { num_routes?: number; leafnodes?: number }
    return (kind === 'routes' ? body.num_routes : body.leafnodes) ?? 0
  }

  /** Waits (bounded) until the server has at least `count` links of that kind. */
  async waitForLinks(kind: 'routes' | 'leafnodes', count: number, ms = NATS_START_MS): Promise<void> {
    await deadline(
      (async () => {
        while ((await this.links(kind)) < count) await new Promise((resolve) => setTimeout(resolve, 20))
      })(),
      ms,
      `${this.name} to have ${count} ${kind}`,
    )
  }

  /** Stops the server (SIGKILL: a crash, as a test wants it) and waits for its exit. */
  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.#process?.stop(signal)
  }

  /** Stops it for good and removes its config. */
  async close(): Promise<void> {
    await this.stop()
    rmSync(this.#dir, { recursive: true, force: true })
  }
}
