import { readFileSync } from 'node:fs'

/** Open files assumed when the limit cannot be read (a conservative soft limit of many systems). */
const FALLBACK_OPEN_FILE_LIMIT = 1024

let openFiles: number | undefined

/**
 * The process's open-file limit (RLIMIT_NOFILE, the soft one, which Node raises to the hard limit
 * as it starts): from /proc/self/limits on Linux, `ulimit -n` elsewhere, else 1024. Read once.
 */
export function openFileLimit(): number {
  if (openFiles !== undefined) return openFiles
  openFiles = readOpenFileLimit()
  return openFiles
}

function readOpenFileLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((text) => text.startsWith('Max open files'))
    const soft = line?.split(/\s{2,}/)[1]
    if (soft === 'unlimited') return Number.MAX_SAFE_INTEGER
    const value = Number(soft)
    if (Number.isSafeInteger(value) && value > 0) return value
  } catch {
    // Not Linux: ask the shell.
  }
  try {
    // node:child_process only here, off Linux: every process that loads the transport would otherwise hold it.
    const { execFileSync } = process.getBuiltinModule('node:child_process')
    const text = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2000 }).trim()
    if (text === 'unlimited') return Number.MAX_SAFE_INTEGER
    const value = Number(text)
    if (Number.isSafeInteger(value) && value > 0) return value
  } catch {
    // No shell: assume the common default.
  }
  return FALLBACK_OPEN_FILE_LIMIT
}

/**
 * `max_connections` when the config leaves it at 0: the open-file limit less an eighth of it (at
 * least 64), kept for the daemon's own files, the event bus and its clients' sockets.
 */
export function defaultMaxConnections(limit: number = openFileLimit()): number {
  return Math.max(1, limit - Math.max(64, Math.floor(limit / 8)))
}

/** `max_connections_per_address` when the config leaves it at 0: a quarter of the total, so one address can never take it all. */
export function defaultMaxConnectionsPerAddress(maxConnections: number): number {
  return Math.max(1, Math.floor(maxConnections / 4))
}

/** A connection holding bytes of an incomplete frame, which the budget may give up to stay within its bound. */
export interface PendingHolder {
  /** Bytes of its frame in progress held now. */
  readonly pendingBytes: number
  /** When that frame's first byte arrived (ms, Date.now()). */
  readonly pendingSince: number
  /** Closes the connection at once, releasing its bytes (synchronously: the budget counts on it). */
  drop(reason: string): void
}

/** An admitted connection, as eviction sees it. */
export interface AdmittedPeer {
  /** When it was admitted (ms, Date.now()). */
  readonly openedAt: number
  /** When it last completed a frame (or was admitted, or took 64 KiB more of one) (ms). */
  readonly lastProgress: number
  /** True while a frame has begun and not ended: such a peer is sending, not idle. */
  readonly inFrame: boolean
  /** Closes the connection at once (its close later calls {@link Admission.leave}, then a no-op). */
  drop(reason: string): void
}

/** `::ffff:10.0.0.7` and `10.0.0.7` are one address. */
export function normalizeAddress(address: string | undefined): string {
  if (address === undefined) return 'unknown'
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address
}

/** Connections in arrival order, over all addresses and per address: the candidates of one eviction tier. */
class ArrivalOrder {
  readonly all = new Set<AdmittedPeer>()
  readonly #from = new Map<string, Set<AdmittedPeer>>()

  add(peer: AdmittedPeer, address: string): void {
    this.all.add(peer)
    let from = this.#from.get(address)
    if (from === undefined) this.#from.set(address, (from = new Set()))
    from.add(peer)
  }

  delete(peer: AdmittedPeer, address: string): boolean {
    if (!this.all.delete(peer)) return false
    const from = this.#from.get(address)
    from?.delete(peer)
    if (from?.size === 0) this.#from.delete(address)
    return true
  }

  /** Those from `address`, or all when it is undefined. */
  of(address: string | undefined): Set<AdmittedPeer> | undefined {
    return address === undefined ? this.all : this.#from.get(address)
  }
}

/**
 * What every server of the process has admitted: connections, in total and per address, and bytes
 * of incomplete frames. File descriptors and memory belong to the process, so the counts are shared
 * by all its servers (a master's publish and request servers, over both transports); each server
 * checks them against the limits it was configured with. At a cap, a newcomer is admitted by
 * evicting first the oldest connection that has not greeted, then the longest idle one that has
 * greeted a server that authenticates (a request server) but never authenticated; never one that
 * authenticated, nor a subscriber that greeted. One instance per process, {@link admission}.
 */
export class Admission {
  #connections = 0
  readonly #byAddress = new Map<string, number>()
  /** Every tracked connection and the address it came from. */
  readonly #peers = new Map<AdmittedPeer, string>()
  /** Tracked connections that have not completed their greeting. */
  readonly #ungreeted = new ArrivalOrder()
  /** Tracked connections to request servers that have not authenticated (greeted or not). */
  readonly #unauthenticated = new ArrivalOrder()
  #pendingBytes = 0
  readonly #holders = new Map<PendingHolder, number>()

  /** Connections admitted and still open. */
  get connections(): number {
    return this.#connections
  }

  /** Connections from `address` admitted and still open. */
  connectionsFrom(address: string): number {
    return this.#byAddress.get(address) ?? 0
  }

  /** Bytes of incomplete frames held now, over every connection. */
  get pendingBytes(): number {
    return this.#pendingBytes
  }

