import { join } from 'node:path'
import { MasterEvent } from '@brine/client'
import { tags } from '@brine/protocol'
import { packageDir, type Fleet, type FleetBus, type SwarmProcess, type TransportName } from '@brine/harness'

/** How the bench's fleets hear their master: the client's MasterEvent and the protocol's tags. */
export const fleetBus: FleetBus = { open: (options) => new MasterEvent(options), tags }

/** The built swarm entry point of this package (`npm run build` first). */
export const swarmBinPath = join(packageDir('@brine/bench', import.meta.url), 'dist/bin/brine-swarm.js')

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
