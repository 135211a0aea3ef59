import { stat } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { deadline } from '@brine/testkit'
// Tests only: a real master in-process (worker_threads: 0) and fake minions.
import {
  cleanups,
  clearClient,
  FakeMinion,
  natsFor,
  runCleanups,
  startMaster,
  stopNatsServer,
  tempDir,
  WAIT_MS,
  watchSubscribers,
} from '../../master/test/helpers.js'
import { localChannel } from '../src/clear-request.js'
import { LocalClient } from '../src/local-client.js'
import { RunnerClient } from '../src/runner-client.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

/** Connections that never send a byte, as a flood would open them; `closed()` counts those the master closed. */
function idleSockets(port: number, count: number): { sockets: Socket[]; connected: Promise<void>; closed: () => number } {
  let closed = 0
  const sockets: Socket[] = []
  const connected = Promise.all(
    Array.from({ length: count }, () => {
      const socket = connect({ host: '127.0.0.1', port })
      sockets.push(socket)
      socket.on('error', () => {})
      // Read (and ignore) what the server sends, so its closing the connection is seen.
      socket.on('data', () => {})
      socket.once('close', () => closed++)
      cleanups.push(async () => socket.destroy())
      return new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    }),
  ).then(() => {})
  return { sockets, connected, closed: () => closed }
}

async function until(check: () => boolean, what: string): Promise<void> {
  await deadline(
    (async () => {
      while (!check()) await new Promise((resolve) => setTimeout(resolve, 10))
    })(),
    WAIT_MS,
    what,
  )
}

describe.each(['zeromq', 'tcp'])('the operator’s local channel over %s', (transport) => {
  it('a new minion gets in past idle and unauthenticated connections filling the cap, and the local client is answered through sock_dir while the cap is full of authenticated peers', async () => {
    const dir = await tempDir()
    const { master } = await startMaster(dir, { transport, auto_accept: true, max_connections: 6, max_connections_per_address: 6 })
    const { publish, request, local } = master.endpoints[0]!
    const path = join(master.opts.sock_dir, `ret_${transport}.ipc`)
    expect(local?.address).toBe(`ipc://${path}`)
    expect((await stat(path)).mode & 0o777).toBe(0o600)
    expect(localChannel(master.opts)).toBe(path)
    const networkPeers = (): number => publish.stats().peers + request.stats().peers
    const address = { host: '127.0.0.1', publishPort: master.opts.publish_port, retPort: master.opts.ret_port }
    const subscribers = watchSubscribers(publish)

    const web1 = await FakeMinion.start(transport, 'web1', address, join(dir, 'm-web1'))
    await subscribers(1)
    expect(await web1.auth()).toEqual({ ok: true })
    // Four connections that never greet take the cap (6) from web1's two.
    const idle = idleSockets(master.opts.ret_port, 4)
    await deadline(idle.connected, WAIT_MS, 'the idle sockets to connect')
    await until(() => networkPeers() === 6, 'the cap to be full')

    // A new minion's two connections evict the two oldest idle ones, and it authenticates.
    const web2 = await FakeMinion.start(transport, 'web2', address, join(dir, 'm-web2'))
    await subscribers(2)
    expect(await web2.auth()).toEqual({ ok: true })
    await until(() => idle.closed() === 2, 'two idle sockets to be evicted')
    expect(idle.sockets.slice(0, 2).every((socket) => socket.destroyed)).toBe(true)

    // A peer that greets without proving anything takes the next place, and one that authenticates (the root key) the last.
    const stranger = await clearClient(transport, address)
    await expect(stranger.send({ enc: 'clear', load: { cmd: 'no_such_command' } })).rejects.toMatchObject({ remoteName: 'PermissionDeniedError' })
    const runnerLoad = { enc: 'clear', load: { cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {}, key: master.rootKey } }
    await (await clearClient(transport, address)).send(runnerLoad)
    await until(() => idle.closed() === 4, 'every idle socket to be evicted')
    // With no idle socket left, the stranger — greeted, unauthenticated, idle — is evicted for the next operator.
    const droppedBefore = request.stats().peersDropped
    await (await clearClient(transport, address)).send(runnerLoad)
    await until(() => request.stats().peersDropped === droppedBefore + 1, 'the unauthenticated peer to be evicted')
    await stranger.close()
    expect(networkPeers()).toBe(6)
    const refusedBefore = request.stats().peersRefused
    const late = idleSockets(master.opts.ret_port, 1)
    await until(() => request.stats().peersRefused > refusedBefore && late.closed() === 1, 'the full network port to refuse a newcomer')

    // The operator is answered all the same: the local client goes through the unix socket, not ret_port.
    const client = new LocalClient({ opts: master.opts })
    const runner = new RunnerClient({ opts: master.opts })
    cleanups.push(
      () => client.close(),
      () => runner.close(),
    )
    const job = await client.runJob('*', 'test.ping', [], { listen: true, timeout: WAIT_MS })
    expect(job.minions).toEqual(['web1', 'web2'])
    for (const minion of [web1, web2]) {
      await minion.nthPublish(1)
      expect(await minion.returnJob(job.jid, true)).toEqual({ ok: true })
    }
    const returns = []
    for await (const item of job.returns({ timeout: WAIT_MS })) returns.push(item.id)
    expect(returns.sort()).toEqual(['web1', 'web2'])
    expect(await runner.cmd('jobs.list_jobs')).toHaveProperty(job.jid)
    expect(local?.stats().peers).toBe(2)
    expect(networkPeers()).toBe(6)
  })

  it('falls back to ret_port when the master has no local channel to offer', async () => {
    const dir = await tempDir()
    const { master } = await startMaster(dir, { transport })
    const elsewhere = { ...master.opts, sock_dir: join(dir, 'no-such-sock-dir') }
    expect(localChannel(elsewhere)).toBeUndefined()
    const runner = new RunnerClient({ opts: elsewhere })
    cleanups.push(() => runner.close())
    expect(await runner.cmd('jobs.list_jobs')).toEqual({})
    expect(master.endpoints[0]!.local?.stats().peers).toBe(0)
    expect(master.endpoints[0]!.request.stats().peers).toBe(1)
  })
})

