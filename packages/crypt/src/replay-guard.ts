import { randomBytes } from 'node:crypto'
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
 * current time, so a floor only ever costs them a re-seal of a request older than it. The total bounds
 * the slots of the memory in arrival order: a request forgotten by its minion's bound, or whose apply
 * failed, keeps its slot until the window or `total` newer requests pass it, so memory never exceeds it.
 */
export interface ReplayGuardOptions {
  /** ± ms a request's sealing time may be from `now()` (`request_window`). */
  windowMs: number
  /** Requests remembered per minion (`request_nonces_per_minion`). */
  perMinion: number
  /** Requests remembered in all, as slots in arrival order (`request_nonces_total`). */
  total: number
  /** The master's clock, ms since the epoch (default Date.now). */
  now?: () => number
  /**
   * Requests sealed at or before this time are refused (default: none): the master's start, since the memory of
   * the requests it applied before a restart is gone, and a recording from then would otherwise apply again.
   */
  startedAt?: number
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

/** What {@link ReplayGuard.admit} resolves to for a duplicate (a request that is not applied again). */
export const DUPLICATE: unique symbol = Symbol('duplicate')

/** Bytes of a sealed request's box nonce (nacl's box nonce): the guard stores exactly this many per request. */
export const REPLAY_NONCE_BYTES = 24

const FIRST_CAPACITY = 1024
const NONE = -1

interface MinionMemory {
  readonly id: string
  /** Its oldest and newest linked slots (arrival order, chained through `#nextOfMinion`); NONE when none. */
  first: number
  last: number
  /** Its slots still remembered (in the table). */
  live: number
  /** Requests sealed at or before this time are refused. */
  floor: number
}

/** Smallest power of two ≥ n. */
const powerOfTwoAtLeast = (n: number): number => 2 ** Math.ceil(Math.log2(Math.max(2, n)))

/**
 * The memory is a ring of slots in arrival order, held in typed arrays (~65 bytes a request where a Map of
 * strings cost ~123, and ~74 against ~232 once it had started forgetting): the nonce bytes, the sealing time, the minion,
 * and the next slot of the same minion. An open-addressing table of slot numbers finds a (minion, nonce); its
 * hash is keyed with a secret drawn at start, so a minion choosing its nonces cannot pile them on one chain.
 *
 * A slot is *live* (remembered, in the table), *dead* (its apply failed: out of the table, still chained to its
 * minion) or a *hole* (forgotten by its minion's bound, or reclaimed: owned by nobody). The ring grows to
 * `total` slots and then reclaims its oldest slot for each new request, so `total` bounds the slots, holes
 * included, and the memory never exceeds it. A minion's chain is in arrival order and is only ever cut at its
 * head, which is also where the ring reaches it first.
 */
export class ReplayGuard {
  readonly windowMs: number
  readonly perMinion: number
  readonly total: number
  readonly #now: () => number
  readonly #started: number
  readonly #minions = new Map<string, MinionMemory>()
  readonly #seed = randomBytes(4).readInt32LE(0)
  #capacity = 0
  #nonces = new Uint8Array(0)
  #times = new Float64Array(0)
  #owners: Array<MinionMemory | undefined> = []
  #nextOfMinion = new Int32Array(0)
  #live = new Uint8Array(0)
  /**
   * The apply of each live slot's request while it runs: a duplicate found in the table waits for it. By slot, not by
   * the nonce as a string: a request makes no key of its own.
   */
  #applying: Array<Promise<unknown> | undefined> = []
  /**
   * The nonce {@link seen} hashed last and its hash: {@link admit} of the same request (the same array, which must not
   * change meanwhile, as run's contract says) takes it instead of hashing the nonce a second time. Let go once taken;
   * held until the next `seen` when the request never reaches `admit` (its box did not open).
   */
  #hashedNonce: Uint8Array | undefined
  #hashedValue = 0
  /** Slot + 1 per cell, 0 for empty; at most half full. */
  #table = new Int32Array(0)
  #mask = 0
  /** Memories whose chain emptied, in that order: each is dropped once its floor leaves the window. */
  #emptied: MinionMemory[] = []
  #emptiedHead = 0
  /** The ring: its oldest slot and how many slots (holes included) it holds. */
  #head = 0
  #used = 0
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
    this.#started = options.startedAt ?? Number.NEGATIVE_INFINITY
    this.#resize(Math.min(FIRST_CAPACITY, this.total))
  }

