import { describe, expect, it } from 'vitest'
import type { RequestContext } from '@brine/transport'
import type { WireValue } from '@brine/core'
import { RequestGate } from '../src/request-gate.js'

const context = (peer: string): RequestContext => ({ peer, transport: 'tcp' }) as RequestContext

describe('RequestGate', () => {
  it('holds what arrives before the master is ready and hands it, in order, to the handler it opens with; later requests go straight through', async () => {
    const gate = new RequestGate()
    const seen: string[] = []
    let settled = 0
    const early = ['a', 'b', 'c'].map((name) =>
      gate.handle({ name }, context(name)).then((reply) => {
        settled++
        return reply
      }),
    )
    await Promise.resolve()
    expect(settled).toBe(0)
    expect(gate.held).toBe(3)
    gate.open(async (request, ctx) => {
      seen.push(`${String((request as { name: string }).name)}@${ctx.peer}`)
      return { ok: true, to: (request as { name: string }).name } as WireValue
    })
    expect(await Promise.all(early)).toEqual([
      { ok: true, to: 'a' },
      { ok: true, to: 'b' },
      { ok: true, to: 'c' },
    ])
    expect(seen).toEqual(['a@a', 'b@b', 'c@c'])
    expect(await gate.handle({ name: 'd' }, context('d'))).toEqual({ ok: true, to: 'd' })
    expect(gate.held).toBe(3)
  })

  it('fails what it holds, and what comes after, with the reason the master will not be ready; opening it then changes nothing', async () => {
    const gate = new RequestGate()
    const held = gate.handle({ cmd: '_minion_event' }, context('m1'))
    const reason = new Error('master stopped before it was ready')
    gate.fail(reason)
    await expect(held).rejects.toBe(reason)
    await expect(gate.handle({ cmd: '_return' }, context('m2'))).rejects.toBe(reason)
    let called = false
    gate.open(async () => {
      called = true
      return {}
    })
    await expect(gate.handle({ cmd: '_return' }, context('m3'))).rejects.toBe(reason)
    expect(called).toBe(false)
  })

  it('once open, a later failure (the master stopping) does not touch the handler in use', async () => {
    const gate = new RequestGate()
    gate.open(async () => ({ ok: true }))
    gate.fail(new Error('stopped'))
    expect(await gate.handle({}, context('m1'))).toEqual({ ok: true })
  })
})
