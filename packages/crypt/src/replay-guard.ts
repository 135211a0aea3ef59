import { StaleRequestError } from './errors.js'

/**
 * The master's memory of sealed requests, so that a recorded one replayed does nothing (DESIGN §3).
 *
 * Every sealed request carries, inside its box, the time it was sealed (in the master's clock, as the
 * minion knows it from its last `_auth`), and its box nonce is random: the pair names the request.
 * A request is refused ({@link StaleRequestError}) when its time is further than `windowMs` from the
 * master's clock, so a recording older than the window is worthless. Inside the window each
 * (minion, nonce) is applied once: a duplicate — the transport re-sending the same bytes on a retry,
 * or an attacker replaying them — waits for the first one's outcome and is answered "already handled".
 *
 * The memory is bounded per minion and in total, and only a request that opened with a minion's key
 * adds to it (a replay is a duplicate and adds nothing). When a bound is reached the oldest entry is
 * forgotten and its minion's *floor* rises to that entry's time: anything sealed at or before the
 * floor is refused as stale, so forgetting never lets a replay through. Honest minions seal with the
 * current time, so a floor only ever costs them a re-seal of a request older than it.
 */
export interface ReplayGuardOptions {
  /** ± ms a request's sealing time may be from `now()` (`request_window`). */
  windowMs: number
  /** Requests remembered per minion (`request_nonces_per_minion`). */
  perMinion: number
  /** Requests remembered in all (`request_nonces_total`). */
  total: number
  /** The master's clock, ms since the epoch (default Date.now). */
  now?: () => number
}

/** Counters, for tests, benchmarks and a status line. */
export interface ReplayGuardStats {
  /** Requests remembered now. */
  entries: number
  /** Minions with requests remembered (or a floor still in the window). */
  minions: number
  /** Requests applied. */
  applied: number
  /** Requests answered as already handled. */
  duplicates: number
  /** Requests refused as stale (outside the window or below a floor). */
  stale: number
  /** Entries forgotten early because a bound was reached. */
  evicted: number
}

/** What happened to a request given to {@link ReplayGuard.run}. */
export type ReplayVerdict = 'applied' | 'duplicate'

interface MinionMemory {
  readonly id: string
  /** nonce (latin1) → sealing time. Insertion order is arrival order. */
  readonly seen: Map<string, number>
  /** Requests being applied, by nonce: a duplicate waits for the first. Made on first use. */
  inFlight: Map<string, Promise<void>> | undefined
  /** Requests sealed at or before this time are refused. */
  floor: number
}

/** The nonce as a map key: one char per byte (a 24-byte nonce needs no Buffer to become a string). */
const latin1 = (bytes: Uint8Array): string => String.fromCharCode.apply(null, bytes as unknown as number[])

export class ReplayGuard {
  readonly windowMs: number
  readonly perMinion: number
  readonly total: number
  readonly #now: () => number
  readonly #minions = new Map<string, MinionMemory>()
  /**
   * Arrival order across minions, for the total bound and for expiry: two parallel arrays (a slot each is
   * 16 bytes, where a tuple per entry cost 64). An entry whose nonce left its memory is skipped.
   */
  #orderMemories: MinionMemory[] = []
  #orderKeys: string[] = []
  #head = 0
  #entries = 0
  readonly #stats = { applied: 0, duplicates: 0, stale: 0, evicted: 0 }

  constructor(options: ReplayGuardOptions) {
    for (const [key, value] of [
      ['windowMs', options.windowMs],
      ['perMinion', options.perMinion],
      ['total', options.total],
    ] as const) {
      if (!Number.isFinite(value) || value < 1) throw new RangeError(`ReplayGuard ${key} must be a positive number, got ${value}`)
    }
    this.windowMs = options.windowMs
    this.perMinion = Math.floor(options.perMinion)
    this.total = Math.floor(options.total)
    this.#now = options.now ?? Date.now
  }