  /**
   * Admits one connection from `address`, or returns why not (the limit and its config key) without
   * counting it. At a cap (`maxConnections` over all servers, `maxPerAddress` from `address`) one
   * connection within that cap is evicted first to make room, if one may be (see the class): a
   * flood of silent or idle sockets costs the flooder its own, never a peer that has authenticated.
   * Every admitted connection must be {@link track}ed, and {@link leave} called once it closes.
   */
  admit(address: string, maxConnections: number, maxPerAddress: number): string | undefined {
    if (this.#connections >= maxConnections && !this.#evict(undefined, `max_connections (${maxConnections})`)) {
      return `${this.#connections} connections open (max_connections ${maxConnections})`
    }
    if ((this.#byAddress.get(address) ?? 0) >= maxPerAddress && !this.#evict(address, `max_connections_per_address (${maxPerAddress}) for ${address}`)) {
      return `${this.#byAddress.get(address) ?? 0} connections open from ${address} (max_connections_per_address ${maxPerAddress})`
    }
    this.#connections++
    this.#byAddress.set(address, (this.#byAddress.get(address) ?? 0) + 1)
    return undefined
  }

  /**
   * Remembers an admitted connection: until it {@link greeted}, it may be evicted at a cap; a request
   * server's (`authenticates`) until it {@link authenticated}, once idle.
   */
  track(peer: AdmittedPeer, address: string, authenticates = false): void {
    this.#peers.set(peer, address)
    this.#ungreeted.add(peer, address)
    if (authenticates) this.#unauthenticated.add(peer, address)
  }

  /** The connection completed its greeting: it is evicted only as an idle unauthenticated one, if at all. */
  greeted(peer: AdmittedPeer): void {
    const address = this.#peers.get(peer)
    if (address !== undefined) this.#ungreeted.delete(peer, address)
  }

  /** Its peer proved who it is: the connection is never evicted. */
  authenticated(peer: AdmittedPeer): void {
    const address = this.#peers.get(peer)
    if (address !== undefined) this.#unauthenticated.delete(peer, address)
  }

  /** The connection closed; a no-op for one already evicted. */
  leave(peer: AdmittedPeer): void {
    const address = this.#peers.get(peer)
    if (address === undefined) return
    this.#peers.delete(peer)
    this.#ungreeted.delete(peer, address)
    this.#unauthenticated.delete(peer, address)
    this.#connections = Math.max(0, this.#connections - 1)
    const from = (this.#byAddress.get(address) ?? 1) - 1
    if (from <= 0) this.#byAddress.delete(address)
    else this.#byAddress.set(address, from)
  }

  /** Evicts one connection (from `address`, or any), uncounting it at once; false when none may be. */
  #evict(address: string | undefined, cap: string, now: number = Date.now()): boolean {
    const silent = this.#ungreeted.of(address)?.values().next().value
    if (silent !== undefined) {
      this.leave(silent)
      silent.drop(`evicted after ${now - silent.openedAt} ms without completing its greeting, to admit a new connection at ${cap}`)
      return true
    }
    const idle = this.#longestIdle(this.#unauthenticated.of(address))
    if (idle === undefined) return false
    this.leave(idle)
    idle.drop(`evicted, unauthenticated and idle for ${now - idle.lastProgress} ms, to admit a new connection at ${cap}`)
    return true
  }

  /** The connection of `candidates` between frames that made progress longest ago. */
  #longestIdle(candidates: Set<AdmittedPeer> | undefined): AdmittedPeer | undefined {
    let idle: AdmittedPeer | undefined
    for (const peer of candidates ?? []) {
      if (!peer.inFrame && (idle === undefined || peer.lastProgress < idle.lastProgress)) idle = peer
    }
    return idle
  }

  /**
   * Sets what `holder` holds now to `bytes`. When the total goes over `limit`, the holder whose
   * frame in progress has arrived slowest (bytes held per ms since its first byte) is dropped, and
   * the next slowest, until the total fits: a peer trickling a frame, or parking most of one, is
   * given up before a peer that is sending. The holder that just grew may be the one dropped.
   */
  hold(holder: PendingHolder, bytes: number, limit: number, now: number = Date.now()): void {
    const before = this.#holders.get(holder) ?? 0
    if (bytes === before) return
    this.#pendingBytes += bytes - before
    if (bytes === 0) this.#holders.delete(holder)
    else this.#holders.set(holder, bytes)
    while (this.#pendingBytes > limit) {
      const slowest = this.#slowest(now)
      if (slowest === undefined) break
      const held = this.#holders.get(slowest) ?? 0
      this.release(slowest)
      slowest.drop(
        `its incomplete frame (${held} bytes so far, the slowest arriving) was given up to keep incomplete frames over all peers within max_pending_bytes (${limit})`,
      )
    }
  }

  /** Forgets what `holder` held (its connection closed or completed its frame). */
  release(holder: PendingHolder): void {
    const held = this.#holders.get(holder)
    if (held === undefined) return
    this.#holders.delete(holder)
    this.#pendingBytes -= held
  }

  #slowest(now: number): PendingHolder | undefined {
    let slowest: PendingHolder | undefined
    let slowestRate = Number.POSITIVE_INFINITY
    for (const [holder, bytes] of this.#holders) {
      const rate = bytes / Math.max(1, now - holder.pendingSince)
      if (rate < slowestRate) {
        slowestRate = rate
        slowest = holder
      }
    }
    return slowest
  }
}

/** The process's one {@link Admission} for its network servers (a unix socket's listener keeps its own). */
export const admission = new Admission()
