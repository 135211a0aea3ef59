/**
 * The policies' decisions, with links that are only state and a clock the test drives: which
 * master is used at start, when a dead one is left and for which, when the first is returned to,
 * when a link left behind is closed. Nothing here waits on wall-clock time.
 */
import { describe, expect, it } from 'vitest'
import { LifecycleEvents } from '@brine/core'
import {
  type MasterLinkEvent,
  type MinionEvent,
  type MasterLinkStatus,
  AllMastersPolicy,
  FailoverPolicy,
  failoverOrder,
  type FailoverOptions,
  type MasterPolicyContext,
  type PolicyClock,
  type PolicyLink,
} from '@brine/link'

/** How a master answers the first `_auth` of a link opened to it. */
type Behaviour = 'up' | 'down' | 'pending' | 'rejected' | 'silent'

/** A clock that moves only when the test says so; sleepers wake in time order. */
class ManualClock implements PolicyClock {
  #now = 0
  readonly #sleepers = new Set<{ at: number; wake: (elapsed: boolean) => void }>()

  now(): number {
    return this.#now
  }

  sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false)
    return new Promise((resolve) => {
      const sleeper = {
        at: this.#now + ms,
        wake: (elapsed: boolean) => {
          this.#sleepers.delete(sleeper)
          signal.removeEventListener('abort', onAbort)
          resolve(elapsed)
        },
      }
      const onAbort = (): void => sleeper.wake(false)
      signal.addEventListener('abort', onAbort, { once: true })
      this.#sleepers.add(sleeper)
    })
  }

  get sleeping(): number {
    return this.#sleepers.size
  }

  /** Moves time forward by `ms`, waking each sleeper due on the way (in order) and letting what it started run. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms
    for (;;) {
      await settle()
      const due = [...this.#sleepers].filter((sleeper) => sleeper.at <= target).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      this.#now = due.at
      due.wake(true)
    }
    this.#now = target
    await settle()
  }
}

/** Lets every promise chain that can move, move (bounded by turns of the event loop, not by time). */
async function settle(): Promise<void> {
  for (let turn = 0; turn < 50; turn++) await new Promise((resolve) => setImmediate(resolve))
}

class FakeLink implements PolicyLink {
  readonly master: string
  readonly status: MasterLinkStatus = { connected: false, authenticated: false, closed: false }
  /** Set by a test whose link asks its master, as a broker's link must. */
  alive?: (timeoutMs: number) => Promise<boolean>
  /** Set by a test whose link's publish connection lags its request link (undefined: not known). */
  subscribed?: boolean
  readonly #events = new LifecycleEvents<MasterLinkEvent>(64)

  constructor(
    readonly host: string,
    readonly behaviour: Behaviour,
  ) {
    this.master = `${host}:4506`
  }

  async start(): Promise<void> {
    queueMicrotask(() => {
      const master = this.master
      if (this.behaviour === 'up') this.reconnect()
      else if (this.behaviour === 'down') this.#events.emit({ type: 'auth-failed', master, error: 'TimeoutError', message: 'request timed out', waitMs: 100 })
      else if (this.behaviour === 'pending') this.#events.emit({ type: 'auth-pending', master, message: 'pending', waitMs: 100 })
      else if (this.behaviour === 'rejected') this.#events.emit({ type: 'auth-rejected', master, reason: 'rejected', message: 'rejected', waitMs: 600 })
    })
  }

  async close(): Promise<void> {
    this.status.closed = true
    this.status.connected = false
    this.#events.close()
  }

  events(): AsyncIterable<MasterLinkEvent> {
    return this.#events.events()
  }

  disconnect(): void {
    this.status.connected = false
    this.#events.emit({ type: 'master-disconnect', master: this.master })
  }

  reconnect(): void {
    this.status.connected = true
    this.status.authenticated = true
    this.#events.emit({ type: 'master-connect', master: this.master })
    this.#events.emit({ type: 'authenticated', master: this.master, gen: 1, firstContact: false, masterFinger: 'ff' })
  }
}

interface World {
  /** How each master answers a link opened to it from now on. */
  behaviour: Map<string, Behaviour>
  /** Masters owed returns: their links are kept. */
  owed: Set<string>
  opened: FakeLink[]
  served: FakeLink[]
  events: MinionEvent[]
  context: MasterPolicyContext<FakeLink>
  clock: ManualClock
  /** The last link opened to `host`. */
  link(host: string): FakeLink
  /** The policy's events of one type, without their type field. */
  of<T extends MinionEvent['type']>(type: T): Omit<Extract<MinionEvent, { type: T }>, 'type'>[]
}

