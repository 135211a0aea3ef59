import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { ReplayGuard, StaleRequestError } from '../src/index.js'

const nonce = (): Uint8Array => new Uint8Array(randomBytes(24))

function guard(options: Partial<ConstructorParameters<typeof ReplayGuard>[0]> = {}): { guard: ReplayGuard; clock: { now: number } } {
  const clock = { now: 1_700_000_000_000 }
  return { guard: new ReplayGuard({ windowMs: 300_000, perMinion: 100, total: 1000, now: () => clock.now, ...options }), clock }
}

const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => new Error('expected a rejection'), (error: unknown) => error)

describe('ReplayGuard', () => {
  it('applies a request once; the same (minion, nonce) again is a duplicate, another minion or nonce is not', async () => {
    const { guard: g, clock } = guard()
    const n = nonce()
    let applied = 0
    const apply = async (): Promise<void> => void applied++
    expect(await g.run('web1', n, clock.now, apply)).toBe('applied')
    for (let replay = 0; replay < 100; replay++) expect(await g.run('web1', Uint8Array.from(n), clock.now, apply)).toBe('duplicate')
    expect(await g.run('web2', n, clock.now, apply)).toBe('applied')
    expect(await g.run('web1', nonce(), clock.now, apply)).toBe('applied')
    expect(applied).toBe(3)
    expect(g.stats()).toMatchObject({ entries: 3, minions: 2, applied: 3, duplicates: 100, stale: 0 })
  })

  it('refuses a request outside ±windowMs with a StaleRequestError naming the minion, the time and the window', async () => {
    const { guard: g, clock } = guard()
    let applied = 0
    const apply = async (): Promise<void> => void applied++
    const n = nonce()
    expect(await g.run('web1', n, clock.now, apply)).toBe('applied')
    clock.now += 300_001
    const late = await rejection(g.run('web1', n, clock.now - 300_001, apply))
    expect(late).toBeInstanceOf(StaleRequestError)
    expect(late).toMatchObject({ name: 'StaleRequestError', id: 'web1', reason: 'window' })
    expect((late as Error).message).toMatch(/^sealed request from minion "web1" sealed at .* is -300001 ms from the master's clock .*, outside the window of ±300000 ms \(request_window\); re-seal it/)
    const future = await rejection(g.run('web1', nonce(), clock.now + 300_001, apply))
    expect(future).toMatchObject({ name: 'StaleRequestError', reason: 'window' })
    expect(await rejection(g.run('web1', nonce(), Number.NaN, apply))).toBeInstanceOf(StaleRequestError)
    expect(applied).toBe(1)
    // What the window refuses anyway is forgotten: the memory is empty again.
    expect(g.stats()).toMatchObject({ entries: 0, minions: 0, stale: 3 })
  })

  it('a duplicate arriving while the first is applied waits for it; a failed apply is forgotten so a retry applies', async () => {
    const { guard: g, clock } = guard()
    const n = nonce()
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let applied = 0
    const first = g.run('web1', n, clock.now, async () => {
      await gate
      applied++
    })
    const second = g.run('web1', n, clock.now, async () => void applied++)
    release()
    expect(await Promise.all([first, second])).toEqual(['applied', 'duplicate'])
    expect(applied).toBe(1)

    const m = nonce()
    const failure = new Error('disk full')
    expect(await rejection(g.run('web1', m, clock.now, async () => Promise.reject(failure)))).toBe(failure)
    expect(await g.run('web1', m, clock.now, async () => void applied++)).toBe('applied')
    expect(applied).toBe(2)
  })

  it('stays bounded per minion and in total, and what it forgets early can never be replayed', async () => {
    const { guard: g, clock } = guard({ perMinion: 10, total: 25 })
    const apply = async (): Promise<void> => {}
    const sent: Array<{ id: string; nonce: Uint8Array; at: number }> = []
    // One minion floods: its own oldest are forgotten, the others keep theirs.
    for (let i = 0; i < 50; i++) {
      const request = { id: 'noisy', nonce: nonce(), at: clock.now + i }
      sent.push(request)
      expect(await g.run(request.id, request.nonce, request.at, apply)).toBe('applied')
    }
    expect(g.stats()).toMatchObject({ entries: 10, evicted: 40 })
    // Every forgotten request replayed is refused (at or below the minion's floor), never applied again.
    for (const request of sent.slice(0, 40)) {
      expect(await rejection(g.run(request.id, request.nonce, request.at, apply))).toMatchObject({ name: 'StaleRequestError', reason: 'floor' })
    }
    for (const request of sent.slice(40)) expect(await g.run(request.id, request.nonce, request.at, apply)).toBe('duplicate')

    // Many minions: the total bound holds, and replays add nothing.
    for (let m = 0; m < 30; m++) {
      const n = nonce()
      await g.run(`m${m}`, n, clock.now + 100, apply)
      for (let replay = 0; replay < 20; replay++) await g.run(`m${m}`, n, clock.now + 100, apply)
      expect(g.stats().entries).toBeLessThanOrEqual(25)
    }
    expect(await rejection(g.run('m0', nonce(), clock.now + 100, apply))).toMatchObject({ reason: 'floor' })
    expect(await g.run('m0', nonce(), clock.now + 101, apply)).toBe('applied')
  })

  it('refuses nonsensical bounds', () => {
    expect(() => new ReplayGuard({ windowMs: 0, perMinion: 1, total: 1 })).toThrow(RangeError)
    expect(() => new ReplayGuard({ windowMs: 1, perMinion: 0, total: 1 })).toThrow(/perMinion must be a positive number/)
  })
})
