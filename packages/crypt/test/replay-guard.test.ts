import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { DUPLICATE, ReplayGuard, StaleRequestError } from '../src/index.js'

const nonce = (): Uint8Array => new Uint8Array(randomBytes(24))

/** An apply that waits for `release()` (each call after it runs at once) and counts the applies that ran. */
function heldApply(): { apply: () => Promise<void>; release: () => void; applied: number } {
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  const held = {
    apply: async () => {
      await gate
      held.applied++
    },
    release: () => release(),
    applied: 0,
  }
  return held
}

function guard(options: Partial<ConstructorParameters<typeof ReplayGuard>[0]> = {}): { guard: ReplayGuard; clock: { now: number } } {
  const clock = { now: 1_700_000_000_000 }
  return { guard: new ReplayGuard({ windowMs: 300_000, perMinion: 100, total: 1000, now: () => clock.now, ...options }), clock }
}

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => new Error('expected a rejection'),
    (error: unknown) => error,
  )

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
    expect((late as Error).message).toMatch(
      /^sealed request from minion "web1" sealed at .* is -300001 ms from the master's clock .*, outside the window of ±300000 ms \(request_window\); re-seal it/,
    )
    const future = await rejection(g.run('web1', nonce(), clock.now + 300_001, apply))
    expect(future).toMatchObject({ name: 'StaleRequestError', reason: 'window' })
    expect(await rejection(g.run('web1', nonce(), Number.NaN, apply))).toBeInstanceOf(StaleRequestError)
    expect(applied).toBe(1)
    // What the window refuses anyway is forgotten: the memory is empty again.
    expect(g.stats()).toMatchObject({ entries: 0, minions: 0, stale: 3 })
  })

  it('after a restart (startedAt) refuses what was sealed before it, inside the window: the memory of it is gone', async () => {
    // The first run applies a request; a restarted master has a new, empty guard.
    const { guard: before, clock } = guard()
    const n = nonce()
    const sealedAt = clock.now
    let applied = 0
    const apply = async (): Promise<void> => void applied++
    expect(await before.run('web1', n, sealedAt, apply)).toBe('applied')
    clock.now += 2000
    const { guard: restarted } = guard({ now: () => clock.now, startedAt: clock.now - 1000 })
    const replayed = await rejection(restarted.run('web1', Uint8Array.from(n), sealedAt, apply))
    expect(replayed).toBeInstanceOf(StaleRequestError)
    expect(replayed).toMatchObject({ id: 'web1', reason: 'start' })
    expect((replayed as Error).message).toMatch(/is no newer than the master's start \(.*\), before which it remembers no request; re-seal it/)
    // The minion's re-seal carries the time now: applied once, as ever.
    expect(await restarted.run('web1', n, clock.now, apply)).toBe('applied')
    expect(applied).toBe(2)
    expect(restarted.stats()).toMatchObject({ stale: 1, applied: 1 })
  })

  it('a duplicate arriving while the first is applied waits for it; a failed apply is forgotten so a retry applies', async () => {
    const { guard: g, clock } = guard()
    const n = nonce()
    const held = heldApply()
    const first = g.run('web1', n, clock.now, held.apply)
    const second = g.run('web1', n, clock.now, held.apply)
    held.release()
    expect(await Promise.all([first, second])).toEqual(['applied', 'duplicate'])
    expect(held.applied).toBe(1)

    const m = nonce()
    const failure = new Error('disk full')
    expect(await rejection(g.run('web1', m, clock.now, async () => Promise.reject(failure)))).toBe(failure)
    expect(await g.run('web1', m, clock.now, held.apply)).toBe('applied')
    expect(held.applied).toBe(2)
  })

  it('seen() knows a request given to run() before it is opened: it waits for the first, and knows nothing new, failed or expired', async () => {
    const { guard: g, clock } = guard()
    const n = nonce()
    expect(g.seen('web1', n)).toBeUndefined()
    const held = heldApply()
    const first = g.run('web1', n, clock.now, held.apply)
    // A copy while the first is applied: its answer waits for the first, which it never applies again.
    let settled = false
    const copy = g.seen('web1', Uint8Array.from(n))!.then((verdict) => ((settled = true), verdict))
    await Promise.resolve()
    expect(settled).toBe(false)
    held.release()
    expect(await Promise.all([first, copy])).toEqual(['applied', 'duplicate'])
    expect(await g.seen('web1', n)).toBe('duplicate')
    expect(held.applied).toBe(1)
    // Another minion, another nonce, a nonce of the wrong length: not seen.
    expect(g.seen('web2', n)).toBeUndefined()
    expect(g.seen('web1', nonce())).toBeUndefined()
    expect(g.seen('web1', n.subarray(0, 16))).toBeUndefined()
    expect(g.stats()).toMatchObject({ entries: 1, applied: 1, duplicates: 2 })

    // A copy of a request whose apply fails fails as it did; the request is forgotten, so its retry is applied.
    const m = nonce()
    let fail!: (error: Error) => void
    const failing = g.run('web1', m, clock.now, () => new Promise<void>((_resolve, reject) => (fail = reject)))
    const failedCopy = g.seen('web1', m)!
    const failure = new Error('disk full')
    fail(failure)
    expect(await rejection(failing)).toBe(failure)
    expect(await rejection(failedCopy)).toBe(failure)
    expect(g.seen('web1', m)).toBeUndefined()

    // Past the window the memory of it is gone: a copy goes through run(), which refuses it as stale.
    clock.now += 300_001
    expect(g.seen('web1', n)).toBeUndefined()
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
    // A minion forgotten whole (by the total bound) is itself forgotten once its floor has left the window.
    expect(g.stats().minions).toBeGreaterThan(25)
    clock.now += 300_000 + 200
    expect(await g.run('later', nonce(), clock.now, apply)).toBe('applied')
    expect(g.stats()).toMatchObject({ entries: 1, minions: 1 })
  })

  it('admit() resolves with what the first apply resolved to and DUPLICATE for its copies, which wait for it', async () => {
    const { guard: g, clock } = guard()
    const n = nonce()
    let release!: (value: { refused: string[] }) => void
    const result = new Promise<{ refused: string[] }>((resolve) => (release = resolve))
    let applied = 0
    const apply = (): Promise<{ refused: string[] }> => (applied++, result)
    const first = g.admit('web1', n, clock.now, apply)
    let copySettled = false
    const copy = g.admit('web1', Uint8Array.from(n), clock.now, apply).then((outcome) => ((copySettled = true), outcome))
    await new Promise((resolve) => setImmediate(resolve))
    expect(copySettled).toBe(false)
    release({ refused: ['db1'] })
    expect(await first).toEqual({ refused: ['db1'] })
    expect(await copy).toBe(DUPLICATE)
    expect(await g.admit('web1', n, clock.now, apply)).toBe(DUPLICATE)
    expect(applied).toBe(1)
    // An apply that throws before it returns a promise is a rejection, and is forgotten as a failed one.
    const m = nonce()
    const thrown = new Error('malformed')
    expect(
      await rejection(
        g.admit('web1', m, clock.now, () => {
          throw thrown
        }),
      ),
    ).toBe(thrown)
    expect(await g.admit('web1', m, clock.now, async () => 'stored')).toBe('stored')
    expect(g.stats()).toMatchObject({ applied: 2, duplicates: 2 })
  })

  it('a copy of a request still being applied waits for it after the memory grew and moved its slots', async () => {
    const { guard: g, clock } = guard({ perMinion: 5000, total: 6000 })
    const n = nonce()
    const held = heldApply()
    const first = g.run('web1', n, clock.now, held.apply)
    // 3,000 more requests: the ring grows from 1,024 slots to 4,096, each growth moving every slot.
    for (let i = 0; i < 3000; i++) expect(await g.run(`m${i % 40}`, nonce(), clock.now, async () => undefined)).toBe('applied')
    let copySettled = false
    const copy = g.run('web1', Uint8Array.from(n), clock.now, held.apply).then((verdict) => ((copySettled = true), verdict))
    const seenCopy = g.seen('web1', Uint8Array.from(n))!
    await new Promise((resolve) => setImmediate(resolve))
    expect(copySettled).toBe(false)
    held.release()
    expect(await Promise.all([first, copy, seenCopy])).toEqual(['applied', 'duplicate', 'duplicate'])
    expect(held.applied).toBe(1)
  })

  it('grows past its first thousand slots and keeps every request it remembers: each replay is a duplicate', async () => {
    const { guard: g, clock } = guard({ perMinion: 5000, total: 6000 })
    const applied = new Map<string, number>()
    const sent: Array<{ id: string; nonce: Uint8Array }> = []
    for (let i = 0; i < 4500; i++) {
      const request = { id: `m${i % 40}`, nonce: nonce() }
      const key = `${request.id}/${Buffer.from(request.nonce).toString('hex')}`
      const count = async (): Promise<void> => void applied.set(key, (applied.get(key) ?? 0) + 1)
      if (i % 7 === 3) {
        // A failed apply is forgotten (its slot waits for the ring to pass it): the retry of the same bytes applies.
        expect(await rejection(g.run(request.id, request.nonce, clock.now, async () => Promise.reject(new Error('busy'))))).toMatchObject({ message: 'busy' })
      }
      expect(await g.run(request.id, request.nonce, clock.now, count)).toBe('applied')
      sent.push(request)
    }
    for (const request of [...sent].reverse())
      expect(await g.run(request.id, request.nonce, clock.now, async () => void applied.set('again', 1))).toBe('duplicate')
    expect(applied.has('again')).toBe(false)
    expect([...applied.values()].every((times) => times === 1)).toBe(true)
    expect(g.stats()).toMatchObject({ entries: 4500, minions: 40, evicted: 0, duplicates: 4500 })
  })

  it('keeps every request it remembers when it grows after its oldest slots expired and new ones wrapped around', async () => {
    const { guard: g, clock } = guard({ windowMs: 1000, perMinion: 210, total: 10_000 })
    const apply = async (): Promise<void> => {}
    const sent: Array<{ id: string; nonce: Uint8Array; at: number }> = []
    const send = async (): Promise<void> => {
      const request = { id: `m${sent.length % 10}`, nonce: nonce(), at: clock.now }
      sent.push(request)
      expect(await g.run(request.id, request.nonce, request.at, apply)).toBe('applied')
    }
    for (let i = 0; i < 900; i++) {
      clock.now += 1
      await send()
    }
    clock.now += 500 // the first 399 fall out of the window: the ring's oldest slot moves on
    for (let i = 0; i < 1500; i++) await send()
    expect(g.stats()).toMatchObject({ entries: 2001, evicted: 0 })
    const outcomes = await Promise.all(
      sent.map(async (request) => g.run(request.id, request.nonce, request.at, apply).catch((error: unknown) => (error as StaleRequestError).reason)),
    )
    expect(outcomes.slice(0, 399).every((outcome) => outcome === 'window')).toBe(true)
    expect(outcomes.slice(399).every((outcome) => outcome === 'duplicate')).toBe(true)
    // Each minion's requests stayed chained in arrival order through the move: its bound forgets its oldest first.
    const m0 = sent.filter((request, index) => request.id === 'm0' && index >= 399)
    for (let i = 0; i < 30; i++) {
      const request = { id: 'm0', nonce: nonce(), at: clock.now }
      expect(await g.run(request.id, request.nonce, request.at, apply)).toBe('applied')
      m0.push(request)
    }
    const forgotten = m0.length - 210
    expect(g.stats().evicted).toBe(forgotten)
    const replays = await Promise.all(
      m0.map(async (request) => g.run(request.id, request.nonce, request.at, apply).catch((error: unknown) => (error as StaleRequestError).reason)),
    )
    expect(replays.slice(0, forgotten).every((outcome) => outcome === 'floor')).toBe(true)
    expect(replays.slice(forgotten).every((outcome) => outcome === 'duplicate')).toBe(true)
  })

  it('under churn past both bounds and the window applies nothing twice and every fresh request once', async () => {
    let seed = 7
    const random = (below: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      return seed % below
    }
    const { guard: g, clock } = guard({ windowMs: 5000, perMinion: 30, total: 2000 })
    const applied = new Map<string, number>()
    const sent: Array<{ id: string; nonce: Uint8Array; at: number; key: string }> = []
    const keys = new Set<string>()
    const verdicts = { applied: 0, duplicate: 0, floor: 0, window: 0 }
    for (let step = 0; step < 20_000; step++) {
      clock.now += 1
      const roll = random(10)
      const fresh = roll < 7 || sent.length === 0
      // A fresh request sometimes reuses another minion's nonce: the pair, not the nonce, names a request.
      const borrowed = fresh && roll === 5 && sent.length > 0 ? sent[random(sent.length)]! : undefined
      const id = `m${random(50)}`
      const reuse = borrowed !== undefined && !keys.has(`${id}/${borrowed.key.split('/')[1]}`)
      const request = fresh ? { id, nonce: reuse ? borrowed.nonce : nonce(), at: clock.now, key: '' } : sent[random(sent.length)]!
      if (fresh) {
        request.key = `${request.id}/${Buffer.from(request.nonce).toString('hex')}`
        keys.add(request.key)
        sent.push(request)
      }
      const failing = fresh && roll === 6
      const outcome = await g
        .run(request.id, request.nonce, request.at, async () => {
          if (failing) throw new Error('busy')
          applied.set(request.key, (applied.get(request.key) ?? 0) + 1)
        })
        .catch((error: unknown) => (error instanceof StaleRequestError ? error.reason : (error as Error).message))
      if (fresh) expect(outcome).toBe(failing ? 'busy' : 'applied')
      if (outcome in verdicts) verdicts[outcome as keyof typeof verdicts]++
      expect(applied.get(request.key) ?? 0).toBeLessThanOrEqual(1)
      expect(g.stats().entries).toBeLessThanOrEqual(2000)
    }
    // Every outcome happened, so every path (growth, both bounds, expiry, failure) was taken.
    expect(Object.values(verdicts).every((times) => times > 0)).toBe(true)
    expect(g.stats().evicted).toBeGreaterThan(0)
    clock.now += 5001
    expect(await g.run('late', nonce(), clock.now, async () => {})).toBe('applied')
    expect(g.stats()).toMatchObject({ entries: 1, minions: 1 })
  })

  it('refuses a nonce that is not a box nonce', async () => {
    const { guard: g, clock } = guard()
    expect(await rejection(g.run('web1', new Uint8Array(16), clock.now, async () => {}))).toMatchObject({
      name: 'RangeError',
      message: 'ReplayGuard nonce must be 24 bytes, got 16',
    })
  })

  it('refuses nonsensical bounds', () => {
    expect(() => new ReplayGuard({ windowMs: 0, perMinion: 1, total: 1 })).toThrow(RangeError)
    expect(() => new ReplayGuard({ windowMs: 1, perMinion: 0, total: 1 })).toThrow(/perMinion must be a positive number/)
  })
})
