import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NoFreePortError } from './errors.js'

/** Ports this process handed out, so two picks in one process never collide. */
const handedOut = new Set<number>()
const PICK_ATTEMPTS = 200

/**
 * Where processes on this machine record the ports they handed out (a file per port holding the owner's pid): a
 * port is free for one process only, even when two test runs (Node 24's and Node 22's, or a clean clone's beside
 * a working copy's) pick in the same range at once. A probe alone cannot see a port another process picked and
 * has not bound yet.
 */
export const claimsDir = join(tmpdir(), 'brine-port-claims')

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Records `port` as this process's; false when a living process holds it. A dead owner's claim is taken over. */
export function claimPort(port: number): boolean {
  const file = join(claimsDir, String(port))
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' })
      return true
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') mkdirSync(claimsDir, { recursive: true })
      else if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      else if (!claimIsStale(file)) return false
      else unlinkQuietly(file)
    }
  }
  return false
}

function claimIsStale(file: string): boolean {
  let owner: number
  try {
    owner = Number(readFileSync(file, 'utf8'))
  } catch {
    return false // removed meanwhile: the next attempt creates it
  }
  // this process's own pid on a port it did not hand out: an earlier process's, whose pid was reused
  return !Number.isInteger(owner) || owner <= 0 || owner === process.pid || !pidAlive(owner)
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // gone already
  }
}

// A process's claims are removed when it exits (a process killed outright leaves them; the pid check frees those).
// Registered as the module loads, once, rather than at the first claim: a test worker's files then find the same
// listeners on `process` before and after they run.
process.once('exit', () => releasePortClaims())

/**
 * Gives back every port this process handed out: its claims are removed and a later pick may hand the port out again
 * (once it can be bound). For a process that outlives its user, such as a test worker that runs one file after
 * another: without it, the claims of every file it ran would stay until it exits.
 */
export function releasePortClaims(): void {
  for (const port of handedOut) unlinkQuietly(join(claimsDir, String(port)))
  handedOut.clear()
}

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
 * A TCP port on 127.0.0.1 that was free a moment ago and that no other process on this machine picked, for tests, benches and demos that must
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
    if (!claimPort(port)) continue
    handedOut.add(port) // before the check, so a concurrent pick in this process cannot take it too
    if (await canBind(port)) return port
    handedOut.delete(port)
    unlinkQuietly(join(claimsDir, String(port)))
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
