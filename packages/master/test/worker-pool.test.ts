import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { boxSharedKey, generateKeys, openPublish, SessionKeys, type SubmitResult } from '@brine/crypt'
import { InlinePool, ThreadPool, WorkerPoolBusyError, WorkerPoolError, type RequestPool } from '../src/index.js'
import { encode } from '@brine/core'

// The pool runs the built worker script, as the master does (`npm test` builds before vitest).
const script = new URL('../dist/request-worker.js', import.meta.url)
const submit = async (): Promise<SubmitResult> => ({ state: 'pending', changes: [], rotateSession: false, keyMismatch: false })

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
      const pool = kind === 'inline' ? new InlinePool(master, submit) : new ThreadPool({ size: 2, script, masterKeys: master, submit })
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
    const pool = new ThreadPool({ size: 2, script, masterKeys: master, submit })
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
    const pool = new ThreadPool({ size: 1, script, masterKeys: master, submit })
    pools.push(pool)
    await expect(pool.run('web1', { op: 'box-shared-key', boxKey: new Uint8Array(3) })).rejects.toThrow(/box public key must be 32 bytes/)
    const minion = generateKeys()
    expect(await pool.run('web1', { op: 'box-shared-key', boxKey: minion.box.publicKey })).toEqual(boxSharedKey(master.box.publicKey, minion.box.secretKey))
  })

  it('threads: hands each worker at most maxInFlight tasks; a sheddable one that waited past maxWaitMs is refused unrun, the rest run in order', async () => {
    const master = generateKeys()
    let clock = 0
    const pool = new ThreadPool({ size: 1, script, masterKeys: master, submit, maxInFlight: 2, maxWaitMs: 2000, now: () => clock })
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
    const pool = new ThreadPool({ size: 1, script, masterKeys: master, submit, maxInFlight: 1 })
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

  it('threads: refuses tasks once closed', async () => {
    const pool = new ThreadPool({ size: 1, script, masterKeys: generateKeys(), submit })
    await pool.close()
    await expect(pool.run('web1', { op: 'box-shared-key', boxKey: generateKeys().box.publicKey })).rejects.toThrow(/closed/)
  })

  it('threads: tasks still waiting for a worker when the pool closes are refused, not left hanging', async () => {
    const pool = new ThreadPool({ size: 1, script, masterKeys: generateKeys(), submit, maxInFlight: 1 })
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
