/** The copy each job gets of its frozen, shared load; one jid published by several masters; the runner's memory of the jids it ran. */
import { describe, expect, it } from 'vitest'
import type { JobLoad, ReturnLoad } from '@brine/protocol'
import { decode, encode, silentLogger } from '@brine/core'
import { abortReason } from '../src/errors.js'
import { approximateSize, JobRunner, KEPT_RETURN_BYTES, KEPT_RETURNS_TOTAL_BYTES, mutableCopy } from '../src/job-runner.js'
import type { MinionEvent, ReturnRoute } from '@brine/link'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { ModuleDefinition } from '../src/modules/types.js'
import { Changes } from './changes.js'
import { makeFixture } from './modules-fixture.js'

/** The masters' clock in these tests (ms since the epoch): jobs are issued at it and valid for a minute. */
const NOW = 1_800_000_000_000

const deepFreeze = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value)) {
    Object.freeze(value)
    for (const item of Object.values(value)) deepFreeze(item)
  }
  return value
}

describe('mutableCopy', () => {
  it('copies lists, maps and byte arrays of a frozen load; the original stays as it was', () => {
    const load = deepFreeze(
      decode(encode({ arg: [[1, 2], { a: { b: [3] } }, new Uint8Array([7, 8])], kwarg: { n: null, s: 'x' } })) as {
        arg: [number[], { a: { b: number[] } }, Uint8Array]
        kwarg: Record<string, unknown>
      },
    )
    const copy = mutableCopy(load)
    expect(copy).toEqual(load)
    copy.arg[0].push(9)
    copy.arg[1].a.b.push(4)
    copy.arg[2][0] = 0
    copy.kwarg.added = true
    expect(load.arg[0]).toEqual([1, 2])
    expect(load.arg[1].a.b).toEqual([3])
    expect([...load.arg[2]]).toEqual([7, 8])
    expect(load.kwarg).toEqual({ n: null, s: 'x' })
  })

  it('keeps a decoded `__proto__` key as data, never as the prototype', () => {
    const load = deepFreeze(JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as Record<string, unknown>)
    const copy = mutableCopy(load)
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype)
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined()
    expect(Object.keys(copy)).toEqual(['__proto__', 'x'])
  })

  it('copies the rarer values a decoder may produce', () => {
    const date = new Date(1_700_000_000_000)
    const copy = mutableCopy({ when: date, floats: new Float64Array([1.5]) })
    expect(copy.when).not.toBe(date)
    expect(copy.when.getTime()).toBe(date.getTime())
    expect([...copy.floats]).toEqual([1.5])
  })
})

