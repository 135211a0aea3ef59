import { describe, expect, it } from 'vitest'
import { formatKeyListing, parseKeyArgs, runKey, type KeyWheel } from '../src/commands/key.js'
import { memoryIO } from './helpers.js'

const LISTING = { minions: ['web1'], minions_pre: ['db2', 'db1', 'web9'], minions_rejected: [], minions_denied: ['evil'] }

/** A master stand-in answering wheel loads the way @brine/master's wheel does. */
function fakeWheel(): KeyWheel & { loads: Record<string, unknown>[] } {
  const client = {
    loads: [] as Record<string, unknown>[],
    async cmd(fun: string, kwarg: Record<string, unknown> = {}) {
      const load: Record<string, unknown> = { cmd: 'wheel', fun, ...kwarg }
      client.loads.push(load)
      if (fun === 'key.list_all') return LISTING
      if (fun === 'key.accept') return { minions: load.match }
      if (fun === 'key.delete') return { minions_pre: load.match }
      if (fun === 'key.finger') return { minions: { web1: 'aa:bb' }, minions_pre: { db1: 'cc:dd' } }
      throw new Error(`unexpected ${fun}`)
    },
    async close() {},
  }
  return client
}

describe('brine-key', () => {
  it("lists keys as salt-key does", async () => {
    expect(formatKeyListing(LISTING)).toBe('Accepted Keys:\nweb1\nDenied Keys:\nevil\nUnaccepted Keys:\ndb1\ndb2\nweb9\nRejected Keys:\n')
    const io = memoryIO()
    expect(await runKey(['-l', 'un'], io, { createClient: fakeWheel })).toBe(0)
    expect(io.out()).toBe('Unaccepted Keys:\ndb1\ndb2\nweb9\n')
    const all = memoryIO()
    expect(await runKey(['-L'], all, { createClient: fakeWheel })).toBe(0)
    expect(all.out()).toMatch(/^Accepted Keys:\nweb1\n/)
  })

  it('accepts the matching pending keys with -y, sending their ids to key.accept', async () => {
    const client = fakeWheel()
    const io = memoryIO()
    expect(await runKey(['-a', 'db*', '-y'], io, { createClient: () => client })).toBe(0)
    expect(client.loads[1]).toEqual({ cmd: 'wheel', fun: 'key.accept', match: ['db1', 'db2'] })
    expect(io.out()).toBe('Key for minion db1 accepted.\nKey for minion db2 accepted.\n')
  })

  it('asks before deleting on a terminal and refuses without one', async () => {
    const client = fakeWheel()
    const io = memoryIO({ answers: ['y'] })
    expect(await runKey(['-d', 'web9'], io, { createClient: () => client })).toBe(0)
    expect(io.out()).toBe('The following keys are going to be deleted:\nUnaccepted Keys:\nweb9\nProceed? [N/y] Key for minion web9 deleted.\n')
    const declined = memoryIO({ answers: [''] })
    const second = fakeWheel()
    expect(await runKey(['-d', 'web9'], declined, { createClient: () => second })).toBe(0)
    expect(second.loads.map((load) => load.fun)).toEqual(['key.list_all'])
    const noTTY = memoryIO()
    expect(await runKey(['-A'], noTTY, { createClient: fakeWheel })).toBe(2)
    expect(noTTY.err()).toMatch(/use -y/)
  })

  it('prints fingerprints, and says when a glob matches nothing', async () => {
    const io = memoryIO()
    expect(await runKey(['-F'], io, { createClient: fakeWheel })).toBe(0)
    expect(io.out()).toBe('Accepted Keys:\nweb1:  aa:bb\nUnaccepted Keys:\ndb1:  cc:dd\n')
    const none = memoryIO()
    expect(await runKey(['-a', 'nope*', '-y'], none, { createClient: fakeWheel })).toBe(1)
    expect(none.err()).toBe("The key glob 'nope*' does not match any unaccepted keys.\n")
  })

  it('refuses a bad -l state and two actions at once', () => {
    const bad = memoryIO()
    expect(parseKeyArgs(['-l', 'sideways'], bad)).toBe(2)
    expect(bad.err()).toMatch(/-l, --list <state>.*sideways/)
    const two = memoryIO()
    expect(parseKeyArgs(['-A', '-D'], two)).toBe(2)
    expect(two.err()).toMatch(/one action at a time/)
  })
})
