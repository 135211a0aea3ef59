import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { boxSharedKey, generateKeys, openPublish, SessionKeys } from '@brine/crypt'
import { InlinePool, ThreadPool, WORKER_YOUNG_GENERATION_MB, WorkerPoolBusyError, WorkerPoolError, type RequestPool } from '../src/index.js'
import { encode } from '@brine/core'
import bcrypt from 'bcryptjs'

// The pool runs the built worker script, as the master does (`npm test` builds before vitest).
const script = new URL('../dist/request-worker.js', import.meta.url)

describe('request pools', () => {
  const pools: RequestPool[] = []
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()))
  })

  it('has a built worker script to run', () => {
    expect(existsSync(fileURLToPath(script)), `${fileURLToPath(script)} (run npm run build)`).toBe(true)
  })

  for (const kind of ['inline', 'threads'] as const) {
    it(`${kind}: computes a minion's shared key and seals publishes the minion can open`, async () => {
      const master = generateKeys()
      const minion = generateKeys()
      const pool = kind === 'inline' ? new InlinePool(master) : new ThreadPool({ size: 2, script, masterKeys: master })
      pools.push(pool)
      const shared = await pool.run('web1', { op: 'box-shared-key', boxKey: minion.box.publicKey })
      expect(shared).toEqual(boxSharedKey(master.box.publicKey, minion.box.secretKey))
      const session = new SessionKeys().current()
      const envelope = await pool.run('20261122000000000000', { op: 'seal-publish', encoded: encode({ fun: 'test.ping' }), session })
      expect(openPublish(envelope, session, master.sign.publicKey)).toEqual({ fun: 'test.ping' })
    })
  }

  it('threads: counts each kind of task a worker thread reports it ran, and the threads that ran them', async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 2, script, masterKeys: master })
    pools.push(pool)
    expect(pool.stats()).toEqual({ size: 2, offThread: {}, threads: 0 })
    const session = new SessionKeys().current()
    await pool.run('web1', { op: 'box-shared-key', boxKey: generateKeys().box.publicKey })
    await Promise.all(['a', 'b', 'c'].map((key) => pool.run(key, { op: 'seal-publish', encoded: encode({ fun: 'test.ping' }), session })))
    const stats = pool.stats()
    expect(stats.offThread).toEqual({ 'box-shared-key': 1, 'seal-publish': 3 })
    expect(stats.threads).toBeGreaterThanOrEqual(1)
    expect(stats.threads).toBeLessThanOrEqual(2)
  })

  it('threads: a failing task rejects with the worker error, and the pool keeps serving', async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 1, script, masterKeys: master })
    pools.push(pool)
    await expect(pool.run('web1', { op: 'box-shared-key', boxKey: new Uint8Array(3) })).rejects.toThrow(/box public key must be 32 bytes/)
    const minion = generateKeys()
    expect(await pool.run('web1', { op: 'box-shared-key', boxKey: minion.box.publicKey })).toEqual(boxSharedKey(master.box.publicKey, minion.box.secretKey))
  })

  it('threads: hands each worker at most maxInFlight tasks; a sheddable one that waited past maxWaitMs is refused unrun, the rest run in order', async () => {
    const master = generateKeys()
    let clock = 0
    const pool = new ThreadPool({ size: 1, script, masterKeys: master, maxInFlight: 2, maxWaitMs: 2000, now: () => clock })
    pools.push(pool)
    const minion = generateKeys()
    const task = { op: 'box-shared-key' as const, boxKey: minion.box.publicKey }
    const expected = boxSharedKey(master.box.publicKey, minion.box.secretKey)
    const first = [pool.run('a', task), pool.run('a', task)]
    // Settled as they happen (a refusal comes before the test awaits it).
    const outcome = (promise: Promise<unknown>): Promise<unknown> =>
      promise.then(
        (value) => value,
        (error: unknown) => error,
      )
    const late = [outcome(pool.run('a', task, { shed: true })), outcome(pool.run('a', task, { shed: true }))]
    const kept = pool.run('a', task)
    expect(pool.load()).toEqual({ inFlight: 2, waiting: 3, shed: 0 })
    // The two queued sheddable tasks are found 2,500 ms old when a worker place frees up; the unsheddable one runs however long it waited.
    clock += 2500
    const fresh = pool.run('a', task, { shed: true })
    expect(await Promise.all(first)).toEqual([expected, expected])
    const refusals = await Promise.all(late)
    for (const refused of refusals) expect(refused).toBeInstanceOf(WorkerPoolBusyError)
    expect((refusals[0] as Error).message).toMatch(/waited 2500 ms for one \(bound 2000 ms\); refused unrun/)
    expect(await kept).toEqual(expected)
    expect(await fresh).toEqual(expected)
    expect(pool.load()).toEqual({ inFlight: 0, waiting: 0, shed: 2 })
    expect(pool.stats().offThread).toEqual({ 'box-shared-key': 4 })
  })

  it("threads: an urgent task (the master's own publish) is handed to the worker before the peers' tasks already waiting", async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 1, script, masterKeys: master, maxInFlight: 1 })
    pools.push(pool)
    const order: string[] = []
    const session = new SessionKeys().current()
    const shared = { op: 'box-shared-key' as const, boxKey: generateKeys().box.publicKey }
    const done = (name: string) => (): void => {
      order.push(name)
    }
    const runs = [
      pool.run('a', shared).then(done('first')),
      pool.run('a', shared).then(done('peer 1')),
      pool.run('a', shared).then(done('peer 2')),
      pool.run('a', { op: 'seal-publish', encoded: encode({ fun: 'test.ping' }), session }, { urgent: true }).then(done('publish')),
    ]
    expect(pool.load()).toEqual({ inFlight: 1, waiting: 3, shed: 0 })
    await Promise.all(runs)
    expect(order).toEqual(['first', 'publish', 'peer 1', 'peer 2'])
  })

  it('threads: starts no thread before a task needs one, then only the thread of the slot the task is routed to', async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 2, script, masterKeys: master })
    pools.push(pool)
    expect(pool.workers()).toEqual({ running: 0, started: 0, retired: 0 })
    const minion = generateKeys()
    expect(await pool.run('web1', { op: 'box-shared-key', boxKey: minion.box.publicKey })).toEqual(boxSharedKey(master.box.publicKey, minion.box.secretKey))
    expect(pool.workers()).toEqual({ running: 1, started: 1, retired: 0 })
    // The same key lands on the same slot: its thread serves it again, none other starts.
    await pool.run('web1', { op: 'box-shared-key', boxKey: minion.box.publicKey })
    expect(pool.workers()).toEqual({ running: 1, started: 1, retired: 0 })
  })

  it("threads: prestart starts every slot's thread before any task, the tasks start none other, and idle ones are retired as any", async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 2, script, masterKeys: master, idleMs: 2000 })
    pools.push(pool)
    pool.prestart()
    expect(pool.workers()).toEqual({ running: 2, started: 2, retired: 0 })
    pool.prestart()
    const minions = ['web1', 'web2', 'web3', 'web4'].map((id) => ({ id, keys: generateKeys() }))
    for (const { id, keys } of minions) {
      expect(await pool.run(id, { op: 'box-shared-key', boxKey: keys.box.publicKey })).toEqual(boxSharedKey(master.box.publicKey, keys.box.secretKey))
    }
    expect(pool.workers()).toEqual({ running: 2, started: 2, retired: 0 })
    await vi.waitFor(() => expect(pool.workers()).toEqual({ running: 0, started: 2, retired: 2 }), { timeout: 20_000, interval: 50 })
  })

  it("threads: bounds each worker's young generation", async () => {
    const pool = new ThreadPool({ size: 2, script, masterKeys: generateKeys() })
    pools.push(pool)
    const boxKey = generateKeys().box.publicKey
    await Promise.all(['web1', 'web2', 'web3', 'web4'].map((key) => pool.run(key, { op: 'box-shared-key', boxKey })))
    const limits = pool.workerLimits()
    expect(limits.length).toBeGreaterThanOrEqual(1)
    for (const limit of limits) expect(limit.maxYoungGenerationSizeMb).toBe(WORKER_YOUNG_GENERATION_MB)
  })

  it('threads: stops a thread idle for idleMs, and the next task starts a fresh one that serves it', async () => {
    const master = generateKeys()
    const pool = new ThreadPool({ size: 1, script, masterKeys: master, idleMs: 50 })
    pools.push(pool)
    const minion = generateKeys()
    const task = { op: 'box-shared-key' as const, boxKey: minion.box.publicKey }
    const expected = boxSharedKey(master.box.publicKey, minion.box.secretKey)
    expect(await pool.run('web1', task)).toEqual(expected)
    await vi.waitFor(() => expect(pool.workers().retired).toBe(1), { timeout: 10_000, interval: 20 })
    expect(pool.workers()).toEqual({ running: 0, started: 1, retired: 1 })
    expect(await pool.run('web1', task)).toEqual(expected)
    expect(pool.workers()).toEqual({ running: 1, started: 2, retired: 1 })
    expect(pool.stats().offThread).toEqual({ 'box-shared-key': 2 })
    // Two threads ran on the one slot: the account says one of one.
    expect(pool.stats().threads).toBe(1)
  })

  it('threads: never stops a thread while it holds a task, however long the task runs', async () => {
    const pool = new ThreadPool({ size: 1, script, masterKeys: generateKeys(), idleMs: 5 })
    pools.push(pool)
    // Comparing with a bcrypt hash of cost 10 keeps the worker busy many times idleMs.
    const hash = bcrypt.hashSync('secret', 10)
    const seen: number[] = []
    const timer = setInterval(() => seen.push(pool.workers().retired), 5)
    try {
      expect(await pool.run('login', { op: 'bcrypt-compare', password: 'secret', hash })).toMatchObject({ match: true })
    } finally {
      clearInterval(timer)
    }
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.every((retired) => retired === 0)).toBe(true)
    expect(pool.workers().started).toBe(1)
  })

  it('threads: refuses an idle bound that is not a positive number of ms', () => {
    for (const idleMs of [0, -1, Number.NaN]) {
      expect(() => new ThreadPool({ size: 1, script, masterKeys: generateKeys(), idleMs })).toThrow(/idle bound must be a positive number of ms/)
    }
  })

  it('threads: refuses tasks once closed', async () => {
    const pool = new ThreadPool({ size: 1, script, masterKeys: generateKeys() })
    await pool.close()
    await expect(pool.run('web1', { op: 'box-shared-key', boxKey: generateKeys().box.publicKey })).rejects.toThrow(/closed/)
  })

  it('threads: tasks still waiting for a worker when the pool closes are refused, not left hanging', async () => {
    const pool = new ThreadPool({ size: 1, script, masterKeys: generateKeys(), maxInFlight: 1 })
    const boxKey = generateKeys().box.publicKey
    const running = pool.run('web1', { op: 'box-shared-key', boxKey })
    const waiting = pool.run('web1', { op: 'box-shared-key', boxKey }).then(
      () => undefined,
      (error: unknown) => error,
    )
    running.catch(() => {})
    await pool.close()
    expect(await waiting).toBeInstanceOf(WorkerPoolError)
    expect(String(await waiting)).toMatch(/closed/)
  })
})
