import { join } from 'node:path'
import { MasterEvent } from '@brine/client'
import { tags } from '@brine/protocol'
import { HarnessSetupError, runProcess } from '@brine/testkit'
import { packageDir, type Fleet, type FleetBus, type SwarmProcess, type TransportName } from '@brine/harness'
import { DEFAULT_SWARM_BATCH, type SwarmLayout } from './swarm.js'

/**
 * The tags a bench fleet's own bus reader asks the master for: what the fleet waits on (a minion's or a syndic's
 * start, `salt/auth`). A `brine` command has no such reader beside it; reading every event, it had the master encode
 * and write each job's `salt/job/<jid>/new`, audit and return events once more, and woke the bench's process for
 * them, inside every timed ping.
 */
export const FLEET_BUS_TAGS: readonly string[] = [tags.minionStart('*'), tags.syndicStart('*'), tags.auth]

/** How the bench's fleets hear their master: the client's MasterEvent, reading {@link FLEET_BUS_TAGS}, and the protocol's tags. */
export const fleetBus: FleetBus = { open: (options) => new MasterEvent({ ...options, tags: FLEET_BUS_TAGS }), tags }

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
  /** The process's nice value (0–19; default 0): see `lowerPriority`. */
  nice?: number
}

/**
 * Where a swarm of a fleet with root `root` lives: its instances beside the fleet's other minions (`<root>/minions/<id>`,
 * each instance's root_dir), its shared config in `<root>/swarms/<prefix>/minion`.
 */
export function swarmLayout(root: string, options: Pick<SwarmOptions, 'count' | 'prefix' | 'batch'>): SwarmLayout {
  return {
    configDir: join(root, 'swarms', options.prefix),
    dir: join(root, 'minions'),
    prefix: options.prefix,
    count: options.count,
    batch: options.batch ?? DEFAULT_SWARM_BATCH,
  }
}

const layoutArgs = (layout: SwarmLayout): string[] => [
  '--config',
  layout.configDir,
  '--dir',
  layout.dir,
  '--prefix',
  layout.prefix,
  '--count',
  String(layout.count),
  '--batch',
  String(layout.batch ?? DEFAULT_SWARM_BATCH),
]

/**
 * Makes the key pairs of a swarm's minions under a fleet root before the fleet launches (`brine-swarm --make-keys`, run to
 * its end): the minions then start as a fleet whose minions already have their keys does. The swarm's config is not
 * written yet, so the keys go where the defaults put them under each instance's root_dir, as the swarm will look.
 */
export async function makeSwarmKeysUnder(root: string, options: Pick<SwarmOptions, 'count' | 'prefix' | 'batch'>): Promise<void> {
  const name = `brine-swarm --make-keys ${options.prefix}*`
  const result = await runProcess(process.execPath, [swarmBinPath, ...layoutArgs(swarmLayout(root, options)), '--make-keys'], {
    ms: Math.max(60_000, options.count * 100),
    name,
  })
  if (result.code !== 0) throw new HarnessSetupError(`${name} failed (exit ${String(result.code)}):\n${result.stderr}`, { process: name })
}

/**
 * Starts one `brine-swarm` process of `fleet` running `count` real Minion instances (ids `<prefix>0`…),
 * each with its own root_dir, keys, cache and sockets, as Salt's tests/minionswarm.py does; their one shared
 * config file is what the fleet would write for each (its id and root_dir left out). Resolves when the process
 * has started every instance (not when their keys are accepted: use `fleet.waitForMinionStart`).
 */
export async function startSwarm(fleet: Fleet, options: SwarmOptions): Promise<SwarmProcess> {
  const ids = Array.from({ length: options.count }, (_, index) => `${options.prefix}${index}`)
  const layout = swarmLayout(fleet.root, options)
  await fleet.writeSharedMinionConfig(layout.configDir, { transport: options.transport, config: options.config })
  const process = fleet.spawnNode(`brine-swarm ${options.prefix}*`, swarmBinPath, [
    ...layoutArgs(layout),
    '--nice',
    String(options.nice ?? 0),
    '-l',
    fleet.logLevel,
  ])
  const swarm: SwarmProcess = { process, ids, transport: options.transport }
  fleet.swarms.push(swarm)
  await process.waitForOutput(/brine-swarm: \d+ minions started/, Math.max(fleet.readyTimeoutMs, options.count * 100))
  return swarm
}
