import { endianness } from 'node:os'
import { crc32 } from 'node:zlib'
import { decode, encode, type WireValue } from '@brine/core'
import { ReturnLocations, type PackedReturns } from './return-locations.js'

/**
 * The persisted index of the local job cache (`<cachedir>/jobs/index`): the in-memory index as it stood when the
 * cache was closed, and the segments it was built from, each by its length and the CRC-32 of its bytes up to that
 * length. The file is `BRINEIX1`, the CRC-32 of the rest, then one msgpack map whose returns are columns of
 * numbers (typed arrays' bytes), so reading it back costs little more than copying them.
 */
const MAGIC = Buffer.from('BRINEIX1', 'latin1')
const HEADER_BYTES = MAGIC.length + 4
/** The columns' byte order: a file from a machine of the other order is rebuilt, not byte-swapped. */
const ENDIAN = endianness()

/** A segment as the persisted index saw it: `size` bytes whose CRC-32 is `crc`. */
export interface SnapshotSegment {
  day: string
  size: number
  crc: number
}

export interface SnapshotJob {
  jid: string
  load: Record<string, unknown>
  minions: string[]
  returns: ReturnLocations
}

export interface Snapshot {
  segments: SnapshotSegment[]
  /** Every minion id the jobs name, once (their minion lists and returns hold these very strings). */
  names: readonly string[]
  jobs: SnapshotJob[]
}

interface Columns {
  minions: Uint32Array
  name: Uint32Array
  day: Uint32Array
  offset: Float64Array
  length: Uint32Array
}

/** The persisted index's bytes; throws if a return sits in a segment not among `segments`. */
export function encodeSnapshot(segments: readonly SnapshotSegment[], jobs: readonly SnapshotJob[]): Buffer {
  const dayIndex = new Map(segments.map((segment, index) => [segment.day, index]))
  const names: string[] = []
  const nameIndex = new Map<string, number>()
  const nameOf = (id: string): number => {
    let index = nameIndex.get(id)
    if (index === undefined) {
      index = names.length
      names.push(id)
      nameIndex.set(id, index)
    }
    return index
  }
  let minionCount = 0
  let returnCount = 0
  for (const job of jobs) {
    minionCount += job.minions.length
    returnCount += job.returns.size
  }
  const columns: Columns = {
    minions: new Uint32Array(minionCount),
    name: new Uint32Array(returnCount),
    day: new Uint32Array(returnCount),
    offset: new Float64Array(returnCount),
    length: new Uint32Array(returnCount),
  }
  const heads: [string, Record<string, unknown>, number, number][] = []
  let m = 0
  let r = 0
  for (const job of jobs) {
    for (const id of job.minions) columns.minions[m++] = nameOf(id)
    job.returns.forEachPlace((id, day, offset, length) => {
      const segment = dayIndex.get(day)
      if (segment === undefined) throw new Error(`a return of ${job.jid} is in segment ${day}, which the index does not list`)
      columns.name[r] = nameOf(id)
      columns.day[r] = segment
      columns.offset[r] = offset
      columns.length[r++] = length
    })
    heads.push([job.jid, job.load, job.minions.length, job.returns.size])
  }
  const body = encode(
    {
      endian: ENDIAN,
      segments: segments.map(({ day, size, crc }) => [day, size, crc]),
      names,
      jobs: heads,
      ...Object.fromEntries(Object.entries(columns).map(([key, array]) => [key, bytesOf(array as Uint32Array | Float64Array)])),
    } as WireValue,
    0xffff_ffff,
  )
  const header = Buffer.allocUnsafe(HEADER_BYTES)
  MAGIC.copy(header)
  header.writeUInt32BE(crc32(body), MAGIC.length)
  return Buffer.concat([header, body])
}

/** The persisted index in `bytes`, or what is wrong with it. */
export function decodeSnapshot(bytes: Buffer): Snapshot | string {
  if (bytes.length < HEADER_BYTES || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) return 'not a persisted index of this version'
  const body = bytes.subarray(HEADER_BYTES)
  if (crc32(body) !== bytes.readUInt32BE(MAGIC.length)) return 'checksum mismatch'
  let value: unknown
  try {
    value = decode(body)
  } catch {
    return 'undecodable'
  }
  if (typeof value !== 'object' || value === null) return 'not a map'
  const head = value as Record<string, unknown>
  if (head['endian'] !== ENDIAN) return `written on a machine of the other byte order (${String(head['endian'])})`
  const segments = segmentsOf(head['segments'])
  const names = head['names']
  if (segments === undefined) return 'bad segment list'
  if (!Array.isArray(names) || !names.every((name) => typeof name === 'string')) return 'bad minion id table'
  const columns = columnsOf(head)
  if (columns === undefined) return 'bad return columns'
  const jobs = jobsOf(head['jobs'], names as string[], segments, columns)
  return typeof jobs === 'string' ? jobs : { segments, names: names as string[], jobs }
}

