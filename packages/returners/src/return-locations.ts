/** Where one return's record sits: `length` bytes (the whole frame) at `offset` of segment `day`. */
export interface Location {
  day: string
  offset: number
  length: number
}

/**
 * One job's returns as the persisted index holds them: views into its columns (minion id and segment as indexes
 * into its tables, offset, length), in the order the returns arrived.
 */
export interface PackedReturns {
  names: readonly string[]
  days: readonly string[]
  name: Uint32Array
  day: Uint32Array
  offset: Float64Array
  length: Uint32Array
}

/**
 * A job's returns by minion id, as a Map of {@link Location}s. One read from the persisted index stays packed
 * until it is first used: a restart loads hundreds of thousands of returns, and most of their jobs are never
 * looked up again, so making a Map entry and a Location object for each of them at load was most of the load's
 * cost.
 */
export class ReturnLocations implements Iterable<[string, Location]> {
  #map: Map<string, Location> | undefined
  #packed: PackedReturns | undefined

  constructor(packed?: PackedReturns) {
    if (packed === undefined) this.#map = new Map()
    else this.#packed = packed
  }

  get size(): number {
    return this.#packed === undefined ? this.#map!.size : this.#packed.name.length
  }

  has(id: string): boolean {
    return this.#unpacked().has(id)
  }

  get(id: string): Location | undefined {
    return this.#unpacked().get(id)
  }

  set(id: string, location: Location): this {
    this.#unpacked().set(id, location)
    return this
  }

  delete(id: string): boolean {
    return this.#unpacked().delete(id)
  }

  [Symbol.iterator](): Iterator<[string, Location]> {
    return this.#unpacked()[Symbol.iterator]()
  }

  /** Each return's minion id and place, in arrival order, without unpacking (what the persisted index is written from). */
  forEachPlace(visit: (id: string, day: string, offset: number, length: number) => void): void {
    const packed = this.#packed
    if (packed === undefined) {
      for (const [id, { day, offset, length }] of this.#map!) visit(id, day, offset, length)
      return
    }
    for (let i = 0; i < packed.name.length; i++) visit(packed.names[packed.name[i]!]!, packed.days[packed.day[i]!]!, packed.offset[i]!, packed.length[i]!)
  }

  #unpacked(): Map<string, Location> {
    if (this.#map !== undefined) return this.#map
    const map = new Map<string, Location>()
    this.forEachPlace((id, day, offset, length) => map.set(id, { day, offset, length }))
    this.#map = map
    this.#packed = undefined
    return map
  }
}
