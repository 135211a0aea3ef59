import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { readdir, readFile } from 'node:fs/promises'
import { until } from '@brine/testkit'
import { type Fleet } from '@brine/harness'
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

/** An IPv4 address as /proc/net/tcp writes it (the four bytes in host order, little-endian here). */
const procAddress = (ip: string): string =>
  ip
    .split('.')
    .reverse()
    .map((byte) => Number(byte).toString(16).padStart(2, '0').toUpperCase())
    .join('')

/**
 * What the kernel says of the master's listening `ports`: how many connections wait in their accept queues (a LISTEN
 * row's rx_queue), and how many accepted ones from `from` the master still holds open (ESTABLISHED rows on its side).
 */
async function masterSide(ports: number[], from: string[]): Promise<{ queued: number; held: number }> {
  const portsHex = new Set(ports.map((port) => port.toString(16).padStart(4, '0').toUpperCase()))
  const peers = new Set(from.map(procAddress))
  let queued = 0
  let held = 0
  for (const line of (await readFile('/proc/net/tcp', 'utf8')).split('\n').slice(1)) {
    const [, local, remote, state, queues] = line.trim().split(/\s+/)
    if (local === undefined || remote === undefined || !portsHex.has(local.split(':')[1]!)) continue
    if (state === '0A') queued += parseInt(queues!.split(':')[1]!, 16)
    else if (state === '01' && peers.has(remote.split(':')[0]!)) held++
  }
  return { queued, held }
}

/**
 * On NATS the master binds nothing: idle connections go to the broker, which admits them by its own limits and
 * closes those that never send CONNECT. What must hold is what the socket case checks: the master, under its 1,024
 * open files, keeps serving the CLI and new minions, and holds no file per attacker.
 */
async function natsMasterUnderIdleConnections(fleet: Fleet): Promise<void> {
  const attack = idleConnections(fleet.natsServer!.port, 1500, '127.0.0.2')
  try {
    await until(() => attack.settled() === attack.sockets.length, 60_000, 'all 1,500 connections to the broker to be accepted or refused')
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
  it('answers the CLI through its local channel and lets a new minion in while idle unauthenticated connections fill its cap, evicting those first', async () => {
    // No greeting or idle deadline: only eviction may close the flood's sockets here.
    const fleet = await startFleet({
      minions: [{ id: 'web1', transport }],
      masterPrefix: ['prlimit', '--nofile=1024:1024', '--'],
      masterConfig: { handshake_timeout: 0, peer_idle_timeout: 0 },
    })
    const limits = await import('node:fs/promises').then((fs) => fs.readFile(`/proc/${fleet.master.pid}/limits`, 'utf8'))
    expect(limits).toMatch(/Max open files\s+1024\s+1024/)
    if (transport === 'nats') {
      await natsMasterUnderIdleConnections(fleet)
      return
    }
    expect(fleet.master.stderr).toMatch(new RegExp(`transport ${transport}: publish .*, local ipc://\\S+/ret_${transport}\\.ipc`))
    const ports = fleet.ports.get(transport)!
    // From four addresses, as from other hosts: 150 at the request port and 100 at the publish port each. The
    // master derives its caps from its limit: 896 connections in all (web1 holds two), 224 from one address.
    const attack = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].flatMap((from) => [
      idleConnections(ports.ret, 150, from),
      idleConnections(ports.publish, 100, from),
    ])
    const closed = (): number => attack.reduce((sum, group) => sum + group.closed(), 0)
    try {
      await until(() => attack.every((group) => group.settled() === group.sockets.length), 60_000, 'all 1,000 connections to be accepted')
      // Every newcomer past the cap evicted the oldest connection that had not greeted; none was refused.
      await until(() => closed() >= 1000 - 894, 60_000, 'the evicted connections to be closed')
      // The eviction total is at least 106, not exactly: an arrival at the global cap evicts the oldest of any address,
      // and the master may still be accepting from its backlog (a client's connect fires at the kernel's handshake).
      // So wait until it has accepted every connection and this side has seen each one it let go closed.
      const flooders = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5']
      const floodSettled = async (): Promise<boolean> => {
        const side = await masterSide([ports.ret, ports.publish], flooders)
        return side.queued === 0 && closed() === 1000 - side.held
      }
      await until(floodSettled, 60_000, 'the master to have accepted the flood and its evictions to be seen')
      const open = attack.reduce((sum, group) => sum + group.sockets.filter((socket) => !socket.destroyed && socket.readyState === 'open').length, 0)
      expect(open).toBeLessThanOrEqual(894)
      expect(fleet.master.stderr).not.toMatch(/refused connection from/)

      // The CLI is answered through its unix socket under sock_dir: it takes no network slot, so evicts no one.
      const before = closed()
      const ping = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
      expect(json(ping.stdout)).toEqual({ web1: true })
      expect(closed()).toBe(before)

      // A new minion's connections evict idle ones, and it authenticates.
      const mark = fleet.startEventCount
      await fleet.startMinion({ id: 'web2', transport })
      await fleet.waitForMinionStart('web2', mark)
      // The master closed them before it let web2 in; this process sees each close when its event comes round.
      await until(() => closed() > before, 60_000, "web2's connections to evict idle ones")
      expect(closed()).toBeGreaterThan(before)
      const both = await fleet.run('brine', ['*', 'test.ping', '--out', 'json', '--static'])
      expect(json(both.stdout)).toEqual({ web1: true, web2: true })
      expect(fleet.master.running).toBe(true)

      // Logged, rate-limited: the first ten evictions of each server, not hundreds of lines.
      const evictions = fleet.master.stderr.split('\n').filter((line) => line.includes('without completing its greeting, to admit a new connection'))
      expect(evictions.length).toBeGreaterThan(0)
      expect(evictions.length).toBeLessThanOrEqual(20)
      expect(evictions[0]).toMatch(
        /dropped connection from 127\.0\.0\.[2-5]:\d+: evicted after \d+ ms without completing its greeting, to admit a new connection at max_connections(_per_address)? \(\d+\)/,
      )
    } finally {
      for (const group of attack) for (const socket of group.sockets) socket.destroy()
    }
  })
})
