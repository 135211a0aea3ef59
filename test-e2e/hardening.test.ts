import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { readdir } from 'node:fs/promises'
import { deadline, type Fleet } from '@brine/testkit'
import { TRANSPORTS, useFleets } from './helpers/fleets.js'

const startFleet = useFleets()

const json = (stdout: string): Record<string, unknown> => JSON.parse(stdout) as Record<string, unknown>

/** Opens `count` connections from `localAddress` that never send a byte; each is counted once it closes. */
function idleConnections(port: number, count: number, localAddress: string): { sockets: Socket[]; settled: () => number; closed: () => number } {
  let settled = 0
  let closed = 0
  const sockets = Array.from({ length: count }, () => {
    const socket = connect({ host: '127.0.0.1', port, localAddress })
    socket.on('error', () => {})
    socket.on('data', () => {})
    let connected = false
    socket.once('connect', () => {
      connected = true
      settled++
    })
    socket.once('close', () => {
      closed++
      if (!connected) settled++
    })
    return socket
  })
  return { sockets, settled: () => settled, closed: () => closed }
}

async function poll(condition: () => boolean, what: string, ms: number): Promise<void> {
  await deadline(
    (async () => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20))
    })(),
    ms,
    what,
  )
}

/**
 * On NATS the master binds nothing: idle connections go to the broker, which admits them by its own limits and
 * closes those that never send CONNECT. What must hold is what the socket case checks: the master, under its 1,024
 * open files, keeps serving the CLI and new minions, and holds no file per attacker.
 */
async function natsMasterUnderIdleConnections(fleet: Fleet): Promise<void> {
  const attack = idleConnections(fleet.natsServer!.port, 1500, '127.0.0.2')
  try {
    await poll(() => attack.settled() === attack.sockets.length, 'all 1,500 connections to the broker to be accepted or refused', 60_000)
    const ping = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(json(ping.stdout)).toEqual({ web1: true })
    const mark = fleet.startEventCount
    await fleet.startMinion({ id: 'web2', transport: 'nats' })
    await fleet.waitForMinionStart('web2', mark)
    const both = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
    expect(json(both.stdout)).toEqual({ web1: true, web2: true })
    expect(fleet.master.running).toBe(true)
    const files = await readdir(`/proc/${fleet.master.pid}/fd`)
    expect(files.length).toBeLessThan(256)
  } finally {
    for (const socket of attack.sockets) socket.destroy()
  }
}

describe.each(TRANSPORTS)('a master under `ulimit -n 1024` over %s', (transport) => {
  it('keeps serving the CLI and new minions while 1,500 idle unauthenticated connections are open, and says so in its log', async () => {
    const fleet = await startFleet({ minions: [{ id: 'web1', transport }], masterPrefix: ['prlimit', '--nofile=1024:1024', '--'] })
    const limits = await import('node:fs/promises').then((fs) => fs.readFile(`/proc/${fleet.master.pid}/limits`, 'utf8'))
    expect(limits).toMatch(/Max open files\s+1024\s+1024/)
    if (transport === 'nats') {
      await natsMasterUnderIdleConnections(fleet)
      return
    }
    const ports = fleet.ports.get(transport)!
    // From 127.0.0.2, as from another host: 1,000 at the request port, 500 at the publish port. The master
    // derives its caps from its limit: 896 connections in all, 224 from one address; the rest are refused.
    const attack = [idleConnections(ports.ret, 1000, '127.0.0.2'), idleConnections(ports.publish, 500, '127.0.0.2')]
    try {
      await poll(() => attack.every((group) => group.settled() === group.sockets.length), 'all 1,500 connections to be accepted or refused', 60_000)
      await poll(() => attack.reduce((sum, group) => sum + group.closed(), 0) >= 1500 - 224, 'the refused connections to be closed', 60_000)
      const open = attack.reduce((sum, group) => sum + group.sockets.filter((socket) => !socket.destroyed && socket.readyState === 'open').length, 0)
      expect(open).toBeLessThanOrEqual(224)

      // The CLI (event bus, request port) and a new minion work meanwhile.
      const ping = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
      expect(json(ping.stdout)).toEqual({ web1: true })
      const mark = fleet.startEventCount
      await fleet.startMinion({ id: 'web2', transport })
      await fleet.waitForMinionStart('web2', mark)
      const both = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
      expect(json(both.stdout)).toEqual({ web1: true, web2: true })
      expect(fleet.master.running).toBe(true)

      // Logged, rate-limited: the first ten refusals of each server, not 1,276 lines.
      const refusals = fleet.master.stderr.split('\n').filter((line) => line.includes('refused connection from 127.0.0.2'))
      expect(refusals.length).toBeGreaterThan(0)
      expect(refusals.length).toBeLessThanOrEqual(20)
      expect(refusals[0]).toMatch(/224 connections open from 127\.0\.0\.2 \(max_connections_per_address 224\)/)
    } finally {
      for (const group of attack) for (const socket of group.sockets) socket.destroy()
    }
  })
})