function world(masters: string[], behaviour: Record<string, Behaviour>): World {
  const self: World = {
    behaviour: new Map(Object.entries(behaviour)),
    owed: new Set(),
    opened: [],
    served: [],
    events: [],
    clock: new ManualClock(),
    context: {
      masters,
      open: (host) => {
        const link = new FakeLink(host, self.behaviour.get(host) ?? 'silent')
        self.opened.push(link)
        return link
      },
      serve: (link) => self.served.push(link),
      owes: async (link) => self.owed.has(link.host),
      emit: (event) => self.events.push(event),
    },
    link: (host) => {
      const found = self.opened.filter((link) => link.host === host).at(-1)
      if (found === undefined) throw new Error(`no link was opened to ${host}`)
      return found
    },
    of: (type) => self.events.filter((event) => event.type === type).map(({ type: _type, ...rest }) => rest) as never,
  }
  return self
}

const TIMES = { aliveIntervalMs: 1000, failbackIntervalMs: 3000, answerTimeoutMs: 200, retryWaitMs: 500 }

function failover(w: World, options: Partial<FailoverOptions> = {}): FailoverPolicy<FakeLink> {
  return new FailoverPolicy<FakeLink>({ ...TIMES, failback: false, randomMaster: false, clock: w.clock, ...options })
}

async function started(w: World, policy: FailoverPolicy<FakeLink>): Promise<FailoverPolicy<FakeLink>> {
  await policy.start(w.context)
  await w.clock.advance(0)
  return policy
}

describe('failoverOrder (random_master)', () => {
  const masters = ['a', 'b', 'c', 'd']
  it('keeps the config order unless random_master is set', () => {
    expect(failoverOrder(masters, { randomMaster: false, failback: true }, () => 0)).toEqual(masters)
  })

  it('shuffles every master, or with master_failback every master but the first', () => {
    // random() → 0 swaps each position with the lowest one allowed: a rotation that shows which positions moved.
    expect(failoverOrder(masters, { randomMaster: true, failback: false }, () => 0)).toEqual(['b', 'c', 'd', 'a'])
    expect(failoverOrder(masters, { randomMaster: true, failback: true }, () => 0)).toEqual(['a', 'c', 'd', 'b'])
    const values = [0.99, 0.5, 0.2]
    const shuffled = failoverOrder(masters, { randomMaster: true, failback: false }, () => values.shift() ?? 0)
    expect([...shuffled].sort()).toEqual(masters)
  })
})