describe('JobRunner: one jid from several masters', () => {
  /** A route that records what it was handed; its master's clock is what the test sets. */
  class Route implements ReturnRoute {
    readonly delivered: ReturnLoad[] = []
    readonly #changes = new Changes()
    now = NOW
    constructor(readonly master: string) {}
    masterNow(): number {
      return this.now
    }
    async deliver(load: ReturnLoad): Promise<void> {
      this.delivered.push(load)
      this.#changes.notify()
    }
    returned(jid: string): Promise<ReturnLoad> {
      return this.#changes.until(() => this.delivered.find((load) => load.jid === jid), `a return of ${jid} at ${this.master}`, 5000)
    }
  }

  function setUp(severalMasters = true): { runner: JobRunner; events: MinionEvent[]; runs: string[]; release: () => void; controller: AbortController } {
    const events: MinionEvent[] = []
    const runs: string[] = []
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const modules: Record<string, ModuleDefinition> = {
      gate: {
        wait: {
          doc: 'Waits until the test opens the gate, then echoes its argument.',
          args: ['text'],
          run: async ([text], _kwargs, ctx) => {
            runs.push(ctx.jid)
            await Promise.race([
              gate,
              new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(abortReason(ctx.signal, ctx.jid)), { once: true })),
            ])
            return text
          },
        },
        big: {
          doc: 'Returns a string larger than a kept return.',
          args: [],
          run: async (_args, _kwargs, ctx) => (runs.push(ctx.jid), 'x'.repeat(KEPT_RETURN_BYTES + 1)),
        },
        kept: {
          doc: 'Returns a string as large as a kept return may be.',
          args: [],
          run: async (_args, _kwargs, ctx) => (runs.push(ctx.jid), 'k'.repeat(KEPT_RETURN_BYTES - 16)),
        },
      },
    }
    const controller = new AbortController()
    const jobs = new RunningJobs()
    const registry = createModuleRegistry({ id: 'm1', grains: {}, opts: {}, logger: silentLogger, jobs, signal: controller.signal }, modules)
    const runner = new JobRunner({
      id: 'm1',
      grains: {},
      nodegroups: {},
      registry,
      logger: silentLogger,
      emit: (event) => events.push(event),
      signal: controller.signal,
      severalMasters,
    })
    return { runner, events, runs, release: () => open(), controller }
  }

  const load = (jid: string, fun: string, arg: unknown[] = [], extra: Partial<JobLoad> = {}): JobLoad => ({
    jid,
    fun,
    arg,
    tgt: '*',
    tgt_type: 'glob',
    ret: '',
    user: 'root',
    issued: NOW,
    expire: NOW + 60_000,
    ...extra,
  })

  it('runs once; a master publishing it while it runs gets the return too, each with its own master_id', async () => {
    const { runner, events, runs, release } = setUp()
    const [one, two] = [new Route('a:4506'), new Route('b:4506')]
    await runner.handle({ job: load('20240101000000000001', 'gate.wait', ['hi'], { master_id: 'top' }), link: one })
    await runner.handle({ job: load('20240101000000000001', 'gate.wait', ['hi']), link: two })
    expect([runner.runningFor('a:4506'), runner.runningFor('b:4506'), runner.runningFor('c:4506')]).toEqual([1, 1, 0])
    release()
    const [first, second] = await Promise.all([one.returned('20240101000000000001'), two.returned('20240101000000000001')])
    expect(first).toMatchObject({ id: 'm1', return: 'hi', retcode: 0, master_id: 'top' })
    expect(second).toMatchObject({ id: 'm1', return: 'hi', retcode: 0 })
    expect(second).not.toHaveProperty('master_id')
    expect(runs).toEqual(['20240101000000000001'])
    expect(events.filter((event) => event.type === 'job-joined')).toEqual([
      { type: 'job-joined', master: 'b:4506', jid: '20240101000000000001', fun: 'gate.wait', returned: false },
    ])
    await runner.drain()
    expect(runner.runningFor('a:4506')).toBe(0)
  })

  it("echoes the job's metadata in its return, as Salt's minion does", async () => {
    const { runner, release } = setUp()
    const link = new Route('a:4506')
    await runner.handle({ job: load('20240101000000000002', 'gate.wait', ['hi'], { metadata: { ticket: 8 } }), link })
    await runner.handle({ job: load('20240101000000000003', 'gate.wait', ['ho']), link })
    release()
    expect(await link.returned('20240101000000000002')).toMatchObject({ return: 'hi', metadata: { ticket: 8 } })
    expect(await link.returned('20240101000000000003')).not.toHaveProperty('metadata')
    await runner.drain()
  })

  it('answers a master publishing it after it returned from the kept return, but only once per master', async () => {
    const { runner, events, runs, release } = setUp()
    release()
    const [one, two] = [new Route('a:4506'), new Route('b:4506')]
    await runner.handle({ job: load('20240101000000000002', 'gate.wait', ['later']), link: one })
    await one.returned('20240101000000000002')
    await runner.handle({ job: load('20240101000000000002', 'gate.wait', ['later']), link: two })
    expect((await two.returned('20240101000000000002')).return).toBe('later')
    await runner.handle({ job: load('20240101000000000002', 'gate.wait', ['later']), link: two })
    await runner.drain()
    expect([one.delivered.length, two.delivered.length, runs.length]).toEqual([1, 1, 1])
    expect(events.filter((event) => event.type === 'publish-ignored').map((event) => (event as { reason: string }).reason)).toEqual(['duplicate jid'])
  })

  it('ignores the jid of another job, a large return no longer kept, and a killed job', async () => {
    const { runner, events, runs, controller } = setUp()
    const [one, two] = [new Route('a:4506'), new Route('b:4506')]
    await runner.handle({ job: load('20240101000000000003', 'gate.big'), link: one })
    await one.returned('20240101000000000003')
    await runner.handle({ job: load('20240101000000000003', 'gate.big'), link: two })
    await runner.handle({ job: load('20240101000000000004', 'gate.wait', ['x']), link: one })
    await runner.handle({ job: load('20240101000000000004', 'gate.wait', ['y']), link: two })
    controller.abort(new Error('minion stopping'))
    await runner.drain()
    await runner.handle({ job: load('20240101000000000004', 'gate.wait', ['x']), link: two })
    expect(two.delivered).toEqual([])
    expect(one.delivered.map((ret) => ret.jid)).toEqual(['20240101000000000003'])
    expect(runs).toEqual(['20240101000000000003', '20240101000000000004'])
    expect(events.filter((event) => event.type === 'publish-ignored').map((event) => (event as { reason: string }).reason)).toEqual([
      'duplicate jid; the return was not kept',
      'jid of another job',
      'duplicate jid of a killed job',
    ])
  })

  const stamped = (jid: string, fun: string, issued: number, arg: unknown[] = []): JobLoad => load(jid, fun, arg, { issued, expire: issued + 60_000 })
  const reasons = (events: MinionEvent[], jid: string): string[] =>
    events.filter((event) => event.type === 'publish-ignored' && event.jid === jid).map((event) => (event as { reason: string }).reason)

  it("judges each copy in its own master's clock: beyond 100 jobs the jid is still joined, and forgotten once every copy expired", async () => {
    const { runner, events, runs, release } = setUp()
    release()
    // Master b's clock runs an hour ahead of a's: each copy's expiry is in its own master's time.
    const [a, b] = [new Route('a:4506'), new Route('b:4506')]
    b.now = NOW + 3_600_000
    const first = '20240101000000000100'
    await runner.handle({ job: stamped(first, 'gate.wait', a.now, ['first']), link: a })
    for (let index = 1; index <= 150; index++)
      await runner.handle({ job: stamped(`20240101000000001${String(index).padStart(3, '0')}`, 'test.ping', a.now), link: a })
    await runner.drain()
    expect(runner.remembered).toBe(151)
    // Published by b after 150 other jobs: joined (answered from the kept return), not run again.
    await runner.handle({ job: stamped(first, 'gate.wait', b.now, ['first']), link: b })
    expect((await b.returned(first)).return).toBe('first')
    expect(events.filter((event) => event.type === 'job-joined').map((event) => [event.master, event.jid])).toEqual([['b:4506', first]])

    // a's clock passes its copies' expiry; b's copy of the first jid is still valid in b's clock.
    a.now += 61_000
    await runner.handle({ job: stamped('20240101000000002000', 'test.ping', a.now), link: a })
    expect(runner.remembered).toBe(2)
    // A copy replayed through a (its link would have refused it; here it arrives anyway) is still known.
    await runner.handle({ job: stamped(first, 'gate.wait', a.now - 61_000, ['first']), link: a })
    expect(reasons(events, first)).toEqual(['duplicate jid'])
    // Once b's clock passes its copy too (and no job of them still runs), nothing old is remembered.
    await runner.drain()
    b.now += 61_000
    a.now += 61_000
    await runner.handle({ job: stamped('20240101000000003000', 'test.ping', a.now), link: a })
    expect(runner.remembered).toBe(1)
    await runner.drain()
    expect(runs.filter((jid) => jid === first)).toHaveLength(1)
    expect(a.delivered.filter((ret) => ret.jid === first)).toHaveLength(1)
    expect(b.delivered.map((ret) => ret.jid)).toEqual([first])
  })

  it('remembers a job that still runs after its publishes expired: a master publishing it then joins it', async () => {
    const { runner, events, runs, release } = setUp()
    const [a, b] = [new Route('a:4506'), new Route('b:4506')]
    const jid = '20240101000000000200'
    await runner.handle({ job: stamped(jid, 'gate.wait', NOW, ['slow']), link: a })
    a.now += 120_000
    b.now += 120_000
    expect(runner.runningFor('a:4506')).toBe(1)
    // a's copy has expired in a's clock, but the job runs: b's publish joins it instead of running it again.
    await runner.handle({ job: stamped(jid, 'gate.wait', b.now, ['slow']), link: b })
    expect(runner.runningFor('b:4506')).toBe(1)
    release()
    await runner.drain()
    expect(runs.filter((ran) => ran === jid)).toHaveLength(1)
    expect([a.delivered.filter((ret) => ret.jid === jid).length, b.delivered.filter((ret) => ret.jid === jid).length]).toEqual([1, 1])
    expect(events.filter((event) => event.type === 'job-joined').map((event) => event.master)).toEqual(['b:4506'])
  })

  it(`keeps at most ${KEPT_RETURNS_TOTAL_BYTES} bytes of returns: past it the oldest is let go, its jid still remembered`, async () => {
    const { runner, events, runs } = setUp()
    const [a, b] = [new Route('a:4506'), new Route('b:4506')]
    const jids = Array.from({ length: 120 }, (_, index) => `20240101000000000${String(300 + index)}`)
    for (const jid of jids) await runner.handle({ job: stamped(jid, 'gate.kept', NOW), link: a })
    await runner.drain()
    expect(runner.keptBytes).toBeGreaterThan(0)
    expect(runner.keptBytes).toBeLessThanOrEqual(KEPT_RETURNS_TOTAL_BYTES)
    // The newest return is still kept for b; the oldest is not, yet its jid does not run again.
    await runner.handle({ job: stamped(jids[119]!, 'gate.kept', NOW), link: b })
    await runner.handle({ job: stamped(jids[0]!, 'gate.kept', NOW), link: b })
    await runner.drain()
    expect(b.delivered.map((ret) => ret.jid)).toEqual([jids[119]])
    expect(reasons(events, jids[0]!)).toEqual(['duplicate jid; the return was not kept'])
    expect(runs).toEqual(jids)
    // Forgetting the jobs lets their kept returns go.
    a.now += 61_000
    b.now += 61_000
    await runner.handle({ job: stamped('20240101000000000999', 'test.ping', a.now), link: a })
    await runner.drain()
    // Only the newest job's return (true) is kept now.
    expect([runner.remembered, runner.keptBytes]).toEqual([1, approximateSize(true, KEPT_RETURN_BYTES)])
  })
})

