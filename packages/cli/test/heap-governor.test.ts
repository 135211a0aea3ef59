import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { HEAP_PRESSURE_GROWING_PERCENT, HEAP_PRESSURE_HIGH_BYTES, HEAP_PRESSURE_LOW_BYTES, HeapGovernor } from '../src/heap-governor.js'

const MiB = 1024 * 1024

/** A process to drive by hand: its resident size, and the shares set so far. */
function fakeProcess() {
  const state = { rss: 100 * MiB, set: [] as number[] }
  const governor = new HeapGovernor({ rssBytes: () => state.rss, setGrowingPercent: (percent) => state.set.push(percent), relaxedPercent: 150 })
  /** The governor's verdict after each of `sizes` (MiB). */
  const walk = (sizes: readonly number[]): boolean[] =>
    sizes.map((mib) => {
      state.rss = mib * MiB
      return governor.check()
    })
  return { state, governor, walk }
}

describe('HeapGovernor', () => {
  it('tightens the old generation at the high mark and relaxes it only under the low mark', () => {
    const { state, governor, walk } = fakeProcess()
    const high = HEAP_PRESSURE_HIGH_BYTES / MiB
    const low = HEAP_PRESSURE_LOW_BYTES / MiB
    expect(walk([100, high - 1, 150])).toEqual([false, false, false])
    expect(state.set).toEqual([])
    // Between the marks it keeps what it has: no flip at every collection.
    expect(walk([high, high + 100, low + 1, high - 1, high + 50, low])).toEqual([true, true, true, true, true, true])
    expect(state.set).toEqual([HEAP_PRESSURE_GROWING_PERCENT])
    expect(walk([low - 1, low + 1, high - 1])).toEqual([false, false, false])
    expect(state.set).toEqual([HEAP_PRESSURE_GROWING_PERCENT, 150])
    expect(walk([high + 1])).toEqual([true])
    expect(governor.tightenings).toBe(2)
    expect(state.set).toEqual([HEAP_PRESSURE_GROWING_PERCENT, 150, HEAP_PRESSURE_GROWING_PERCENT])
  })

  it('leaves the relaxed share set when it stops, and sets nothing when it was relaxed', () => {
    const { state, governor, walk } = fakeProcess()
    governor.start()
    governor.stop()
    expect(state.set).toEqual([])
    walk([500])
    governor.stop()
    expect(state.set).toEqual([HEAP_PRESSURE_GROWING_PERCENT, 150])
    expect(governor.tight).toBe(false)
  })

  it('takes its marks and share from its options; a low mark above the high one is the high one', () => {
    const set: number[] = []
    const rss = { now: 0 }
    const governor = new HeapGovernor({
      rssBytes: () => rss.now,
      setGrowingPercent: (percent) => set.push(percent),
      relaxedPercent: 100,
      tightPercent: 10,
      highBytes: 50 * MiB,
      lowBytes: 80 * MiB,
    })
    rss.now = 50 * MiB
    expect(governor.check()).toBe(true)
    rss.now = 50 * MiB - 1
    expect(governor.check()).toBe(false)
    expect(set).toEqual([10, 100])
  })
})

/**
 * A process that keeps a live set and churns objects that live long enough to be promoted (its young generation held
 * small), with the old generation's growth set at run time as the governor sets it: its old space's largest size.
 */
const CHURN = `
const v8 = require('node:v8')
v8.setFlagsFromString('--heap-growing-percent=' + process.argv[1])
const oldSpace = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'old_space').space_size
const live = []
for (let i = 0; i < 100000; i++) live.push({ i, name: 'live' + i, pair: [i, i] })
const ring = new Array(20000)
let largest = 0
for (let k = 0; k < 800000; k++) {
  ring[k % ring.length] = { k, name: 'garbage' + k, one: [k] }
  if (k % 5000 === 0) largest = Math.max(largest, oldSpace())
}
process.stdout.write(String(live.length === 100000 ? largest : -1))
`

async function largestOldSpace(percent: number): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--max-semi-space-size=1', '-e', CHURN, String(percent)], { timeout: 60_000 })
  return Number(stdout)
}

describe('the share the governor sets', () => {
  it('bounds the old generation of a running process: under the same churn it peaks lower at the tight share than at the relaxed one', async () => {
    const [relaxed, tight] = await Promise.all([largestOldSpace(150), largestOldSpace(HEAP_PRESSURE_GROWING_PERCENT)])
    expect(relaxed).toBeGreaterThan(0)
    expect(tight).toBeGreaterThan(0)
    expect(tight).toBeLessThan(relaxed * 0.8)
  }, 120_000)
})
