import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import type { Tgt } from '@brine/protocol'
import { deadline } from '@brine/transport-compliance'
import { type FakeMinion, runCleanups, stopNatsServer } from '../../master/test/helpers.js'
import {
  batchSizeFor,
  parseBatchSize,
  runBatch,
  type BatchEvent,
  type BatchHost,
  type BatchJob,
  type BatchJobOptions,
  type BatchOptions,
} from '../src/batch.js'
import { BatchSizeError } from '../src/errors.js'
import type { CliReturn, WaitOptions } from '../src/job.js'
import { setup } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)
afterEach(() => {
  vi.useRealTimers()
})

const WAIT_MS = 10_000

describe('batch sizes', () => {
  it("reads Salt's forms: a count, N% and %N", () => {
    expect(parseBatchSize('3')).toEqual({ count: 3 })
    expect(parseBatchSize(2)).toEqual({ count: 2 })
    expect(parseBatchSize(' 10% ')).toEqual({ percent: 10 })
    expect(parseBatchSize('%10')).toEqual({ percent: 10 })
    expect(parseBatchSize('12.5%')).toEqual({ percent: 12.5 })
  })

  it("sizes a percentage as Salt's get_bnum does: rounded down, and up to 1 below one", () => {
    expect(batchSizeFor({ percent: 50 }, 3)).toBe(1)
    expect(batchSizeFor({ percent: 50 }, 4)).toBe(2)
    expect(batchSizeFor({ percent: 10 }, 5)).toBe(1)
    expect(batchSizeFor({ percent: 150 }, 4)).toBe(6)
    expect(batchSizeFor({ percent: 29 }, 100)).toBe(29)
    expect(batchSizeFor({ count: 7 }, 3)).toBe(7)
  })

  it('refuses what is neither, zero included, naming the value and the key', () => {
    for (const bad of ['abc', '0', '0%', '-1', '1.5', '', 'ten%', '5 minions']) {
      expect(() => parseBatchSize(bad, '--batch'), bad).toThrow(BatchSizeError)
    }
    expect(() => parseBatchSize('0%', 'batch_safe_size')).toThrow(/invalid batch size "0%" for batch_safe_size: a percentage must be above 0%/)
    expect(() => parseBatchSize('x', '--batch')).toThrow(/give a number of minions \(3\) or a percentage of them \(10%, or %10\)/)
  })
})

/** A published job whose returns the test hands over one by one. */
class FakeJob implements BatchJob {
  readonly #queue: CliReturn[] = []
  #wake: (() => void) | undefined
  closed = false
  waits: WaitOptions[] = []
  constructor(
    readonly jid: string,
    readonly minions: string[],
  ) {}

  answer(id: string, retcode = 0, ret: unknown = true): void {
    this.#push({ id, status: 'returned', ret, retcode, success: retcode === 0, jid: this.jid })
  }

  miss(id: string): void {
    this.#push({ id, status: 'missing', jid: this.jid })
  }

  #push(item: CliReturn): void {
    this.#queue.push(item)
    this.#wake?.()
  }

  async *returns(options: WaitOptions = {}): AsyncGenerator<CliReturn> {
    this.waits.push(options)
    const pending = new Set(this.minions)
    while (pending.size > 0) {
      const item = this.#queue.shift()
      if (item === undefined) {
        if (options.signal?.aborted === true) return
        await new Promise<void>((resolve) => {
          this.#wake = resolve
          options.signal?.addEventListener('abort', () => resolve(), { once: true })
        })
        continue
      }
      pending.delete(item.id)
      yield item
    }
  }

  async close(): Promise<void> {
    this.closed = true
  }
}

/** A client stand-in: the ping matches `matched`; a list target is expected as given, less `gone`. */
class FakeHost implements BatchHost {
  readonly calls: Array<{ tgt: Tgt; fun: string; arg: readonly unknown[]; options: BatchJobOptions }> = []
  readonly jobs: FakeJob[] = []
  readonly gone = new Set<string>()
  #waiters: Array<() => void> = []
  constructor(readonly matched: string[]) {}

