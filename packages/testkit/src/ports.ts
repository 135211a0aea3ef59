import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { NoFreePortError } from './errors.js'

/** Ports this process handed out, so two picks in one process never collide. */
const handedOut = new Set<number>()
const PICK_ATTEMPTS = 200

/**
 * The kernel's ephemeral range (net.ipv4.ip_local_port_range), where port 0 binds and outgoing
 * connections get their local ports; Linux's default when it cannot be read.
 */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number)
    if (Number.isInteger(low) && Number.isInteger(high) && low! > 0 && high! >= low!) return [low!, high!]
  } catch {
    // not Linux, or no /proc: the default range
  }
  return [32768, 60999]
}

/** Whether `port` can be bound on `host` right now (the probe releases it again at once). */
export function canBind(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(true)))
  })
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for tests, benches and demos that must
 * name a port before their listener starts, or bind it again after a restart. It is picked below
 * the kernel's ephemeral range: a port-0 pick lies inside that range, where any outgoing
 * connection (a minion's, a client's, even one to that very port) may take it before the listener
 * binds or while a restarted server rebinds it.
 */
export async function freeLoopbackPort(): Promise<number> {
  const [ephemeralLow] = ephemeralRange()
  const high = ephemeralLow - 1
  const low = Math.max(1024, high - 12_000)
  for (let attempt = 0; attempt < PICK_ATTEMPTS; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1))
    if (handedOut.has(port)) continue
    handedOut.add(port) // before the check, so a concurrent pick in this process cannot take it too
    if (await canBind(port)) return port
    handedOut.delete(port)
  }
  throw new NoFreePortError(low, high, PICK_ATTEMPTS)
}

/** The port of a `tcp://host:port` address, or of an endpoint's `address`. */
export function portOf(endpoint: string | { readonly address: string }): number {
  const address = typeof endpoint === 'string' ? endpoint : endpoint.address
  const port = Number(/:(\d+)$/.exec(address)?.[1])
  if (!Number.isInteger(port) || port <= 0) throw new RangeError(`cannot read a port from address '${address}'`)
  return port
}
