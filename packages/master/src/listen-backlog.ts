import { readFileSync } from 'node:fs'
import type { Logger } from '@brine/core'

/**
 * The listen backlog of a master's socket servers: `zmq_backlog`, or its accepted fleet when that is larger. Every
 * minion holds one connection to each server, and after a master restart they all reconnect within a second or two,
 * faster than a master that is still starting accepts them. A handshake past the queue is dropped by the kernel and
 * retried by the minion's TCP stack a second later, then at doubling intervals, so a fleet larger than the queue
 * comes back over minutes instead of seconds.
 */
export function listenBacklogFor(configured: number, acceptedMinions: number): number {
  return Math.max(configured, acceptedMinions)
}

/** `net.core.somaxconn`, the most the kernel queues for one listening socket whatever listen() asks; undefined where it cannot be read. */
export function kernelListenCap(path = '/proc/sys/net/core/somaxconn'): number | undefined {
  try {
    const value = Number(readFileSync(path, 'utf8').trim())
    return Number.isSafeInteger(value) && value > 0 ? value : undefined
  } catch {
    return undefined
  }
}

/** Says once, at start, when the kernel will queue fewer connections than the backlog asks for (what to raise, and to what). */
export function warnOfListenCap(backlog: number, acceptedMinions: number, logger: Logger, cap: number | undefined = kernelListenCap()): void {
  if (cap === undefined || backlog <= cap) return
  logger.warning(
    `listen backlog ${backlog} (zmq_backlog, or the ${acceptedMinions} accepted minions reconnecting at once) is more than the kernel queues ` +
      `(net.core.somaxconn ${cap}): after a restart, minions past the queue lose their handshake and come back seconds later; ` +
      `raise it with sysctl -w net.core.somaxconn=${backlog}`,
  )
}