  async runJob(tgt: Tgt, fun: string, arg: readonly unknown[], options: BatchJobOptions): Promise<FakeJob> {
    this.calls.push({ tgt, fun, arg, options })
    const minions = Array.isArray(tgt) ? tgt.filter((id) => !this.gone.has(id)) : this.matched
    const job = new FakeJob(`2026010100000000000${this.jobs.length}`, minions)
    this.jobs.push(job)
    for (const wake of this.#waiters.splice(0)) wake()
    return job
  }

  /** The `n`th job published (0 is the ping). */
  job(n: number): FakeJob {
    const job = this.jobs[n]
    if (job === undefined) throw new Error(`job ${n} was not published (${this.jobs.length} were)`)
    return job
  }
}

/** Steps through a batch run one event at a time, each step bounded. */
function stepper(host: FakeHost, options: BatchOptions, tgt: Tgt = '*', fun = 'cmd.run', arg: unknown[] = ['true']) {
  const iterator = runBatch(host, tgt, fun, arg, options)
  const next = async (): Promise<BatchEvent | undefined> => {
    const result = await deadline(iterator.next(), WAIT_MS, 'the next batch event')
    return result.done === true ? undefined : result.value
  }
  return {
    iterator,
    next,
    /** Runs to the ping pre-pass, which `up` answer and `down` do not; returns its event. */
    pinged: async (up: readonly string[], down: readonly string[] = []): Promise<BatchEvent | undefined> => {
      const event = next()
      for (const id of up) host.job(0).answer(id)
      for (const id of down) host.job(0).miss(id)
      return event
    },
  }
}

const returned = (id: string, jid: string, retcode = 0) => ({ id, status: 'returned', ret: true, retcode, success: retcode === 0, jid })

describe('runBatch', () => {
  it('pings first, gives no job to the minions that did not answer, and keeps a sliding window of list-target jobs', async () => {
    const host = new FakeHost(['web2', 'web1', 'db1', 'web3'])
    const run = stepper(host, { batch: 2, tgtType: 'glob', kwarg: { cwd: '/' }, ret: 'syslog', metadata: { ticket: 8 }, timeout: 3000, gatherJobTimeout: 1000 })
    const first = run.next()
    const ping = host.job(0)
    ping.answer('web2')
    ping.answer('web1')
    ping.answer('web3')
    ping.miss('db1')
    expect(await first).toEqual({ type: 'ping', jid: ping.jid, minions: ['web2', 'web1', 'db1', 'web3'], up: ['web1', 'web2', 'web3'], down: ['db1'], size: 2 })
    expect(host.calls[0]).toEqual({ tgt: '*', fun: 'test.ping', arg: [], options: { tgtType: 'glob', timeout: 3000 } })
    expect(ping.waits[0]).toEqual({ timeout: 3000, gatherJobTimeout: 1000 })
    expect(ping.closed).toBe(true)

    const batch1 = await run.next()
    expect(batch1).toEqual({ type: 'batch', jid: host.job(1).jid, minions: ['web1', 'web2'], progress: { done: 0, running: 2, waiting: 1 } })
    expect(host.calls[1]).toEqual({
      tgt: ['web1', 'web2'],
      fun: 'cmd.run',
      arg: ['true'],
      options: { tgtType: 'list', timeout: 3000, kwarg: { cwd: '/' }, ret: 'syslog', metadata: { ticket: 8 } },
    })
    // web2 returns first: its slot goes to web3 at once, while web1 still runs.
    host.job(1).answer('web2')
    expect(await run.next()).toEqual({ type: 'return', item: returned('web2', host.job(1).jid), progress: { done: 1, running: 1, waiting: 1 } })
    expect(await run.next()).toEqual({ type: 'batch', jid: host.job(2).jid, minions: ['web3'], progress: { done: 1, running: 2, waiting: 0 } })
    host.job(2).answer('web3', 4)
    expect(await run.next()).toMatchObject({ type: 'return', item: returned('web3', host.job(2).jid, 4), progress: { done: 2, running: 1, waiting: 0 } })
    host.job(1).answer('web1')
    expect(await run.next()).toMatchObject({ type: 'return', item: { id: 'web1' }, progress: { done: 3, running: 0, waiting: 0 } })
    expect(await run.next()).toBeUndefined()
    expect(host.jobs.map((job) => job.closed)).toEqual([true, true, true])
    expect(new Set(host.jobs.map((job) => job.jid)).size).toBe(3)
  })

  it('reports a minion that did not return its batch job, and goes on', async () => {
    const host = new FakeHost(['a', 'b'])
    const run = stepper(host, { batch: '50%' })
    expect(await run.pinged(['a', 'b'])).toMatchObject({ type: 'ping', up: ['a', 'b'], size: 1 })
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['a'] })
    host.job(1).miss('a')
    expect(await run.next()).toEqual({
      type: 'return',
      item: { id: 'a', status: 'missing', jid: host.job(1).jid },
      progress: { done: 1, running: 0, waiting: 1 },
    })
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['b'] })
    host.job(2).answer('b')
    expect(await run.next()).toMatchObject({ type: 'return', item: { id: 'b', status: 'returned' } })
    expect(await run.next()).toBeUndefined()
  })

  it('failhard stops at the first non-zero retcode: no further batch, the rest named', async () => {
    const host = new FakeHost(['a', 'b', 'c', 'd'])
    const run = stepper(host, { batch: 2, failhard: true })
    const first = run.next()
    for (const id of ['a', 'b', 'c', 'd']) host.job(0).answer(id)
    await first
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['a', 'b'] })
    host.job(1).answer('a')
    expect(await run.next()).toMatchObject({ type: 'return', item: { id: 'a', retcode: 0 } })
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['c'] })
    host.job(2).answer('c', 2)
    expect(await run.next()).toMatchObject({ type: 'return', item: { id: 'c', retcode: 2 } })
    expect(await run.next()).toEqual({ type: 'failhard', id: 'c', jid: host.job(2).jid, running: ['b'], unsent: ['d'] })
    expect(await run.next()).toBeUndefined()
    expect(host.jobs).toHaveLength(3)
    expect(host.jobs.every((job) => job.closed)).toBe(true)
  })

  it('failhard also stops on a minion that did not return; without failhard every minion runs', async () => {
    const hard = new FakeHost(['a', 'b'])
    const run = stepper(hard, { batch: 1, failhard: true })
    await run.pinged(['a', 'b'])
    await run.next()
    hard.job(1).miss('a')
    expect(await run.next()).toMatchObject({ type: 'return', item: { id: 'a', status: 'missing' } })
    expect(await run.next()).toEqual({ type: 'failhard', id: 'a', jid: hard.job(1).jid, running: [], unsent: ['b'] })
    expect(await run.next()).toBeUndefined()

    const soft = new FakeHost(['a', 'b'])
    const all = stepper(soft, { batch: 1 })
    await all.pinged(['a', 'b'])
    await all.next()
    soft.job(1).answer('a', 1)
    expect(await all.next()).toMatchObject({ type: 'return', item: { id: 'a', retcode: 1 } })
    expect(await all.next()).toMatchObject({ type: 'batch', minions: ['b'] })
    soft.job(2).answer('b')
    expect(await all.next()).toMatchObject({ type: 'return', item: { id: 'b' } })
    expect(await all.next()).toBeUndefined()
  })

  it('ends after the ping when nothing matched or nobody answered', async () => {
    const none = new FakeHost([])
    const empty = stepper(none, { batch: 1 })
    expect(await empty.next()).toEqual({ type: 'ping', jid: none.job(0).jid, minions: [], up: [], down: [], size: 1 })
    expect(await empty.next()).toBeUndefined()
    expect(none.jobs).toHaveLength(1)

    const silent = new FakeHost(['a'])
    const run = stepper(silent, { batch: 1 })
    expect(await run.pinged([], ['a'])).toMatchObject({ type: 'ping', up: [], down: ['a'] })
    expect(await run.next()).toBeUndefined()
    expect(silent.jobs).toHaveLength(1)
  })

  it('a minion the master no longer expects when its batch is published is reported missing at once', async () => {
    const host = new FakeHost(['a', 'b'])
    const run = stepper(host, { batch: 2 })
    await run.pinged(['a', 'b'])
    host.gone.add('b')
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['a', 'b'] })
    expect(await run.next()).toEqual({
      type: 'return',
      item: { id: 'b', status: 'missing', jid: host.job(1).jid },
      progress: { done: 1, running: 1, waiting: 0 },
    })
    host.job(1).answer('a')
    expect(await run.next()).toMatchObject({ type: 'return', item: { id: 'a' } })
    expect(await run.next()).toBeUndefined()
  })

  it('uses a ping job published beforehand instead of publishing one', async () => {
    const host = new FakeHost(['a'])
    const ping = new FakeJob('20260101000000000099', ['a'])
    const run = stepper(host, { batch: 1, ping })
    const first = run.next()
    ping.answer('a')
    expect(await first).toMatchObject({ type: 'ping', jid: ping.jid, up: ['a'] })
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['a'] })
    expect(host.calls.map((call) => call.fun)).toEqual(['cmd.run'])
    expect(ping.closed).toBe(true)
  })

  it('holds a freed slot for batchWait before the next batch takes it', async () => {
    vi.useFakeTimers()
    const host = new FakeHost(['a', 'b'])
    // Driven by hand: a bounded step's own timer would fire as the fake clock jumps.
    const run = runBatch(host, '*', 'cmd.run', [], { batch: 1, batchWait: 60_000 })
    const first = run.next()
    host.job(0).answer('a')
    host.job(0).answer('b')
    await first
    expect((await run.next()).value).toMatchObject({ type: 'batch', minions: ['a'] })
    host.job(1).answer('a')
    expect((await run.next()).value).toMatchObject({ type: 'return', item: { id: 'a' } })
    let published = false
    const after = run.next().then((result) => {
      published = true
      return result
    })
    await vi.advanceTimersByTimeAsync(59_999)
    expect(published).toBe(false)
    expect(host.jobs).toHaveLength(2)
    await vi.advanceTimersByTimeAsync(1)
    expect((await after).value).toMatchObject({ type: 'batch', minions: ['b'] })
    await run.return(undefined)
  })

  it('an aborted signal ends the run: nothing more is published, every reader is closed', async () => {
    const host = new FakeHost(['a', 'b'])
    const controller = new AbortController()
    const run = stepper(host, { batch: 1, signal: controller.signal })
    await run.pinged(['a', 'b'])
    expect(await run.next()).toMatchObject({ type: 'batch', minions: ['a'] })
    const pending = run.next()
    controller.abort()
    expect(await pending).toBeUndefined()
    expect(host.jobs).toHaveLength(2)
    expect(host.job(1).closed).toBe(true)
  })

  it('refuses a bad batch size before publishing anything', async () => {
    const host = new FakeHost(['a'])
    await expect(runBatch(host, '*', 'test.ping', [], { batch: '0' }).next()).rejects.toBeInstanceOf(BatchSizeError)
    expect(host.jobs).toHaveLength(0)
  })
})

