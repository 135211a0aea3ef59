import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { existsSync, readFileSync } from 'node:fs'
import { MasterEvent } from '@brine/client'
import { tags } from '@brine/common'
import type { Fleet, FleetBus, SwarmProcess, TransportName } from '@brine/testkit'

/** How the bench's fleets hear their master: the client's MasterEvent and the protocol's tags. */
export const fleetBus: FleetBus = { open: (options) => new MasterEvent(options), tags }

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

/** The built swarm entry point of this package (`npm run build` first). */
export const swarmBinPath = join(benchRoot(), 'dist/bin/brine-swarm.js')

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

/**
 * Starts one `brine-swarm` process of `fleet` running `count` real Minion instances (ids `<prefix>0`…),
 * each with its own config directory, keys, cache and sockets, as Salt's tests/minionswarm.py does.
 * Resolves when the process has started every instance (not when their keys are accepted: use
 * `fleet.waitForMinionStart`).
 */
export async function startSwarm(fleet: Fleet, options: SwarmOptions): Promise<SwarmProcess> {
  const ids = Array.from({ length: options.count }, (_, index) => `${options.prefix}${index}`)
  for (const id of ids) await fleet.writeMinionConfig({ id, transport: options.transport, config: options.config })
  const args = ['--dir', join(fleet.root, 'minions'), '--prefix', options.prefix, '--count', String(options.count), '--batch', String(options.batch ?? 50)]
  const process = fleet.spawnNode(`brine-swarm ${options.prefix}*`, swarmBinPath, [...args, '-l', fleet.logLevel])
  const swarm: SwarmProcess = { process, ids, transport: options.transport }
  fleet.swarms.push(swarm)
  await process.waitForOutput(/brine-swarm: \d+ minions started/, Math.max(fleet.readyTimeoutMs, options.count * 100))
  return swarm
}
