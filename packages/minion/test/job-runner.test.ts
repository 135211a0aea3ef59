/** The copy each job gets of its frozen, shared load; one jid published by several masters. */
import { describe, expect, it } from 'vitest'
import type { JobLoad, ReturnLoad } from '@brine/common'
import { decode, encode, silentLogger } from '@brine/transport'
import { abortReason } from '../src/errors.js'
import { approximateSize, JobRunner, KEPT_RETURN_BYTES, mutableCopy } from '../src/job-runner.js'
import type { MinionEvent } from '../src/lifecycle.js'
import type { ReturnRoute } from '../src/master-link.js'
import { createModuleRegistry } from '../src/modules/registry.js'
import { RunningJobs } from '../src/modules/running-jobs.js'
import type { ModuleDefinition } from '../src/modules/types.js'
import { Changes } from './changes.js'

const deepFreeze = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value)) {
    Object.freeze(value)
    for (const item of Object.values(value)) deepFreeze(item)
  }
  return value
}

describe('mutableCopy', () => {
  it('copies lists, maps and byte arrays of a frozen load; the original stays as it was', () => {
    const load = deepFreeze(decode(encode({ arg: [[1, 2], { a: { b: [3] } }, new Uint8Array([7, 8])], kwarg: { n: null, s: 'x' } })) as {
      arg: [number[], { a: { b: number[] } }, Uint8Array]
      kwarg: Record<string, unknown>
    })
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
  /** A route that records what it was handed. */
  class Route implements ReturnRoute {
    readonly delivered: ReturnLoad[] = []
    readonly #changes = new Changes()
    constructor(readonly master: string) {}
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
            await Promise.race([gate, new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(abortReason(ctx.signal, ctx.jid)), { once: true }))])
            return text
          },
        },
        big: { doc: 'Returns a string larger than a kept return.', args: [], run: async (_args, _kwargs, ctx) => (runs.push(ctx.jid), 'x'.repeat(KEPT_RETURN_BYTES + 1)) },
      },
    }
    const controller = new AbortController()
    const jobs = new RunningJobs()
    const registry = createModuleRegistry({ id: 'm1', grains: {}, opts: {}, logger: silentLogger, jobs, signal: controller.signal }, modules)
    const runner = new JobRunner({ id: 'm1', grains: {}, nodegroups: {}, registry, logger: silentLogger, emit: (event) => events.push(event), signal: controller.signal, severalMasters })
    return { runner, events, runs, release: () => open(), controller }
  }

  const load = (jid: string, fun: string, arg: unknown[] = [], extra: Partial<JobLoad> = {}): JobLoad => ({ jid, fun, arg, tgt: '*', tgt_type: 'glob', ret: '', user: 'root', ...extra })

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
    expect(events.filter((event) => event.type === 'job-joined')).toEqual([{ type: 'job-joined', master: 'b:4506', jid: '20240101000000000001', fun: 'gate.wait', returned: false }])
    await runner.drain()
    expect(runner.runningFor('a:4506')).toBe(0)
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
})

describe('JobRunner: one master', () => {
  it('remembers only jids: a repeat runs nothing and gets nothing, whoever sends it', async () => {
    const events: MinionEvent[] = []
    const registry = createModuleRegistry({ id: 'm1', grains: {}, opts: {}, logger: silentLogger, jobs: new RunningJobs() })
    const runner = new JobRunner({ id: 'm1', grains: {}, nodegroups: {}, registry, logger: silentLogger, emit: (event) => events.push(event), signal: new AbortController().signal })
    const delivered: string[] = []
    const route = (master: string): ReturnRoute => ({ master, deliver: async (ret) => void delivered.push(`${master} ${String(ret.return)}`) })
    const load: JobLoad = { jid: '20240101000000000009', fun: 'test.echo', arg: ['one'], tgt: '*', tgt_type: 'glob', ret: '', user: 'root' }
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
    expect(approximateSize(Array.from({ length: 1_000_000 }, () => 'x'), 1000)).toBeLessThan(2000)
  })
})