describe('JobRunner: one master', () => {
  it('remembers only jids: a repeat runs nothing and gets nothing, whoever sends it', async () => {
    const events: MinionEvent[] = []
    const registry = createModuleRegistry({ id: 'm1', grains: {}, opts: {}, logger: silentLogger, jobs: new RunningJobs() })
    const runner = new JobRunner({
      id: 'm1',
      grains: {},
      nodegroups: {},
      registry,
      logger: silentLogger,
      emit: (event) => events.push(event),
      signal: new AbortController().signal,
    })
    const delivered: string[] = []
    const route = (master: string): ReturnRoute => ({
      master,
      masterNow: () => NOW,
      deliver: async (ret) => void delivered.push(`${master} ${String(ret.return)}`),
    })
    const load: JobLoad = {
      jid: '20240101000000000009',
      fun: 'test.echo',
      arg: ['one'],
      tgt: '*',
      tgt_type: 'glob',
      ret: '',
      user: 'root',
      issued: NOW,
      expire: NOW + 60_000,
    }
    await runner.handle({ job: load, link: route('a:4506') })
    await runner.drain()
    await runner.handle({ job: load, link: route('b:4506') })
    await runner.drain()
    expect(delivered).toEqual(['a:4506 one'])
    expect(events.map((event) => event.type)).toEqual(['job-received', 'publish-ignored'])
    expect(events[1]).toMatchObject({ master: 'b:4506', reason: 'duplicate jid' })
  })
})

