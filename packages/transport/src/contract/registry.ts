import { DuplicateTransportError, TransportUnavailableError, UnknownTransportError } from '@brine/core'
import type { Transport } from './types.js'

export type TransportLoader = () => Promise<Transport>

interface Entry {
  loader: TransportLoader
  hint: string
  peerSockets: boolean | undefined
  loaded?: Promise<Transport>
}

const registry = new Map<string, Entry>()

/** Spellings people reach for, mapped to the name they meant. */
const ALIASES: Record<string, string> = { zmq: 'zeromq', '0mq': 'zeromq', zeromq: 'zeromq', tcp: 'tcp', raw: 'tcp', net: 'tcp' }

export interface RegisterOptions {
  /** What to tell a user whose load failed, e.g. "use `transport: tcp`". */
  hint?: string
  /**
   * What the loaded transport's `peerSockets` will say, when the registrant knows it: a caller that only needs to know
   * (which framing a master's local channel speaks) then need not load the transport and its client library.
   */
  peerSockets?: boolean
}

/** Registers a lazily loaded transport under its config name. A duplicate name throws. */
export function registerTransport(name: string, loader: TransportLoader, options: RegisterOptions = {}): void {
  if (registry.has(name)) throw new DuplicateTransportError(name)
  registry.set(name, { loader, hint: options.hint ?? 'check the installation of the package that provides it', peerSockets: options.peerSockets })
}

/** The `peerSockets` the registration of `name` declared, without loading it; undefined when it declared none or `name` is not registered. */
export function registeredPeerSockets(name: string): boolean | undefined {
  return registry.get(name)?.peerSockets
}

/** Removes a registration; for tests and plugins that replace a transport. */
export function unregisterTransport(name: string): boolean {
  return registry.delete(name)
}

export function listTransports(): string[] {
  return [...registry.keys()].sort()
}

export interface GetTransportOptions {
  /** Where the name came from, for the error: `/etc/brine/master:4` or `--transport`. */
  source?: string
}

/**
 * The transport registered as `name`, loaded on first use. Unknown names throw
 * UnknownTransportError with a "did you mean"; a loader that fails throws TransportUnavailableError
 * with the failure as `cause` (and a later call tries again).
 */
export async function getTransport(name: string, options: GetTransportOptions = {}): Promise<Transport> {
  const entry = registry.get(name)
  if (entry === undefined) {
    throw new UnknownTransportError(name, listTransports(), suggestTransport(name), options.source)
  }
  entry.loaded ??= entry.loader().catch((error: unknown) => {
    entry.loaded = undefined
    throw new TransportUnavailableError(name, entry.hint, { cause: error })
  })
  return entry.loaded
}

/** The registered name `name` most likely meant (`zmq` → `zeromq`), or undefined. */
export function suggestTransport(name: string, available: readonly string[] = listTransports()): string | undefined {
  const lower = name.trim().toLowerCase()
  const alias = ALIASES[lower]
  if (alias !== undefined && available.includes(alias)) return alias
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of available) {
    const distance = editDistance(lower, candidate)
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return bestDistance <= 2 ? best : undefined
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
    }
    previous = current
  }
  return previous[b.length]!
}