type BatchJobEvent = Extract<BatchEvent, { type: 'batch' }>

/** Answers this minion's publishes by function until it has answered each of `funs` once (find_job rounds are let pass). */
async function respond(minion: FakeMinion, funs: Record<string, { ret: unknown; retcode: number }>): Promise<void> {
  const left = new Set(Object.keys(funs))
  for (let count = 1; left.size > 0; count++) {
    const load = minion.open(await minion.nthPublish(count))
    const fun = load['fun'] as string
    const answer = funs[fun]
    if (answer === undefined || !left.delete(fun)) continue
    const reply = await minion.sealed({
      cmd: '_return',
      id: minion.id,
      jid: load['jid'],
      fun,
      fun_args: load['arg'],
      return: answer.ret,
      retcode: answer.retcode,
      success: answer.retcode === 0,
    })
    expect(reply).toEqual({ ok: true })
  }
}

describe.each(['zeromq', 'tcp', 'nats'])('LocalClient.cmdBatch against a real master over %s', (transport) => {
  it('pings, skips the silent minion, runs one minion at a time as list targets under new jids, and failhard stops the run', async () => {
    const { events, client, minions } = await setup(transport, ['a', 'b', 'c', 'silent'])
    const [a, b, c] = minions as [FakeMinion, FakeMinion, FakeMinion]
    const ping = { ret: true, retcode: 0 }
    const answering = Promise.all([
      respond(a, { 'test.ping': ping, 'cmd.run': { ret: 'fine', retcode: 0 } }),
      respond(b, { 'test.ping': ping, 'cmd.run': { ret: 'broken', retcode: 3 } }),
      respond(c, { 'test.ping': ping }),
    ])

    const seen: BatchEvent[] = []
    const run = (async () => {
      for await (const event of client.cmdBatch('*', 'cmd.run', ['deploy'], { batch: 1, failhard: true, timeout: 2000, gatherJobTimeout: 500 }))
        seen.push(event)
    })()
    await deadline(Promise.all([run, answering]), 3 * WAIT_MS, 'the batch run to end')

    expect(seen.map((event) => event.type)).toEqual(['ping', 'batch', 'return', 'batch', 'return', 'failhard'])
    expect(seen[0]).toMatchObject({ type: 'ping', up: ['a', 'b', 'c'], down: ['silent'], size: 1 })
    const [, batch1, return1, batch2, return2, stop] = seen as [BatchEvent, BatchJobEvent, BatchEvent, BatchJobEvent, BatchEvent, BatchEvent]
    expect(batch1).toMatchObject({ minions: ['a'] })
    expect(return1).toMatchObject({ item: { id: 'a', status: 'returned', ret: 'fine', retcode: 0, jid: batch1.jid } })
    expect(batch2).toMatchObject({ minions: ['b'] })
    expect(return2).toMatchObject({ item: { id: 'b', status: 'returned', ret: 'broken', retcode: 3, jid: batch2.jid } })
    expect(stop).toEqual({ type: 'failhard', id: 'b', jid: batch2.jid, running: [], unsent: ['c'] })
    expect(batch1.jid).not.toBe(batch2.jid)
    // What the master published: the ping to the glob, then one list target per batch; nothing to c or the silent minion.
    const published = events.events
      .filter((event) => event.tag.startsWith('salt/job/') && event.tag.endsWith('/new'))
      .map((event) => [event.data['fun'], event.data['tgt_type'], event.data['tgt']])
    expect(published.filter(([fun]) => fun !== 'saltutil.find_job')).toEqual([
      ['test.ping', 'glob', '*'],
      ['cmd.run', 'list', ['a']],
      ['cmd.run', 'list', ['b']],
    ])
    expect(client.openReaders).toBe(0)
  })
})
