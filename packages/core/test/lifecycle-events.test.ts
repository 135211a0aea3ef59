/** LifecycleEvents: the bounded history each new reader replays, then live events until close(). */
import { describe, expect, it } from 'vitest'
import { LifecycleEvents } from '@brine/core'

/** Two events of a minion's stream, as its daemon emits them. */
type MinionEvent = { type: 'job-received'; master: string; jid: string; fun: string } | { type: 'stopped' }

describe('LifecycleEvents', () => {
  it('replays lifecycle history to each consumer and ends every iterator on close', async () => {
    const events = new LifecycleEvents<MinionEvent>()
    events.emit({ type: 'job-received', master: 'salt:4506', jid: '1', fun: 'test.ping' })
    const early = events.events()[Symbol.asyncIterator]()
    expect((await early.next()).value).toEqual({ type: 'job-received', master: 'salt:4506', jid: '1', fun: 'test.ping' })
    const pending = early.next()
    events.emit({ type: 'stopped' })
    expect((await pending).value).toEqual({ type: 'stopped' })
    events.close()
    expect((await early.next()).done).toBe(true)
    const late: string[] = []
    for await (const event of events.events()) late.push(event.type)
    expect(late).toEqual(['job-received', 'stopped'])
  })
})