  stats(): ReplayGuardStats {
    return { entries: this.#entries, minions: this.#minions.size, ...this.#stats }
  }

  /**
   * Applies the request `(id, nonce)` sealed at `timestamp` once: `apply` runs for the first arrival
   * ('applied'); a later arrival of the same pair waits for that and resolves 'duplicate' (or rejects
   * as the first did). If `apply` fails the pair is forgotten, so the minion's retry of the same bytes
   * is applied then. Rejects with StaleRequestError, before `apply`, for a request outside the window.
   * `nonce` is {@link REPLAY_NONCE_BYTES} long and must not change until the returned promise settles.
   */
  run(id: string, nonce: Uint8Array, timestamp: number, apply: () => Promise<void>): Promise<ReplayVerdict> {
    return this.admit(id, nonce, timestamp, apply).then((outcome) => (outcome === DUPLICATE ? 'duplicate' : 'applied'))
  }

  /**
   * {@link run}, resolving with what `apply` resolved to for the first arrival and {@link DUPLICATE} for a later one:
   * the caller keeps its result without a closure of its own around `apply`, and no second promise is chained.
   */
  admit<T>(id: string, nonce: Uint8Array, timestamp: number, apply: () => Promise<T>): Promise<T | typeof DUPLICATE> {
    if (nonce.length !== REPLAY_NONCE_BYTES) {
      return Promise.reject(new RangeError(`ReplayGuard nonce must be ${REPLAY_NONCE_BYTES} bytes, got ${nonce.length}`))
    }
    const now = this.#now()
    this.#expire(now)
    const stale = this.#staleness(id, timestamp, now)
    if (stale !== undefined) return Promise.reject(stale)
    const memory = this.#minions.get(id)
    const hash = this.#hashOf(nonce)
    const known = memory === undefined ? NONE : this.#find(memory, nonce, hash)
    if (known !== NONE) return this.#duplicateOf(known)
    if (memory !== undefined && timestamp <= memory.floor) {
      this.#stats.stale++
      return Promise.reject(new StaleRequestError(id, timestamp, now, 'floor', memory.floor))
    }
    const mine = memory ?? this.#newMemory(id)
    this.#remember(mine, nonce, hash, timestamp)
    let applying: Promise<T>
    try {
      applying = apply()
    } catch (error) {
      applying = Promise.reject(error)
    }
    // Found again rather than kept: `apply`'s synchronous part may have moved the ring (another request remembered).
    const slot = this.#find(mine, nonce, hash)
    if (slot !== NONE) this.#applying[slot] = applying
    return applying.then(
      (value) => {
        this.#settled(mine, nonce, hash, applying)
        this.#stats.applied++
        return value
      },
      (error: unknown) => {
        // Not applied: the same bytes sent again (the minion's retry) may be applied then.
        const at = this.#settled(mine, nonce, hash, applying)
        if (at !== NONE && this.#times[at] === timestamp) this.#unremember(at)
        throw error
      },
    )
  }

  /** A StaleRequestError (counted) when `timestamp` is outside the window or not after the master's start, else undefined. */
  #staleness(id: string, timestamp: number, now: number): StaleRequestError | undefined {
    if (!Number.isFinite(timestamp) || Math.abs(now - timestamp) > this.windowMs) {
      this.#stats.stale++
      return new StaleRequestError(id, timestamp, now, 'window', this.windowMs)
    }
    if (timestamp <= this.#started) {
      this.#stats.stale++
      return new StaleRequestError(id, timestamp, now, 'start', this.#started)
    }
    return undefined
  }

  /** A remembered request's copy: counted, and settled once the first arrival's apply is (or at once). */
  #duplicateOf(slot: number): Promise<typeof DUPLICATE> {
    this.#stats.duplicates++
    const first = this.#applying[slot]
    return first === undefined ? Promise.resolve(DUPLICATE) : first.then(() => DUPLICATE)
  }

  /** The slot of a request whose apply settled, its apply no longer waited for; NONE when it was forgotten meanwhile. */
  #settled(memory: MinionMemory, nonce: Uint8Array, hash: number, applying: Promise<unknown>): number {
    const slot = this.#find(memory, nonce, hash)
    if (slot !== NONE && this.#applying[slot] === applying) this.#applying[slot] = undefined
    return slot
  }

  /** The nonce's hash, taken from {@link seen}'s when it hashed this very array last. */
  #hashOf(nonce: Uint8Array): number {
    if (nonce !== this.#hashedNonce) return this.#hash(nonce, 0)
    this.#hashedNonce = undefined
    return this.#hashedValue
  }

  /**
   * The request `(id, nonce)` already given to {@link run} and remembered: resolves 'duplicate' once its first arrival
   * has been applied (or rejects as that did), counted as a duplicate. Undefined when the pair is not remembered (new,
   * forgotten, out of the window, or its apply failed): such a request goes through {@link run}. Asked before a
   * request is opened, so a copy of one in hand costs no opening; nothing is remembered here, so a stranger naming a
   * nonce it saw gains only an answer sealed to the minion.
   */
  seen(id: string, nonce: Uint8Array): Promise<ReplayVerdict> | undefined {
    if (nonce.length !== REPLAY_NONCE_BYTES) return undefined
    this.#expire(this.#now())
    const memory = this.#minions.get(id)
    if (memory === undefined) return undefined
    const hash = this.#hash(nonce, 0)
    this.#hashedNonce = nonce
    this.#hashedValue = hash
    const slot = this.#find(memory, nonce, hash)
    if (slot === NONE) return undefined
    this.#hashedNonce = undefined
    return this.#duplicateOf(slot).then(() => 'duplicate')
  }

  #newMemory(id: string): MinionMemory {
    const memory: MinionMemory = { id, first: NONE, last: NONE, live: 0, floor: Number.NEGATIVE_INFINITY }
    this.#minions.set(id, memory)
    return memory
  }

