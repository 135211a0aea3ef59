import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { HarnessSetupError } from './errors.js'
import { freeLoopbackPort } from './ports.js'
import { DaemonProcess } from './processes.js'

/** Bound on a nats-server's start; a failure limit on a loaded machine, never a measurement. */
const NATS_START_MS = 20_000

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
    const server = new NatsServerProcess(options.port ?? (await freeLoopbackPort()), options)
    await server.restart()
    return server
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
    if (options.config !== undefined) lines.push(options.config)
    return lines.join('\n') + '\n'
  }

  /** Starts the server (again, on the same ports) and waits until it accepts clients. */
  async restart(): Promise<void> {
    if (this.running) return
    const file = join(this.#dir, 'nats.conf')
    writeFileSync(file, this.#config())
    this.#process = DaemonProcess.spawn(this.name, natsServerBinary(), ['-c', file])
    await this.#process.waitForOutput(/Server is ready/, NATS_START_MS)
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
