import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { HarnessSetupError, rssBytes } from '@brine/testkit'
import { type Fleet } from '@brine/harness'

/** Connections a NATS minion holds: one, which its publish and request clients share (their connection scope). */
export const NATS_CONNECTIONS_PER_MINION = 1

/** The soft open-file limit of a running process (`/proc/<pid>/limits`); undefined when unreadable. */
export function openFileLimit(pid: number): number | undefined {
  try {
    const match = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))
    if (match === null) return undefined
    return match[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(match[1])
  } catch {
    return undefined
  }
}

/**
 * nats-server holds one descriptor per client connection and inherits the bench's open-file limit, which a
 * swarm of thousands of NATS minions outgrows (20,000 minions hold 20,000 connections). Raises the running
 * server's soft and hard limit to `wanted` with prlimit, which needs the privilege to raise a hard limit;
 * throws a HarnessSetupError naming the figure and the command when it cannot.
 */
export async function raiseOpenFiles(pid: number, wanted: number): Promise<void> {
  const current = openFileLimit(pid)
  if (current !== undefined && current >= wanted) return
  try {
    await promisify(execFile)('prlimit', ['--pid', String(pid), `--nofile=${wanted}:${wanted}`])
  } catch (error) {
    throw new HarnessSetupError(
      `nats-server (pid ${pid}) may open ${current ?? 'an unknown number of'} files and needs ${wanted} for the swarm's connections; ` +
        `prlimit --pid ${pid} --nofile=${wanted}:${wanted} failed (${(error as Error).message.trim()}): run the bench as a user allowed to raise it, ` +
        'with a higher ulimit -n, or spread the minions over a cluster (--nats-servers <k>)',
      { pid, limit: current ?? -1, wanted },
    )
  }
}

/**
 * Room in the fleet's nats-servers for `minions` NATS minions (in groups of `group`, one group per server in
 * turn, as the bench spreads swarms over a cluster), the master and the bench's clients.
 */
export async function makeRoomForMinions(fleet: Fleet, minions: number, group: number): Promise<void> {
  const servers = Math.max(1, fleet.natsServers.length)
  const groups = Math.ceil(minions / Math.max(1, group))
  const perServer = Math.ceil(groups / servers) * group
  const wanted = Math.min(minions, perServer) * NATS_CONNECTIONS_PER_MINION + 1024
  for (const server of fleet.natsServers) await raiseOpenFiles(server.pid, wanted)
}

/** The RSS of the fleet's nats-servers (its cluster's, summed, or the one it uses); 0 when it has none. */
export function natsServerRss(fleet: Fleet): number {
  const servers = fleet.natsServers.length > 0 ? fleet.natsServers : fleet.natsServer === undefined ? [] : [fleet.natsServer]
  return servers.reduce((sum, server) => sum + rssBytes(server.pid), 0)
}