describe('approximateSize', () => {
  it('counts strings, bytes and nesting, and stops once past the limit', () => {
    expect(approximateSize({ a: 'xyz', b: [1, true, null] }, 1000)).toBeLessThan(100)
    expect(approximateSize(new Uint8Array(5000), 1000)).toBeGreaterThan(1000)
    expect(
      approximateSize(
        Array.from({ length: 1_000_000 }, () => 'x'),
        1000,
      ),
    ).toBeLessThan(2000)
  })
})

describe('JobRunner jid memory', () => {
  /** A link whose master's clock the test sets; it collects what is delivered to it. */
  function route(name: string): ReturnRoute & { now: number; delivered: ReturnLoad[] } {
    const link = {
      master: name,
      now: 1_800_000_000_000,
      delivered: [] as ReturnLoad[],
      masterNow: () => link.now,
      deliver: async (load: ReturnLoad) => void link.delivered.push(load),
    }
    return link
  }

  function runner(): { runner: JobRunner; events: MinionEvent[] } {
    const { registry, grains } = makeFixture()
    const events: MinionEvent[] = []
    const created = new JobRunner({
      id: 'minion-1',
      grains,
      nodegroups: {},
      registry,
      logger: silentLogger,
      emit: (event) => events.push(event),
      signal: new AbortController().signal,
    })
    return { runner: created, events }
  }

  const job = (jid: string, issued: number, ttl = 60_000): JobLoad => ({
    jid,
    fun: 'test.ping',
    arg: [],
    tgt: '*',
    tgt_type: 'glob',
    ret: '',
    user: 'root',
    issued,
    expire: issued + ttl,
  })

  it('runs a jid once for as long as a publish of it can be valid, from one master or two, then forgets it', async () => {
    const { runner: jobs, events } = runner()
    const one = route('one:4506')
    const two = route('two:4506')
    const jids = Array.from({ length: 150 }, (_, index) => `20261123120000${String(index).padStart(6, '0')}`)
    for (const jid of jids) await jobs.handle({ job: job(jid, one.now), link: one })
    await jobs.drain()
    // More than Salt's 100, all remembered: the first is still refused from either master.
    expect(jobs.remembered).toBe(150)
    await jobs.handle({ job: job(jids[0]!, one.now), link: one })
    await jobs.handle({ job: job(jids[0]!, two.now), link: two })
    expect(events.filter((event) => event.type === 'publish-ignored' && event.jid === jids[0]).map((event) => (event as { reason: string }).reason)).toEqual([
      'duplicate jid',
      'duplicate jid',
    ])

    // Master one's clock passes the expiry: its copies are forgotten, but master two's later copy holds the first jid.
    one.now += 61_000
    two.now += 30_000
    await jobs.handle({ job: job('20261123120100000000', one.now), link: one })
    expect(jobs.remembered).toBe(2)
    await jobs.handle({ job: job(jids[0]!, two.now - 30_000), link: two })
    expect(events.filter((event) => event.type === 'job-received' && event.jid === jids[0])).toHaveLength(1)
    // Once every copy has expired in its master's clock (and no job of them still runs), nothing old is remembered.
    await jobs.drain()
    two.now += 61_000
    one.now += 61_000
    await jobs.handle({ job: job('20261123120200000000', one.now), link: one })
    expect(jobs.remembered).toBe(1)
    await jobs.drain()
    expect(one.delivered.map((ret) => ret.jid)).toEqual([...jids, '20261123120100000000', '20261123120200000000'])
    expect(two.delivered).toEqual([])
  })
})
