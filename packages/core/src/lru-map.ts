/**
 * A Map of at most `limit` entries for the memo caches on hot paths (verified signatures, opened
 * publishes, shared keys, compiled globs): `get` marks an entry recently used, and `set` beyond
 * the limit drops the least recently used one. Map iteration order is insertion order, so the
 * oldest entry is the first key.
 */
export class LruMap<K, V> {
  readonly limit: number
  readonly #entries = new Map<K, V>()
  /** The most recently used key: a hit on it needs no reordering (the swarm's minions ask for one publish in a row). */
  #newest: K | undefined

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`an LruMap holds at least one entry, not ${limit}`)
    this.limit = limit
  }

  get size(): number {
    return this.#entries.size
  }

  /** The value of `key`, now the most recently used; undefined when absent. */
  get(key: K): V | undefined {
    const value = this.#entries.get(key)
    if (value !== undefined && key !== this.#newest) {
      this.#newest = key
      this.#entries.delete(key)
      this.#entries.set(key, value)
    }
    return value
  }

  has(key: K): boolean {
    return this.#entries.has(key)
  }

  set(key: K, value: V): this {
    this.#newest = key
    this.#entries.delete(key)
    this.#entries.set(key, value)
    if (this.#entries.size > this.limit) this.#entries.delete(this.#entries.keys().next().value as K)
    return this
  }

  delete(key: K): boolean {
    if (key === this.#newest) this.#newest = undefined
    return this.#entries.delete(key)
  }
}