  stats(): ReplayGuardStats {
    return { entries: this.#entries, minions: this.#minions.size, ...this.#stats }
  }

  /**
   * Applies the request `(id, nonce)` sealed at `timestamp` once: `apply` runs for the first arrival
   * ('applied'); a later arrival of the same pair waits for that and resolves 'duplicate' (or rejects
   * as the first did). If `apply` fails the pair is forgotten, so the minion's retry of the same bytes
   * is applied then. Rejects with StaleRequestError, before `apply`, for a request outside the window.
   */
  run(id: string, nonce: Uint8Array, timestamp: number, apply: () => Promise<void>): Promise<ReplayVerdict> {
    const now = this.#now()
    this.#expire(now)
    if (!Number.isFinite(timestamp) || Math.abs(now - timestamp) > this.windowMs) {
      this.#stats.stale++
      return Promise.reject(new StaleRequestError(id, timestamp, now, 'window', this.windowMs))
    }
    const memory = this.#minions.get(id)
    const key = latin1(nonce)
    if (memory?.seen.has(key) === true) {
      this.#stats.duplicates++
      const first = memory.inFlight?.get(key)
      return first === undefined ? Promise.resolve('duplicate') : first.then(() => 'duplicate')
    }
    if (memory !== undefined && timestamp <= memory.floor) {
      this.#stats.stale++
      return Promise.reject(new StaleRequestError(id, timestamp, now, 'floor', memory.floor))
    }
    const mine = memory ?? this.#newMemory(id)
    this.#remember(mine, key, timestamp)
    let applying: Promise<void>
    try {
      applying = apply()
    } catch (error) {
      applying = Promise.reject(error)
    }
    const inFlight = (mine.inFlight ??= new Map())
    inFlight.set(key, applying)
    return applying.then(
      () => {
        inFlight.delete(key)
        this.#stats.applied++
        return 'applied'
      },
      (error: unknown) => {
        inFlight.delete(key)
        // Not applied: the same bytes sent again (the minion's retry) may be applied then.
        if (mine.seen.get(key) === timestamp) {
          mine.seen.delete(key)
          this.#entries--
        }
        throw error
      },
    )
  }

  #newMemory(id: string): MinionMemory {
    const memory: MinionMemory = { id, seen: new Map(), inFlight: undefined, floor: Number.NEGATIVE_INFINITY }
    this.#minions.set(id, memory)
    return memory
  }

  #remember(memory: MinionMemory, key: string, timestamp: number): void {
    if (memory.seen.size >= this.perMinion) {
      const [oldKey, oldTime] = memory.seen.entries().next().value as [string, number]
      this.#forget(memory, oldKey, oldTime)
    }
    while (this.#entries >= this.total && this.#head < this.#orderKeys.length) {
      const oldest = this.#orderMemories[this.#head]!
      const oldKey = this.#orderKeys[this.#head]!
      this.#head++
      const oldTime = oldest.seen.get(oldKey)
      if (oldTime !== undefined) this.#forget(oldest, oldKey, oldTime)
    }
    memory.seen.set(key, timestamp)
    this.#entries++
    this.#orderMemories.push(memory)
    this.#orderKeys.push(key)
    this.#compact()
  }

  /** Forgets an entry early (a bound was reached): its time becomes the floor, so it can never be replayed. */
  #forget(memory: MinionMemory, key: string, timestamp: number): void {
    memory.seen.delete(key)
    this.#entries--
    if (timestamp > memory.floor) memory.floor = timestamp
    this.#stats.evicted++
  }

  /** Drops what the window refuses anyway: entries sealed before `now - windowMs`, and memories left empty. */
  #expire(now: number): void {
    const oldest = now - this.windowMs
    while (this.#head < this.#orderKeys.length) {
      const memory = this.#orderMemories[this.#head]!
      const key = this.#orderKeys[this.#head]!
      const timestamp = memory.seen.get(key)
      if (timestamp !== undefined && timestamp >= oldest) break
      this.#head++
      if (timestamp !== undefined) {
        memory.seen.delete(key)
        this.#entries--
      }
      if (memory.seen.size === 0 && memory.floor < oldest && this.#minions.get(memory.id) === memory) this.#minions.delete(memory.id)
    }
    this.#compact()
  }

  #compact(): void {
    if (this.#head > 1024 && this.#head * 2 > this.#orderKeys.length) {
      this.#orderMemories = this.#orderMemories.slice(this.#head)
      this.#orderKeys = this.#orderKeys.slice(this.#head)
      this.#head = 0
    }
  }
}
