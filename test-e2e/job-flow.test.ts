import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'
import { json } from './helpers/output.js'

const startFleet = useFleets()

describe.each(TRANSPORTS)('a job end to end over %s', (transport) => {
  it('test.ping, cmd.run and grain targeting reach three real minions through the built CLI', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport, grains: { role: 'web' } },
        { id: 'web2', transport, grains: { role: 'web' } },
        { id: 'db1', transport, grains: { role: 'db' } },
      ],
    })
    const ping = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(ping.stderr).toBe('')
    expect(json(ping.stdout)).toEqual({ web1: true, web2: true, db1: true })
    expect(ping.code).toBe(0)

    const uname = execFileSync('uname', ['-sr']).toString().trim()
    const run = await fleet.run('brine', ['*', 'cmd.run', 'uname -sr', '--out', 'json', '--static'])
    expect(json(run.stdout)).toEqual({ web1: uname, web2: uname, db1: uname })

    const grain = await fleet.run('brine', ['-G', 'role:web', 'test.ping', '--out', 'json', '--static'])
    expect(json(grain.stdout)).toEqual({ web1: true, web2: true })

    const list = await fleet.run('brine', ['-L', 'web2,db1', 'test.echo', 'hello', '--out', 'json', '--static'])
    expect(json(list.stdout)).toEqual({ web2: 'hello', db1: 'hello' })

    const nested = await fleet.run('brine', ['db1', 'test.ping'])
    expect(nested.stdout).toBe('db1:\n    True\n')
  })

  it('a pending key gets no jobs until brine-key accepts it; deleting it cuts it off', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'web1', transport },
        { id: 'db1', transport },
      ],
      autoAccept: false,
    })
    await Promise.all(['web1', 'db1'].map((id) => fleet.waitForAuth(id, 'pend')))
    const listed = await fleet.run('brine-key', ['-L'])
    expect(listed.stdout).toMatch(/Unaccepted Keys:\ndb1\nweb1\n/)

    const none = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(none.code).toBe(2)
    expect(none.stderr).toContain('No minions matched the target')

    const mark = fleet.startEventCount
    const accepted = await fleet.run('brine-key', ['-A', '-y'])
    expect(accepted.code).toBe(0)
    await Promise.all(['web1', 'db1'].map((id) => fleet.waitForMinionStart(id, mark)))
    const both = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(json(both.stdout)).toEqual({ web1: true, db1: true })

    const beforeDelete = fleet.startEventCount
    const deleted = await fleet.run('brine-key', ['-d', 'db1', '-y'])
    expect(deleted.code).toBe(0)
    const after = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(json(after.stdout)).toEqual({ web1: true })
    // db1 met a publish under the rotated key, tried to re-authenticate and is pending again: it cannot read publishes.
    await fleet.waitForAuth('db1', 'pend', beforeDelete)
    const relisted = await fleet.run('brine-key', ['-L'])
    expect(relisted.stdout).toMatch(/Unaccepted Keys:\ndb1\n/)
  })
})

// One master serving every transport at once; a master serving two of them is the same path with one transport_opts
// entry fewer (iterTransportOpts in packages/transport/test/registry.test.ts covers the entries), so it has no fleet of its own.
describe('one master serving several transports', () => {
  it('reaches a ZeroMQ, a TCP and a NATS minion with one job, and a targeted job only the one named', async () => {
    const fleet = await startFleet({
      minions: [
        { id: 'zmq-minion', transport: 'zeromq' },
        { id: 'tcp-minion', transport: 'tcp' },
        { id: 'nats-minion', transport: 'nats' },
      ],
    })
    expect(fleet.transports).toEqual(['zeromq', 'tcp', 'nats'])
    const ping = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(json(ping.stdout)).toEqual({ 'zmq-minion': true, 'tcp-minion': true, 'nats-minion': true })
    expect(ping.code).toBe(0)
    const one = await fleet.run('brine', ['-L', 'nats-minion,tcp-minion', 'test.echo', 'hi', '--out', 'json', '--static'])
    expect(json(one.stdout)).toEqual({ 'nats-minion': 'hi', 'tcp-minion': 'hi' })
  })
})