  #remember(memory: MinionMemory, nonce: Uint8Array, hash: number, timestamp: number): void {
    if (memory.live >= this.perMinion) this.#forgetOldestOf(memory)
    if (this.#used === this.#capacity) {
      if (this.#capacity < this.total) this.#resize(Math.min(this.total, this.#capacity * 2))
      else this.#reclaimHead(true)
    }
    const slot = (this.#head + this.#used) % this.#capacity
    this.#used++
    this.#nonces.set(nonce, slot * REPLAY_NONCE_BYTES)
    this.#times[slot] = timestamp
    this.#owners[slot] = memory
    this.#nextOfMinion[slot] = NONE
    this.#live[slot] = 1
    this.#applying[slot] = undefined
    if (memory.last === NONE) memory.first = slot
    else this.#nextOfMinion[memory.last] = slot
    memory.last = slot
    memory.live++
    this.#entries++
    this.#insertIntoTable(slot, hash)
  }

  /** Linear probing: the first empty cell from the hash's home (the table is at most half full). */
  #insertIntoTable(slot: number, hash: number): void {
    let cell = hash & this.#mask
    while (this.#table[cell] !== 0) cell = (cell + 1) & this.#mask
    this.#table[cell] = slot + 1
  }

  /** A minion's bound reached: its oldest remembered request is forgotten, and its time becomes the floor. */
  #forgetOldestOf(memory: MinionMemory): void {
    while (memory.first !== NONE) {
      const slot = memory.first
      const live = this.#live[slot] === 1
      if (live) this.#evict(slot)
      this.#unlinkHead(slot)
      if (live) return
    }
  }

