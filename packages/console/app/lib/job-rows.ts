/** One expected minion's row on the Run page and the job page. */
export type RowState = 'waiting' | 'returned' | 'failed' | 'did not return'

export interface Row {
  id: string
  state: RowState
  ret?: unknown
  retcode?: number
  /** Where the return came from: the live event stream, or the job cache (what the stream missed). */
  via?: 'event' | 'cache'
}

/** A return event's data (`salt/job/<jid>/ret/<id>`), as far as the rows need it. */
export interface ReturnData {
  id: string
  return?: unknown
  retcode?: number
  success?: boolean
}

/**
 * The rows of one job: every expected minion starts waiting; a return makes it returned, or failed when
 * its retcode is not 0 or it says it did not succeed; at the deadline the rest did not return. A return
 * from a minion not expected (a syndic's) adds its row. Counts are kept so a 1,000-row job is summarised
 * without scanning.
 */
export class JobRows {
  readonly #rows = new Map<string, Row>()
  readonly counts: Record<RowState, number> = { waiting: 0, returned: 0, failed: 0, 'did not return': 0 }

  constructor(minions: readonly string[]) {
    for (const id of minions) this.#set({ id, state: 'waiting' })
  }

  #set(row: Row): void {
    const previous = this.#rows.get(row.id)
    if (previous !== undefined) this.counts[previous.state]--
    this.#rows.set(row.id, row)
    this.counts[row.state]++
  }

  /** Applies one return; true when it changed a row. */
  applyReturn(data: ReturnData, via: 'event' | 'cache' = 'event'): boolean {
    const failed = (data.retcode !== undefined && data.retcode !== 0) || data.success === false
    const row: Row = { id: data.id, state: failed ? 'failed' : 'returned', ret: data.return, via }
    if (data.retcode !== undefined) row.retcode = data.retcode
    this.#set(row)
    return true
  }

  /** Marks every row still waiting as not returned. */
  expire(): void {
    for (const row of [...this.#rows.values()]) if (row.state === 'waiting') this.#set({ id: row.id, state: 'did not return' })
  }

  stateOf(id: string): RowState | undefined {
    return this.#rows.get(id)?.state
  }

  get done(): boolean {
    return this.counts.waiting === 0
  }

  get size(): number {
    return this.#rows.size
  }

  /** The rows sorted by minion id, `offset`…`offset + limit` (a page). */
  page(offset: number, limit: number): Row[] {
    return [...this.#rows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).slice(offset, offset + limit)
  }
}