describe('FailoverPolicy', () => {
  it('uses the first master that answers, in order; one that fails, is pending or refuses is passed over and its link closed', async () => {
    const w = world(['a', 'b', 'c', 'd'], { a: 'down', b: 'pending', c: 'rejected', d: 'up' })
    const policy = await started(w, failover(w))
    expect(w.of('master-selected')).toEqual([{ master: 'd:4506', reason: 'start' }])
    expect(w.of('master-unavailable')).toEqual([
      { master: 'a:4506', reason: 'TimeoutError: request timed out' },
      { master: 'b:4506', reason: "this minion's key is pending there (not accepted yet)" },
      { master: 'c:4506', reason: "this minion's key is rejected there" },
    ])
    expect(policy.active).toBe(w.link('d'))
    expect(policy.links).toEqual([w.link('d')])
    expect(['a', 'b', 'c'].map((host) => w.link(host).status.closed)).toEqual([true, true, true])
    expect(w.served.map((link) => link.host)).toEqual(['a', 'b', 'c', 'd'])
    expect([policy.serves(w.link('d')), policy.serves(w.link('a'))]).toEqual([true, false])
    await policy.close()
    expect(w.link('d').status.closed).toBe(true)
  })

  it('gives a silent master answerTimeoutMs on the clock before trying the next', async () => {
    const w = world(['a', 'b'], { a: 'silent', b: 'up' })
    const policy = await started(w, failover(w))
    await w.clock.advance(TIMES.answerTimeoutMs - 1)
    expect(w.of('master-selected')).toEqual([])
    expect(w.opened.map((link) => link.host)).toEqual(['a'])
    await w.clock.advance(1)
    expect(w.of('master-unavailable')).toEqual([{ master: 'a:4506', reason: `no answer to _auth within ${TIMES.answerTimeoutMs} ms` }])
    expect(w.of('master-selected')).toEqual([{ master: 'b:4506', reason: 'start' }])
    await policy.close()
  })

  it('when no master answers, waits retryWaitMs and tries the whole list again', async () => {
    const w = world(['a', 'b'], { a: 'down', b: 'down' })
    const policy = await started(w, failover(w))
    expect(w.opened.map((link) => link.host)).toEqual(['a', 'b'])
    w.behaviour.set('b', 'up')
    await w.clock.advance(TIMES.retryWaitMs - 1)
    expect(w.opened).toHaveLength(2)
    await w.clock.advance(1)
    expect(w.opened.map((link) => link.host)).toEqual(['a', 'b', 'a', 'b'])
    expect(w.of('master-selected')).toEqual([{ master: 'b:4506', reason: 'start' }])
    await policy.close()
  })

  it('at a master_alive_interval check finds the master in use gone and takes the next, the dead one last; its link stays while returns are owed to it', async () => {
    const w = world(['a', 'b', 'c'], { a: 'up', b: 'down', c: 'up' })
    const policy = await started(w, failover(w))
    const a = w.link('a')
    expect(policy.active).toBe(a)
    w.owed.add('a')
    a.disconnect()
    await w.clock.advance(TIMES.aliveIntervalMs - 1)
    expect(w.of('master-dead')).toEqual([])
    expect(policy.serves(a)).toBe(true)
    await w.clock.advance(1)
    expect(w.of('master-dead')).toEqual([{ master: 'a:4506' }])
    expect(w.of('master-selected')).toEqual([
      { master: 'a:4506', reason: 'start' },
      { master: 'c:4506', previous: 'a:4506', reason: 'master-dead' },
    ])
    // b was tried before c, and a (the dead one) was not tried again: c answered first.
    expect(w.opened.map((link) => link.host)).toEqual(['a', 'b', 'c'])
    expect(policy.serves(a)).toBe(false)
    expect(policy.links).toEqual([a, w.link('c')])
    // Once nothing is owed to a, its link is closed at the next look.
    w.owed.delete('a')
    await w.clock.advance(TIMES.aliveIntervalMs)
    expect(w.of('master-released')).toEqual([{ master: 'b:4506' }, { master: 'a:4506' }])
    expect(a.status.closed).toBe(true)
    expect(policy.links).toEqual([w.link('c')])
    await policy.close()
  })

  it('on a link that asks its master (a broker’s, still connected when the master is gone), fails over when the master does not answer, asking with answerTimeoutMs', async () => {
    const w = world(['a', 'b'], { a: 'up', b: 'up' })
    const asked: Array<[string, number]> = []
    const answers = new Map<string, boolean>([
      ['a', true],
      ['b', true],
    ])
    const open = w.context.open
    w.context.open = (host) => {
      const link = open(host)
      link.alive = async (timeoutMs) => {
        asked.push([host, timeoutMs])
        return answers.get(host)!
      }
      return link
    }
    const policy = await started(w, failover(w))
    const a = w.link('a')
    await w.clock.advance(TIMES.aliveIntervalMs)
    await settle()
    expect(policy.active).toBe(a)
    expect(asked).toEqual([['a', TIMES.answerTimeoutMs]])
    // The master stops answering; its link stays connected, as a broker's does (kept: returns are owed to it).
    w.owed.add('a')
    answers.set('a', false)
    await w.clock.advance(TIMES.aliveIntervalMs)
    await settle()
    expect(a.status.connected).toBe(true)
    expect(w.of('master-dead')).toEqual([{ master: 'a:4506' }])
    expect(policy.active).toBe(w.link('b'))
    await policy.close()
  })

  it('reuses the link kept for a master when it is chosen again, rather than opening a second one', async () => {
    const w = world(['a', 'b'], { a: 'up', b: 'up' })
    const policy = await started(w, failover(w))
    const a = w.link('a')
    w.owed.add('a')
    a.disconnect()
    await w.clock.advance(TIMES.aliveIntervalMs)
    const b = w.link('b')
    expect(policy.active).toBe(b)
    a.reconnect() // its master came back; the link delivered what it owed
    b.disconnect()
    await w.clock.advance(TIMES.aliveIntervalMs)
    expect(policy.active).toBe(a)
    expect(w.opened.map((link) => link.host)).toEqual(['a', 'b'])
    expect(w.of('master-selected').at(-1)).toEqual({ master: 'a:4506', previous: 'b:4506', reason: 'master-dead' })
    await policy.close()
  })

  it('with master_alive_interval 0 never leaves a master that went away', async () => {
    const w = world(['a', 'b'], { a: 'up', b: 'up' })
    const policy = await started(w, failover(w, { aliveIntervalMs: 0, failbackIntervalMs: 0 }))
    w.link('a').disconnect()
    await w.clock.advance(3_600_000)
    expect(w.of('master-dead')).toEqual([])
    expect(policy.active).toBe(w.link('a'))
    await policy.close()
  })

  it('with master_failback tries the first master every failback interval and returns to it once it answers; the other link is then closed', async () => {
    const w = world(['a', 'b'], { a: 'down', b: 'up' })
    const policy = await started(w, failover(w, { failback: true, aliveIntervalMs: 0 }))
    const b = w.link('b')
    expect(policy.active).toBe(b)
    await w.clock.advance(TIMES.failbackIntervalMs - 1)
    expect(w.opened.map((link) => link.host)).toEqual(['a', 'b'])
    await w.clock.advance(1)
    // Tried again, still down: b stays in use, the new link to a is closed.
    expect(w.opened.map((link) => link.host)).toEqual(['a', 'b', 'a'])
    expect(policy.active).toBe(b)
    expect(w.link('a').status.closed).toBe(true)
    w.behaviour.set('a', 'up')
    await w.clock.advance(TIMES.failbackIntervalMs)
    expect(policy.active).toBe(w.link('a'))
    expect(w.of('master-selected').at(-1)).toEqual({ master: 'a:4506', previous: 'b:4506', reason: 'failback' })
    expect(b.status.closed).toBe(true)
    expect(w.of('master-released').at(-1)).toEqual({ master: 'b:4506' })
    // On the first master, nothing more is tried.
    await w.clock.advance(10 * TIMES.failbackIntervalMs)
    expect(w.opened).toHaveLength(4)
    await policy.close()
  })

  it('keeps serving the master in use while the first one is tried, and serves the first as soon as it answers', async () => {
    const w = world(['a', 'b'], { a: 'down', b: 'up' })
    const policy = await started(w, failover(w, { failback: true, aliveIntervalMs: 0 }))
    w.behaviour.set('a', 'silent')
    await w.clock.advance(TIMES.failbackIntervalMs)
    const a = w.link('a')
    expect([policy.serves(a), policy.serves(w.link('b'))]).toEqual([true, true])
    a.reconnect()
    await w.clock.advance(0)
    expect(policy.active).toBe(a)
    expect(policy.serves(w.link('b'))).toBe(false)
    await policy.close()
  })

  it('does not fail back to a kept link whose publish connection is not back yet, however its requests answer; fails back once it is', async () => {
    const w = world(['a', 'b'], { a: 'up', b: 'up' })
    const policy = await started(w, failover(w, { failback: true }))
    const a = w.link('a')
    expect(policy.active).toBe(a)
    w.owed.add('a')
    a.disconnect()
    await w.clock.advance(TIMES.aliveIntervalMs)
    expect(policy.active).toBe(w.link('b'))
    // The master is back: requests and auth answer on the kept link, its publishes not yet.
    a.subscribed = false
    a.reconnect()
    await w.clock.advance(TIMES.failbackIntervalMs)
    expect(policy.active).toBe(w.link('b'))
    expect(w.of('master-selected').filter((event) => event.reason === 'failback')).toEqual([])
    a.subscribed = true
    await w.clock.advance(TIMES.failbackIntervalMs)
    expect(policy.active).toBe(a)
    expect(w.of('master-selected').at(-1)).toEqual({ master: 'a:4506', previous: 'b:4506', reason: 'failback' })
    await policy.close()
  })

  it('close() ends a round in progress and closes every link', async () => {
    const w = world(['a', 'b'], { a: 'silent', b: 'up' })
    const policy = failover(w)
    await policy.start(w.context)
    await policy.close()
    await w.clock.advance(10_000)
    expect(w.of('master-selected')).toEqual([])
    expect(w.opened.every((link) => link.status.closed)).toBe(true)
    expect(w.clock.sleeping).toBe(0)
  })
})

describe('AllMastersPolicy', () => {
  it('opens, starts and serves every master, and runs every link’s jobs', async () => {
    const w = world(['a', 'b'], { a: 'up', b: 'down' })
    const policy = new AllMastersPolicy<FakeLink>()
    await policy.start(w.context)
    expect(policy.links.map((link) => link.host)).toEqual(['a', 'b'])
    expect(w.served.map((link) => link.host)).toEqual(['a', 'b'])
    expect(policy.serves()).toBe(true)
    await policy.close()
    expect(w.opened.every((link) => link.status.closed)).toBe(true)
  })
})
