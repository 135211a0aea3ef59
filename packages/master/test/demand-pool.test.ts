import { afterEach, describe, expect, it, vi } from 'vitest'
import { boxSharedKey, generateKeys } from '@brine/crypt'
import { DemandPool, InlinePool, ThreadPool, WORKER_START_TASKS, WORKER_START_WINDOW_MS, type RequestPool } from '../src/index.js'

// The threads run the built worker script, as the master does (`npm test` builds before vitest).
const script = new URL('../dist/request-worker.js', import.meta.url)

describe('the request pool that starts its threads on demand', () => {
  const pools: RequestPool[] = []
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()))
  })

  function demandPool(options: { size?: number; idleMs?: number; startTasks?: number; windowMs?: number; now?: () => number } = {}) {
    const masterKeys = generateKeys()
    const threads = new ThreadPool({ size: options.size ?? 2, script, masterKeys, idleMs: options.idleMs })
    const pool = new DemandPool({
      inline: new InlinePool(masterKeys),
      threads,
      startTasks: options.startTasks,
      windowMs: options.windowMs,
      now: options.now,
    })
    pools.push(pool)
    return { pool, masterKeys }
  }

  it('runs a small burst on the main thread and starts no worker thread', async () => {
    const { pool, masterKeys } = demandPool()
    const minions = Array.from({ length: WORKER_START_TASKS - 1 }, () => generateKeys())
    const shared = await Promise.all(minions.map((minion, index) => pool.run(`web${index}`, { op: 'box-shared-key', boxKey: minion.box.publicKey })))
    shared.forEach((key, index) => expect(key).toEqual(boxSharedKey(masterKeys.box.publicKey, minions[index]!.box.secretKey)))
    expect(pool.workers()).toEqual({ running: 0, started: 0, retired: 0 })
    expect(pool.stats()).toMatchObject({ size: 2, offThread: {}, threads: 0, inline: { 'box-shared-key': WORKER_START_TASKS - 1 } })
  })

  it('starts the worker threads once a herd brings the threshold of tasks within the window, and they run the rest', async () => {
    const { pool, masterKeys } = demandPool()
    const minions = Array.from({ length: 4 * WORKER_START_TASKS }, () => generateKeys())
    const shared = await Promise.all(minions.map((minion, index) => pool.run(`web${index}`, { op: 'box-shared-key', boxKey: minion.box.publicKey })))
    shared.forEach((key, index) => expect(key).toEqual(boxSharedKey(masterKeys.box.publicKey, minions[index]!.box.secretKey)))
    const { inline, offThread, threads } = pool.stats()
    expect(inline).toEqual({ 'box-shared-key': WORKER_START_TASKS - 1 })
    expect(offThread).toEqual({ 'box-shared-key': 3 * WORKER_START_TASKS + 1 })
    // The herd's minion ids spread over both slots: each started its thread, and no more than the configured two.
    expect(threads).toBe(2)
    expect(pool.workers().started).toBe(2)
  })

  it('counts over a sliding window: tasks spread wider than the window never start a thread', async () => {
    let clock = 0
    const { pool } = demandPool({ startTasks: 4, windowMs: 100, now: () => clock })
    const boxKey = generateKeys().box.publicKey
    for (let task = 0; task < 12; task++) {
      await pool.run('web1', { op: 'box-shared-key', boxKey })
      // Four tasks span 3 × 34 ms = 102 ms: never four within 100 ms.
      clock += 34
    }
    expect(pool.workers().started).toBe(0)
    expect(pool.stats().inline).toEqual({ 'box-shared-key': 12 })
    clock += 1000
    for (let task = 0; task < 4; task++) await pool.run('web1', { op: 'box-shared-key', boxKey })
    expect(pool.workers().started).toBe(1)
    expect(pool.stats()).toMatchObject({ inline: { 'box-shared-key': 15 }, offThread: { 'box-shared-key': 1 } })
  })

  it('goes back to the main thread once its threads retired for idleness', async () => {
    let clock = 0
    const { pool } = demandPool({ size: 1, idleMs: 50, startTasks: 2, windowMs: 100, now: () => clock })
    const boxKey = generateKeys().box.publicKey
    await pool.run('web1', { op: 'box-shared-key', boxKey })
    await pool.run('web1', { op: 'box-shared-key', boxKey })
    expect(pool.workers()).toMatchObject({ running: 1, started: 1 })
    // While a thread runs, every task goes to it, however few come.
    clock += 10_000
    await pool.run('web1', { op: 'box-shared-key', boxKey })
    expect(pool.stats().offThread).toEqual({ 'box-shared-key': 2 })
    await vi.waitFor(() => expect(pool.workers().retired).toBe(1), { timeout: 10_000, interval: 20 })
    clock += 10_000
    await pool.run('web1', { op: 'box-shared-key', boxKey })
    expect(pool.workers()).toEqual({ running: 0, started: 1, retired: 1 })
    expect(pool.stats().inline).toEqual({ 'box-shared-key': 2 })
  })

  it('refuses a start bound or window that is not positive', () => {
    const masterKeys = generateKeys()
    const threads = new ThreadPool({ size: 1, script, masterKeys })
    pools.push(threads)
    const inline = new InlinePool(masterKeys)
    for (const startTasks of [0, -1, 1.5])
      expect(() => new DemandPool({ inline, threads, startTasks })).toThrow(/worker start bound must be a positive integer/)
    for (const windowMs of [0, -1, Number.NaN])
      expect(() => new DemandPool({ inline, threads, windowMs })).toThrow(/worker start window must be a positive number of ms/)
  })
})