  /** Forgets a live slot early (a bound was reached): its time becomes its minion's floor, so it can never be replayed. */
  #evict(slot: number): void {
    const memory = this.#owners[slot]!
    const timestamp = this.#times[slot]!
    this.#unremember(slot)
    if (timestamp > memory.floor) memory.floor = timestamp
    this.#stats.evicted++
  }

  /** Takes a live slot out of the table; it stays chained to its minion (dead) until its chain or the ring reaches it. */
  #unremember(slot: number): void {
    this.#live[slot] = 0
    this.#applying[slot] = undefined
    this.#owners[slot]!.live--
    this.#entries--
    this.#deleteFromTable(slot)
  }

  /** Cuts `slot`, its minion's oldest, from the minion's chain: it becomes a hole. */
  #unlinkHead(slot: number): void {
    const memory = this.#owners[slot]!
    memory.first = this.#nextOfMinion[slot]!
    if (memory.first === NONE) memory.last = NONE
    this.#owners[slot] = undefined
  }

  /** Frees the ring's oldest slot; a live one is forgotten early when `bounded` (the ring is full), or as expired. */
  #reclaimHead(bounded: boolean): void {
    const slot = this.#head
    const memory = this.#owners[slot]
    if (memory !== undefined) {
      if (this.#live[slot] === 1) {
        if (bounded) this.#evict(slot)
        else this.#unremember(slot)
      }
      this.#unlinkHead(slot)
      if (memory.first === NONE) this.#emptied.push(memory)
    }
    this.#head = (this.#head + 1) % this.#capacity
    this.#used--
  }

  /** Drops what the window refuses anyway: slots from the oldest up to the first live one sealed inside it, and memories left with neither slots nor a floor in the window. */
  #expire(now: number): void {
    const oldest = now - this.windowMs
    while (this.#used > 0) {
      const slot = this.#head
      if (this.#owners[slot] !== undefined && this.#live[slot] === 1 && this.#times[slot]! >= oldest) break
      this.#reclaimHead(false)
    }
    while (this.#emptiedHead < this.#emptied.length) {
      const memory = this.#emptied[this.#emptiedHead]!
      // A memory given slots again is left to them; one with a floor still in the window waits (and those behind it).
      if (memory.first === NONE && memory.floor >= oldest) break
      this.#emptiedHead++
      if (memory.first === NONE && this.#minions.get(memory.id) === memory) this.#minions.delete(memory.id)
    }
    if (this.#emptiedHead > 1024 && this.#emptiedHead * 2 > this.#emptied.length) {
      this.#emptied = this.#emptied.slice(this.#emptiedHead)
      this.#emptiedHead = 0
    }
  }

  #find(memory: MinionMemory, nonce: Uint8Array, hash: number): number {
    const nonces = this.#nonces
    for (let cell = hash & this.#mask; this.#table[cell] !== 0; cell = (cell + 1) & this.#mask) {
      const slot = this.#table[cell]! - 1
      if (this.#owners[slot] !== memory) continue
      const at = slot * REPLAY_NONCE_BYTES
      let same = true
      for (let i = 0; i < REPLAY_NONCE_BYTES; i++) {
        if (nonces[at + i] !== nonce[i]) {
          same = false
          break
        }
      }
      if (same) return slot
    }
    return NONE
  }

  /** Linear probing's deletion without tombstones: later cells of the run move back when their home allows. */
  #deleteFromTable(slot: number): void {
    const table = this.#table
    const mask = this.#mask
    let hole = this.#hash(this.#nonces, slot * REPLAY_NONCE_BYTES) & mask
    while (table[hole] !== slot + 1) hole = (hole + 1) & mask
    for (let cell = (hole + 1) & mask; table[cell] !== 0; cell = (cell + 1) & mask) {
      const home = this.#hash(this.#nonces, (table[cell]! - 1) * REPLAY_NONCE_BYTES) & mask
      // The entry at `cell` may fill the hole unless its home lies cyclically in (hole, cell].
      const stays = hole <= cell ? hole < home && home <= cell : hole < home || home <= cell
      if (stays) continue
      table[hole] = table[cell]!
      hole = cell
    }
    table[hole] = 0
  }

  /** murmur3's 32-bit mix over the 24 nonce bytes at `offset`, keyed with this guard's seed. */
  #hash(bytes: Uint8Array, offset: number): number {
    let h = this.#seed
    for (let i = offset; i < offset + REPLAY_NONCE_BYTES; i += 4) {
      let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)
      k = Math.imul(k, 0xcc9e2d51)
      k = (k << 15) | (k >>> 17)
      h ^= Math.imul(k, 0x1b873593)
      h = (h << 13) | (h >>> 19)
      h = (Math.imul(h, 5) + 0xe6546b64) | 0
    }
    h ^= REPLAY_NONCE_BYTES
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
    return (h ^ (h >>> 16)) >>> 0
  }

  /** Moves the ring to `capacity` slots, oldest first at 0, and rebuilds the chains and the table. */
  #resize(capacity: number): void {
    const old = { capacity: this.#capacity, nonces: this.#nonces, times: this.#times, owners: this.#owners, next: this.#nextOfMinion, live: this.#live }
    this.#capacity = capacity
    this.#nonces = new Uint8Array(capacity * REPLAY_NONCE_BYTES)
    this.#times = new Float64Array(capacity)
    this.#owners = new Array<MinionMemory | undefined>(capacity).fill(undefined)
    this.#nextOfMinion = new Int32Array(capacity)
    this.#live = new Uint8Array(capacity)
    const applying = this.#applying
    this.#applying = new Array<Promise<unknown> | undefined>(capacity).fill(undefined)
    const moved = (slot: number): number => (slot === NONE ? NONE : (slot - this.#head + old.capacity) % old.capacity)
    for (let position = 0; position < this.#used; position++) {
      const from = (this.#head + position) % old.capacity
      this.#nonces.set(old.nonces.subarray(from * REPLAY_NONCE_BYTES, (from + 1) * REPLAY_NONCE_BYTES), position * REPLAY_NONCE_BYTES)
      this.#times[position] = old.times[from]!
      this.#owners[position] = old.owners[from]
      this.#nextOfMinion[position] = moved(old.next[from]!)
      this.#live[position] = old.live[from]!
      this.#applying[position] = applying[from]
    }
    for (const memory of this.#minions.values()) {
      memory.first = moved(memory.first)
      memory.last = moved(memory.last)
    }
    this.#head = 0
    this.#table = new Int32Array(powerOfTwoAtLeast(capacity * 2))
    this.#mask = this.#table.length - 1
    for (let slot = 0; slot < this.#used; slot++) {
      if (this.#live[slot] === 1) this.#insertIntoTable(slot, this.#hash(this.#nonces, slot * REPLAY_NONCE_BYTES))
    }
  }
}
