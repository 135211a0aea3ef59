import v8 from 'node:v8'
import { describe, expect, it } from 'vitest'
import { IDLE_CHECK_EVERY_MS, IdleCollector, memoryReducingGc, MINION_IDLE_COLLECTION, type IdleCollection } from '../src/idle-collector.js'

const MiB = 1024 * 1024

/** A process to drive by hand: its clock, its CPU time and its resident size, and a collection that shrinks it. */
function fakeProcess(afterCollect = 100 * MiB, settings: IdleCollection = { growthBytes: 48 * MiB }) {
  const state = { now: 0, share: 0, rss: 100 * MiB, collected: 0 }
  const collector = new IdleCollector({
    collect: () => {
      state.collected++
      state.rss = afterCollect
    },
    rssBytes: () => state.rss,
    busyShare: () => state.share,
    now: () => state.now,
    idleMs: 2000,
    ...settings,
  })
  /** `ms` of time with the event loop busy `share` of it, one check a second. */
  const run = (ms: number, share: number): boolean[] => {
    const collected: boolean[] = []
    for (let at = 0; at < ms; at += IDLE_CHECK_EVERY_MS) {
      state.now += IDLE_CHECK_EVERY_MS
      state.share = share
      collected.push(collector.check())
    }
    return collected
  }
  return { state, collector, run }
}

describe('IdleCollector', () => {
  it('collects once the process has been idle for idleMs after its resident size grew by growthBytes, and only once', () => {
    const { state, run } = fakeProcess()
    state.rss = 300 * MiB
    expect(run(10_000, 0.9)).not.toContain(true)
    const idle = run(6000, 0.01)
    // Busy at the last check of the load; idle from the next one on: the second idle second is the first to collect.
    expect(idle).toEqual([false, true, false, false, false, false])
    expect(state.collected).toBe(1)
    expect(run(20_000, 0.01)).not.toContain(true)
    expect(state.collected).toBe(1)
  })

  it('does not collect while busy, nor when idle without growth, nor when the growth is under growthBytes', () => {
    const { state, run } = fakeProcess()
    expect(run(10_000, 0.01)).not.toContain(true)
    state.rss += 40 * MiB
    expect(run(10_000, 0.01)).not.toContain(true)
    state.rss += 100 * MiB
    expect(run(10_000, 0.5)).not.toContain(true)
    expect(state.collected).toBe(0)
  })

  it('measures growth from the size after its last collection, and from a size that fell by itself', () => {
    const { state, run } = fakeProcess(150 * MiB)
    state.rss = 400 * MiB
    run(5000, 0.01)
    expect(state.collected).toBe(1)
    state.rss = 190 * MiB
    run(2000, 0.9)
    expect(run(5000, 0.01)).not.toContain(true)
    state.rss = 120 * MiB
    run(5000, 0.01)
    state.rss = 170 * MiB
    run(2000, 0.9)
    expect(run(5000, 0.01)).toContain(true)
    expect(state.collected).toBe(2)
  })

  it("a minion's settings: its first idle spell after the start collects, then a job's few MiB more do and a ping's less do not", () => {
    const { state, run } = fakeProcess(50 * MiB, MINION_IDLE_COLLECTION)
    state.rss = 64 * MiB
    run(3000, 0.9)
    expect(state.collected).toBe(0)
    expect(run(5000, 0.01)).toContain(true)
    expect(state.collected).toBe(1)
    state.rss = 51 * MiB
    run(2000, 0.9)
    expect(run(5000, 0.01)).not.toContain(true)
    state.rss = 58 * MiB
    run(2000, 0.9)
    expect(run(5000, 0.01)).toContain(true)
    expect(state.collected).toBe(2)
  })

  it('memoryReducingGc in three rounds or more frees the bytecode of functions that ran once, which one round leaves', async () => {
    const trustedUsed = (): number => v8.getHeapSpaceStatistics().find((space) => space.space_name === 'trusted_space')!.space_used_size
    // Still reachable, so only their bytecode can go.
    const functions = Array.from(
      { length: 3000 },
      (_, index) => new Function('n', `let s = ${index}; for (let i = 0; i < n; i++) s += (i * ${index}) % 7; return s`),
    )
    for (const fn of functions) fn(3)
    await memoryReducingGc(1)()
    const afterOne = trustedUsed()
    await memoryReducingGc(3)()
    // Each function's bytecode is some 180 bytes; how much of the trusted space goes beside theirs depends on what else
    // ran in this worker before (files share workers), so the bound is on theirs: at least 100 bytes each.
    expect(afterOne - trustedUsed()).toBeGreaterThan(functions.length * 100)
    expect(functions.map((fn) => fn(1))).toHaveLength(3000)
  })

  it('memoryReducingGc hands back what a dropped heap held', () => {
    const collect = memoryReducingGc()
    let garbage: unknown[] | undefined = Array.from({ length: 200_000 }, (_, index) => ({ index, text: `item ${index}` }))
    const held = process.memoryUsage().heapUsed
    expect(garbage.length).toBe(200_000)
    garbage = undefined
    collect()
    expect(process.memoryUsage().heapUsed).toBeLessThan(held - 8 * MiB)
  })
})