describe('the operator’s local channel over nats', () => {
  it('a NATS master serves its local channel on a unix socket (TCP framing: its NATS servers are the broker’s clients and own no socket), and the local client is answered through it, not the broker', async () => {
    const dir = await tempDir()
    const nats = await natsFor('nats')
    const { master } = await startMaster(dir, { transport: 'nats', auto_accept: true, ...nats.config })
    const { local } = master.endpoints[0]!
    const path = join(master.opts.sock_dir, 'ret_nats.ipc')
    expect(local?.address).toBe(`ipc://${path}`)
    expect((await stat(path)).mode & 0o777).toBe(0o600)
    expect(localChannel(master.opts)).toBe(path)
    const address = { host: '127.0.0.1', publishPort: master.opts.publish_port, retPort: master.opts.ret_port, broker: nats.broker! }
    // The fake minion's NATS publish client subscribes in the background: the job waits until the master heard it.
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const web1 = await FakeMinion.start('nats', 'web1', address, join(dir, 'm-web1'))
    await subscribers(1)
    expect(await web1.auth()).toEqual({ ok: true })
    // The operator's config names a broker nobody listens on: only the local channel can answer it.
    const operator = { ...master.opts, nats_servers: ['nats://127.0.0.1:1'] }
    const client = new LocalClient({ opts: operator })
    const runner = new RunnerClient({ opts: operator })
    cleanups.push(
      () => client.close(),
      () => runner.close(),
    )
    const job = await client.runJob('*', 'test.ping', [], { listen: true, timeout: WAIT_MS })
    expect(job.minions).toEqual(['web1'])
    await web1.nthPublish(1)
    expect(await web1.returnJob(job.jid, true)).toEqual({ ok: true })
    const returns = []
    for await (const item of job.returns({ timeout: WAIT_MS })) returns.push(item.id)
    expect(returns).toEqual(['web1'])
    expect(await runner.cmd('jobs.list_jobs')).toHaveProperty(job.jid)
    expect(local?.stats().peers).toBe(2)
  })

  it('without its local channel (another sock_dir), the local client reaches a NATS master through the broker', async () => {
    const dir = await tempDir()
    const nats = await natsFor('nats')
    const { master } = await startMaster(dir, { transport: 'nats', ...nats.config })
    const elsewhere = { ...master.opts, sock_dir: join(dir, 'no-such-sock-dir') }
    expect(localChannel(elsewhere)).toBeUndefined()
    const runner = new RunnerClient({ opts: elsewhere })
    cleanups.push(() => runner.close())
    expect(await runner.cmd('jobs.list_jobs')).toEqual({})
    expect(master.endpoints[0]!.local?.stats().peers).toBe(0)
  })
})
