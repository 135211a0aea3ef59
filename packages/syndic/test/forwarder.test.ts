import { describe, expect, it } from 'vitest'
import type { SyndicJobEntry, SyndicMinionReturn } from '@brine/protocol'
import { encodedBytes, RETURN_FRAME_RESERVE_BYTES } from '@brine/link'
import { MAX_RETURNS_PER_BATCH, splitBatches, type PendingJob } from '../src/index.js'

const ret = (value: unknown): SyndicMinionReturn => ({ return: value, retcode: 0, success: true, fun_args: [] })

function pending(jid: string, count: number, value: (index: number) => unknown, extra: Partial<PendingJob> = {}): [string, PendingJob] {
  const returns = new Map<string, SyndicMinionReturn>()
  for (let index = 0; index < count; index++) returns.set(`m${index}`, ret(value(index)))
  return [jid, { fun: 'test.echo', minions: new Set(returns.keys()), returns, ...extra }]
}

/** Every (jid, minion) return across the batches, and the bytes of each batch as the syndic seals it. */
function unpack(batches: SyndicJobEntry[][]): { returns: string[]; bytes: number[] } {
  const returns = batches.flatMap((batch) => batch.flatMap((entry) => Object.keys(entry.returns ?? {}).map((id) => `${entry.jid}/${id}`)))
  const bytes = batches.map((jobs) => encodedBytes({ cmd: '_syndic_return', id: 'syn1', jobs }))
  return { returns, bytes }
}

describe('splitBatches', () => {
  it(`holds at most ${MAX_RETURNS_PER_BATCH} returns a batch; the job's announcement and load go with its first part, each later part announces its own minions`, () => {
    const load = { fun: 'test.echo', arg: ['x'] }
    const batches = [
      ...splitBatches(new Map([pending('20261123180000000001', 12_000, () => 'x', { load, pending: ['low'] })]), { maxFrameBytes: 64 * 1024 * 1024 }),
    ]
    expect(batches.map((batch) => batch.reduce((sum, entry) => sum + Object.keys(entry.returns ?? {}).length, 0))).toEqual([5000, 5000, 2000])
    const [first, second] = batches.map((batch) => batch[0]!)
    expect(first).toMatchObject({ jid: '20261123180000000001', fun: 'test.echo', load, pending: ['low'] })
    expect(first!.minions).toHaveLength(12_000)
    expect(second!.load).toBeUndefined()
    expect(second!.pending).toBeUndefined()
    expect(second!.minions).toEqual(Object.keys(second!.returns!))
    const { returns } = unpack(batches)
    expect(new Set(returns).size).toBe(12_000)
    expect(returns).toHaveLength(12_000)
  })

  it('keeps every batch within max_frame_bytes less the seal reserve, splitting jobs by their bytes', () => {
    const maxFrameBytes = 1024 * 1024
    const jobs = new Map([
      pending('20261123180000000001', 60, (index) => `${index}`.padEnd(40_000, 'a')),
      pending('20261123180000000002', 60, (index) => `${index}`.padEnd(40_000, 'b')),
    ])
    const batches = [...splitBatches(jobs, { maxFrameBytes })]
    const { returns, bytes } = unpack(batches)
    expect(batches.length).toBeGreaterThan(4)
    for (const size of bytes) expect(size).toBeLessThanOrEqual(maxFrameBytes - RETURN_FRAME_RESERVE_BYTES)
    expect(returns).toHaveLength(120)
    expect(new Set(returns).size).toBe(120)
    // The second job's returns are whole: nothing cut.
    const all = batches.flat().filter((entry) => entry.jid === '20261123180000000002')
    expect(all.flatMap((entry) => Object.values(entry.returns ?? {})).every((value) => (value.return as string).length === 40_000)).toBe(true)
  })

  it('cuts a return too big for a frame on its own, as a minion does, and says so', () => {
    const maxFrameBytes = 1024 * 1024
    const told: Array<[string, string, number, number]> = []
    const huge = 'x'.repeat(3 * 1024 * 1024)
    const batches = [
      ...splitBatches(new Map([pending('20261123180000000003', 2, (index) => (index === 0 ? huge : 'small'))]), {
        maxFrameBytes,
        onTruncated: (...args) => told.push(args),
      }),
    ]
    const { returns, bytes } = unpack(batches)
    expect(returns.sort()).toEqual(['20261123180000000003/m0', '20261123180000000003/m1'])
    for (const size of bytes) expect(size).toBeLessThanOrEqual(maxFrameBytes - RETURN_FRAME_RESERVE_BYTES)
    const cut = batches.flat().find((entry) => entry.returns?.['m0'] !== undefined)!.returns!['m0']!
    expect(cut.return as string).toMatch(/\n\[brine: truncated by the minion: \d+ bytes, the first \d+ kept, to fit max_frame_bytes \(1048576\)\]$/)
    expect(cut).toMatchObject({ retcode: 0, success: true })
    expect(told).toEqual([['20261123180000000003', 'm0', expect.any(Number) as number, expect.any(Number) as number]])
    expect(told[0]![2]).toBeGreaterThan(3 * 1024 * 1024)
    expect(told[0]![3]).toBeLessThanOrEqual(maxFrameBytes - RETURN_FRAME_RESERVE_BYTES)
  })
})