function segmentsOf(value: unknown): SnapshotSegment[] | undefined {
  if (!Array.isArray(value)) return undefined
  const segments: SnapshotSegment[] = []
  for (const entry of value) {
    if (!Array.isArray(entry) || entry.length !== 3) return undefined
    const [day, size, crc] = entry as unknown[]
    if (typeof day !== 'string' || !/^\d{8}$/.test(day) || !isCount(size) || !isCount(crc)) return undefined
    segments.push({ day, size, crc })
  }
  return segments
}

function columnsOf(head: Record<string, unknown>): Columns | undefined {
  const minions = typed(head['minions'], Uint32Array)
  const name = typed(head['name'], Uint32Array)
  const day = typed(head['day'], Uint32Array)
  const offset = typed(head['offset'], Float64Array)
  const length = typed(head['length'], Uint32Array)
  if (minions === undefined || name === undefined || day === undefined || offset === undefined || length === undefined) return undefined
  const returns = name.length
  if (day.length !== returns || offset.length !== returns || length.length !== returns) return undefined
  return { minions, name, day, offset, length }
}

/** The jobs, their minion lists and their returns (packed, views of the columns), every index checked against its table. */
function jobsOf(value: unknown, names: readonly string[], segments: readonly SnapshotSegment[], columns: Columns): SnapshotJob[] | string {
  if (!Array.isArray(value)) return 'bad job list'
  const days = segments.map((segment) => segment.day)
  if (!below(columns.minions, names.length) || !below(columns.name, names.length)) return 'minion id out of its table'
  for (let i = 0; i < columns.day.length; i++) {
    const segment = segments[columns.day[i]!]
    if (segment === undefined || columns.offset[i]! + columns.length[i]! > segment.size) return 'return outside its segment'
  }
  const jobs: SnapshotJob[] = []
  let m = 0
  let r = 0
  for (const entry of value) {
    if (!Array.isArray(entry) || entry.length !== 4) return 'bad job entry'
    const [jid, load, minionCount, returnCount] = entry as unknown[]
    if (typeof jid !== 'string' || typeof load !== 'object' || load === null || Array.isArray(load) || !isCount(minionCount) || !isCount(returnCount))
      return 'bad job entry'
    if (m + minionCount > columns.minions.length || r + returnCount > columns.name.length) return 'job entries beyond the columns'
    // A plain loop: Array.from with a map over a typed array took most of the load.
    const minions = new Array<string>(minionCount)
    for (let i = 0; i < minionCount; i++) minions[i] = names[columns.minions[m++]!]!
    const packed: PackedReturns = {
      names,
      days,
      name: columns.name.subarray(r, r + returnCount),
      day: columns.day.subarray(r, r + returnCount),
      offset: columns.offset.subarray(r, r + returnCount),
      length: columns.length.subarray(r, (r += returnCount)),
    }
    jobs.push({ jid, load: load as Record<string, unknown>, minions, returns: new ReturnLocations(packed) })
  }
  if (m !== columns.minions.length || r !== columns.name.length) return 'columns longer than the job entries'
  return jobs
}

function below(indexes: Uint32Array, size: number): boolean {
  for (let i = 0; i < indexes.length; i++) if (indexes[i]! >= size) return false
  return true
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

function bytesOf(array: Uint32Array | Float64Array): Buffer {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength)
}

/** msgpack bin `value` as a typed array: a view of its bytes where they are aligned for it, else a copy. */
function typed<T extends Uint32Array | Float64Array>(
  value: unknown,
  Kind: { new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): T; BYTES_PER_ELEMENT: number },
): T | undefined {
  const width = Kind.BYTES_PER_ELEMENT
  if (!(value instanceof Uint8Array) || value.byteLength % width !== 0) return undefined
  if (value.byteOffset % width === 0) return new Kind(value.buffer, value.byteOffset, value.byteLength / width)
  const copy = new Uint8Array(value.byteLength)
  copy.set(value)
  return new Kind(copy.buffer)
}
