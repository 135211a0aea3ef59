/** The copy each job gets of its frozen, shared load; the runner's memory of the jids it ran. */
import { describe, expect, it } from 'vitest'
import type { JobLoad, ReturnLoad } from '@brine/common'
import { decode, encode, silentLogger } from '@brine/transport'
import { JobRunner, mutableCopy } from '../src/job-runner.js'
import type { MinionEvent } from '../src/lifecycle.js'
import type { ReturnRoute } from '../src/master-link.js'
import { makeFixture } from './modules-fixture.js'

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
    const created = new JobRunner({ id: 'minion-1', grains, nodegroups: {}, registry, logger: silentLogger, emit: (event) => events.push(event), signal: new AbortController().signal })
    return { runner: created, events }
  }

  const job = (jid: string, issued: number, ttl = 60_000): JobLoad => ({ jid, fun: 'test.ping', arg: [], tgt: '*', tgt_type: 'glob', ret: '', user: 'root', issued, expire: issued + ttl })

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
    expect(events.filter((event) => event.type === 'publish-ignored' && event.jid === jids[0]).map((event) => (event as { reason: string }).reason)).toEqual(['duplicate jid', 'duplicate jid'])

    // Master one's clock passes the expiry: its copies are forgotten, but master two's later copy holds the first jid.
    one.now += 61_000
    two.now += 30_000
    await jobs.handle({ job: job('20261123120100000000', one.now), link: one })
    expect(jobs.remembered).toBe(2)
    await jobs.handle({ job: job(jids[0]!, two.now - 30_000), link: two })
    expect(events.filter((event) => event.type === 'job-received' && event.jid === jids[0])).toHaveLength(1)
    // Once every copy has expired in its master's clock, nothing old is remembered.
    two.now += 61_000
    one.now += 61_000
    await jobs.handle({ job: job('20261123120200000000', one.now), link: one })
    expect(jobs.remembered).toBe(1)
    await jobs.drain()
    expect(one.delivered.map((ret) => ret.jid)).toEqual([...jids, '20261123120100000000', '20261123120200000000'])
    expect(two.delivered).toEqual([])
  })
})
