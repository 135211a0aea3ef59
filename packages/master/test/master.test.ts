import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { PeerBox, readRootKey, rootKeyPath, StaleSessionKeyError } from '@brine/crypt'
import { type RequestClient } from '@brine/transport'
import { createLogger, RemoteError, type Logger } from '@brine/core'
import { freeLoopbackPort } from '@brine/testkit'
import type { Master } from '../src/index.js'
import {
  clearClient,
  FakeMinion,
  natsFor,
  runCleanups,
  startMaster,
  stopNatsServer,
  tempDir,
  watchSubscribers,
  type EventLog,
  type MasterAddress,
} from './helpers.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

interface Setup {
  master: Master
  events: EventLog
  address: MasterAddress
  client: RequestClient
  dir: string
  subscribers: (count: number) => Promise<void>
  publish: (load: Record<string, unknown>) => Promise<{ jid: string; minions: string[] }>
  wheel: (load: Record<string, unknown>) => Promise<unknown>
  /** Starts minions, subscribes them, auths them, and accepts them through the wheel. */
  accepted: (...ids: string[]) => Promise<FakeMinion[]>
}

async function setup(transport: string, overrides: Record<string, unknown> = {}, logger?: Logger): Promise<Setup> {
  const dir = await tempDir()
  const nats = await natsFor(transport)
  const { master, events } = await startMaster(dir, { transport, ...nats.config, ...overrides }, logger === undefined ? {} : { logger })
  const address = {
    host: '127.0.0.1',
    publishPort: master.opts.publish_port,
    retPort: master.opts.ret_port,
    ...(nats.broker === undefined ? {} : { broker: nats.broker }),
  }
  const client = await clearClient(transport, address)
  const subscribers = watchSubscribers(master.endpoints[0]!.publish)
  const key = await readRootKey(rootKeyPath(master.opts.cachedir))
  const publish = async (load: Record<string, unknown>) =>
    (await client.send({ enc: 'clear', load: { cmd: 'publish', tgt_type: 'glob', arg: [], kwarg: {}, ret: '', user: 'root', key, ...load } })) as {
      jid: string
      minions: string[]
    }
  const wheel = async (load: Record<string, unknown>) =>
    ((await client.send({ enc: 'clear', load: { cmd: 'wheel', key, ...load } })) as { return: unknown }).return
  let subscribed = 0
  const accepted = async (...ids: string[]) => {
    const minions = await Promise.all(ids.map((id) => FakeMinion.start(transport, id, address, join(dir, `m-${id}`))))
    subscribed += ids.length
    await subscribers(subscribed)
    for (const minion of minions) expect(await minion.auth()).toEqual({ ok: false, reason: 'pending' })
    await wheel({ fun: 'key.accept', match: ids })
    for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })
    return minions
  }
  return { master, events, address, client, dir, subscribers, publish, wheel, accepted }
}

const refusal = async (promise: Promise<unknown>): Promise<RemoteError> => {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(RemoteError)
  return error as RemoteError
}

describe.each(TRANSPORTS)('master over %s', (transport) => {
  it('takes a minion from pending to accepted, publishes a job and stores its return once', async () => {
    const { master, events, publish, wheel, accepted, address, dir, subscribers } = await setup(transport)
    const pending = await FakeMinion.start(transport, 'web1', address, join(dir, 'web1'))
    await subscribers(1)
    expect(await pending.auth()).toEqual({ ok: false, reason: 'pending' })
    expect(events.tagged('salt/auth').at(-1)?.data).toMatchObject({ act: 'pend', id: 'web1', result: true })
    expect(await wheel({ fun: 'key.list_all' })).toEqual({
      minions_pre: ['web1'],
      minions: [],
      minions_rejected: [],
      minions_denied: [],
      local: ['master.key', 'master.pub'],
    })
    expect(await wheel({ fun: 'key.accept', match: 'web*' })).toEqual({ minions: ['web1'] })
    expect(events.tagged('salt/key').at(-1)?.data).toMatchObject({ act: 'accept', id: 'web1', result: true })
    expect(await wheel({ fun: 'key.print', match: 'web*' })).toEqual({
      minions: { web1: expect.stringMatching(/^-----BEGIN BRINE PUBLIC KEYS-----\nbox: \S+\nsign: \S+\n-----END BRINE PUBLIC KEYS-----\n$/) },
    })
    expect(await wheel({ fun: 'key.print', match: 'nobody' })).toEqual({})
    expect(await pending.auth()).toEqual({ ok: true })
    expect(pending.masterPub).toBeDefined()
    const [db1] = await accepted('db1')

    const reply = await publish({ tgt: '*', fun: 'test.ping' })
    expect(reply.minions.sort()).toEqual(['db1', 'web1'])
    const created = await events.next(`salt/job/${reply.jid}/new`)
    expect(created.data).toMatchObject({ jid: reply.jid, tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], user: 'root' })
    expect((created.data['minions'] as string[]).sort()).toEqual(['db1', 'web1'])
    expect(typeof created.data._stamp).toBe('string')

    const job = pending.open(await pending.nthPublish(1))
    expect(job).toMatchObject({ jid: reply.jid, fun: 'test.ping', arg: [], kwarg: {}, tgt: '*', tgt_type: 'glob', ret: '', user: 'root' })
    expect(db1!.open(await db1!.nthPublish(1))).toMatchObject({ jid: reply.jid })

    expect(await pending.returnJob(reply.jid, 'pong')).toEqual({ ok: true })
    expect(await pending.returnJob(reply.jid, 'pong again')).toEqual({ ok: true })
    const ret = await events.next(`salt/job/${reply.jid}/ret/web1`)
    expect(ret.data).toMatchObject({ id: 'web1', jid: reply.jid, return: 'pong', success: true })
    expect(events.tagged(`salt/job/${reply.jid}/ret/web1`)).toHaveLength(1)
    expect((await master.jobs.getJob(reply.jid))?.returns['web1']?.return).toBe('pong')

    // No known minion matches: the reply still says which jid it used, and nothing is stored, fired or published.
    const unmatched = await publish({ tgt: 'nomatch*', fun: 'test.ping' })
    expect(unmatched).toEqual({ jid: expect.stringMatching(/^\d{20}$/), minions: [] })
    expect(events.tagged(`salt/job/${unmatched.jid}/new`)).toHaveLength(0)
    expect(await master.jobs.getJob(unmatched.jid)).toBeUndefined()
    const next = await publish({ tgt: 'web1', fun: 'test.echo', arg: ['next'] })
    expect(pending.open(await pending.nthPublish(2))).toMatchObject({ jid: next.jid, arg: ['next'] })
  })

  it('refuses forged and unauthenticated sealed requests and foreign event tags; caches grains', async () => {
    const { events, accepted, address, dir, subscribers, publish, master } = await setup(transport)
    const [web1, web2] = await accepted('web1', 'web2')
    // web2 seals with its own key while claiming to be web1.
    const forger = new PeerBox({ id: 'web1', role: 'minion', secretKey: web2!.keys.box.secretKey, peerPublicKey: web1!.masterPub!.box })
    const forged = await refusal(
      web2!.request.send(
        forger.seal({ cmd: '_return', id: 'web1', jid: '20240101000000000000', fun: 'test.ping', fun_args: [], return: 'x', retcode: 0, success: true }),
      ),
    )
    expect(forged.remoteName).toBe('DecryptError')
    // A sealed load naming another minion is refused inside the box.
    const renamed = await web2!.sealed({
      cmd: '_return',
      id: 'web1',
      jid: '20240101000000000000',
      fun: 'test.ping',
      fun_args: [],
      return: 'x',
      retcode: 0,
      success: true,
    })
    expect(renamed).toMatchObject({ ok: false, error: { name: 'PermissionDeniedError' } })
    expect(events.events.filter((event) => event.tag.includes('/ret/'))).toHaveLength(0)

    const stranger = await FakeMinion.start(transport, 'stranger', address, join(dir, 'stranger'))
    await subscribers(3)
    expect(await stranger.auth()).toEqual({ ok: false, reason: 'pending' })
    const ownBox = new PeerBox({ id: 'stranger', role: 'minion', secretKey: stranger.keys.box.secretKey, peerPublicKey: web1!.masterPub!.box })
    expect((await refusal(stranger.request.send(ownBox.seal({ cmd: '_grains', id: 'stranger', grains: {} })))).remoteName).toBe('MinionNotAcceptedError')

    expect(await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [{ tag: 'salt/job/1/ret/web2', data: {} }] })).toMatchObject({
      ok: false,
      error: { name: 'PermissionDeniedError' },
    })
    expect(await web1!.sealed({ cmd: '_minion_event', id: 'web1', events: [{ tag: 'salt/minion/web1/start', data: { id: 'web1' } }] })).toEqual({ ok: true })
    expect((await events.next('salt/minion/web1/start')).data).toMatchObject({ id: 'web1' })
    expect(events.tagged('salt/job/1/ret/web2')).toHaveLength(0)

    expect(await web1!.sealed({ cmd: '_grains', id: 'web1', grains: { os: 'Debian', roles: ['web'] } })).toEqual({ ok: true })
    expect(JSON.parse(await readFile(join(master.opts.cachedir, 'minions', 'web1', 'grains'), 'utf8'))).toEqual({ os: 'Debian', roles: ['web'] })
    expect(await web2!.sealed({ cmd: '_grains', id: 'web2', grains: { os: 'Arch' } })).toEqual({ ok: true })
    expect((await publish({ tgt: 'os:Debian', tgt_type: 'grain', fun: 'test.ping' })).minions).toEqual(['web1'])
  })

  it('publishes a list target only to the listed minions', async () => {
    const { publish, accepted } = await setup(transport)
    const [web1, web2] = await accepted('web1', 'web2')
    const listed = await publish({ tgt: ['web2'], tgt_type: 'list', fun: 'test.echo', arg: ['only web2'] })
    expect(listed.minions).toEqual(['web2'])
    const broadcast = await publish({ tgt: '*', fun: 'test.ping' })
    expect(web2!.open(await web2!.nthPublish(1))).toMatchObject({ jid: listed.jid, arg: ['only web2'] })
    expect(web2!.open(await web2!.nthPublish(2))).toMatchObject({ jid: broadcast.jid })
    // web1's first publish is the broadcast: the list publish never reached it.
    expect(web1!.open(await web1!.nthPublish(1))).toMatchObject({ jid: broadcast.jid })
  })

  it('publishes nodegroups expanded from its own config; a hostile regex is a TargetError while other jobs are served', async () => {
    const nodegroups = { webs: 'web*', pair: ['web2', 'db1'], both: 'N@webs and not N@pair' }
    const { publish, accepted, events } = await setup(transport, { nodegroups })
    const long = `web-${'a'.repeat(36)}`
    const [web1, web2, db1] = await accepted('web1', 'web2', 'db1', long)
    const grouped = await publish({ tgt: 'both', tgt_type: 'nodegroup', fun: 'test.ping' })
    expect(grouped.minions.sort()).toEqual([long, 'web1'])
    const expanded = { tgt: '( ( web* ) and not ( L@web2,db1 ) )', tgt_type: 'compound' }
    expect((await events.next(`salt/job/${grouped.jid}/new`)).data).toMatchObject(expanded)
    // Every minion gets the expression (a broadcast), not the group's name: it needs no nodegroups of its own.
    expect(web1!.open(await web1!.nthPublish(1))).toMatchObject({ jid: grouped.jid, ...expanded })
    const inCompound = await publish({ tgt: 'N@pair and db*', tgt_type: 'compound', fun: 'test.ping' })
    expect(inCompound.minions).toEqual(['db1'])
    expect(db1!.open(await db1!.nthPublish(2))).toMatchObject({ jid: inCompound.jid, tgt: '( L@web2,db1 ) and db*', tgt_type: 'compound' })
    expect((await refusal(publish({ tgt: 'nope', tgt_type: 'nodegroup', fun: 'test.ping' }))).message).toContain(
      "unknown nodegroup 'nope' (known: webs, pair, both)",
    )

    // 2^36 ways to split the a's: the regex runs in a worker until its deadline, the master answers other publishes meanwhile.
    // (Named per transport: the process's regex guard refuses a pattern that just hit its deadline without running it.)
    const pattern = `web-(a+)+!|${transport}`
    const hostile = refusal(publish({ tgt: pattern, tgt_type: 'pcre', fun: 'test.ping' }))
    const meanwhile = await publish({ tgt: 'web2', fun: 'test.ping' })
    expect(meanwhile.minions).toEqual(['web2'])
    const refused = await hostile
    expect(refused.remoteName).toBe('TargetError')
    expect(refused.message).toContain(`invalid pcre target '${pattern}': regular expression '${pattern}' did not finish matching 4 values within 500 ms`)
    const after = await publish({ tgt: '(?i)WEB\\d', tgt_type: 'pcre', fun: 'test.ping' })
    expect(after.minions.sort()).toEqual(['web1', 'web2'])
    expect(web2!.open(await web2!.nthPublish(4))).toMatchObject({ jid: after.jid, tgt: '(?i)WEB\\d', tgt_type: 'pcre' })
  })

  it('rotates the session on reject and delete, so a removed minion cannot read new publishes', async () => {
    const { master, publish, wheel, accepted, events } = await setup(transport)
    const [web1, web2, web3] = await accepted('web1', 'web2', 'web3')
    const gen0 = master.session.gen
    expect(await wheel({ fun: 'key.delete', match: 'web1' })).toEqual({ minions: ['web1'] })
    expect(events.tagged('salt/key').at(-1)?.data).toMatchObject({ act: 'delete', id: 'web1' })
    const gen1 = master.session.gen
    expect(gen1).not.toBe(gen0)
    // Its re-auth lands it in pending: no new session key.
    expect(await web1!.auth()).toEqual({ ok: false, reason: 'pending' })
    expect(await wheel({ fun: 'key.reject', match: 'web2', include_accepted: true })).toEqual({ minions_rejected: ['web2'] })
    expect(master.session.gen).not.toBe(gen1)
    expect(await web2!.auth()).toEqual({ ok: false, reason: 'rejected' })

    const job = await publish({ tgt: '*', fun: 'test.ping' })
    expect(job.minions).toEqual(['web3'])
    const [seen1, seen2, seen3] = [await web1!.nthPublish(1), await web2!.nthPublish(1), await web3!.nthPublish(1)]
    expect(() => web1!.open(seen1)).toThrow(StaleSessionKeyError)
    expect(() => web2!.open(seen2)).toThrow(StaleSessionKeyError)
    // web3 re-authenticates for the new generation and reads it.
    expect(() => web3!.open(seen3)).toThrow(StaleSessionKeyError)
    expect(await web3!.auth()).toEqual({ ok: true })
    expect(web3!.open(web3!.received[0])).toMatchObject({ jid: job.jid })
  })

  it('refuses clear commands outside the allow-list and a wrong root key', async () => {
    const { client, wheel } = await setup(transport)
    const refused = async (load: Record<string, unknown>) => refusal(client.send({ enc: 'clear', load }))
    const asReturn = await refused({ cmd: '_return', id: 'web1', jid: '20240101000000000000', return: true })
    expect(asReturn.remoteName).toBe('PermissionDeniedError')
    expect(asReturn.message).toMatch(/_return/)
    expect((await refused({ cmd: '_foo' })).remoteName).toBe('PermissionDeniedError')
    expect((await refused({ cmd: 'runner', fun: 'jobs.list_jobs' })).remoteName).toBe('PermissionDeniedError')
    const wrongKey = await refused({ cmd: 'publish', key: 'nope', tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'x' })
    expect(wrongKey.remoteName).toBe('PermissionDeniedError')
    expect(wrongKey.message).toMatch(/root key/)
    expect((await refusal(client.send({ enc: 'aes', load: {} }))).remoteName).toBe('MalformedRequestError')
    expect((await refusal(client.send('garbage'))).remoteName).toBe('MalformedRequestError')
    expect((await refusal(wheel({ fun: 'key.nope' }))).remoteName).toBe('UnknownWheelFunctionError')
    // Still serving.
    expect(await wheel({ fun: 'key.list_all' })).toEqual({
      minions_pre: [],
      minions: [],
      minions_rejected: [],
      minions_denied: [],
      local: ['master.key', 'master.pub'],
    })
  })

  it("refuses, in the clear and sealed, a command named like an object's own members (the dispatch tables find only their commands)", async () => {
    const { client, accepted, wheel } = await setup(transport)
    const [web1] = await accepted('web1')
    const clearReasons = [
      ['constructor', 'not a clear command'],
      ['__proto__', 'not allowed in the clear'],
      ['toString', 'not a clear command'],
      ['hasOwnProperty', 'not a clear command'],
      ['valueOf', 'not a clear command'],
    ]
    for (const [cmd, reason] of clearReasons as Array<[string, string]>) {
      const clear = await refusal(client.send({ enc: 'clear', load: { cmd } }))
      expect(clear.remoteName, cmd).toBe('PermissionDeniedError')
      expect(clear.message, cmd).toContain(reason)
      expect(await web1!.sealed({ cmd, id: 'web1' }), cmd).toMatchObject({
        ok: false,
        error: { name: 'PermissionDeniedError', message: expect.stringContaining('not a sealed command') },
      })
    }
    // Still serving both channels.
    expect(await wheel({ fun: 'key.list_all' })).toMatchObject({ minions: ['web1'] })
    expect(await web1!.sealed({ cmd: '_grains', id: 'web1', grains: { os: 'Debian' } })).toEqual({ ok: true })
  })

  it('answers every refused clear command but logs them at a bounded rate', async () => {
    const lines: string[] = []
    const { client } = await setup(transport, {}, createLogger({ level: 'warning', write: (line) => lines.push(line) }))
    for (let i = 0; i < 50; i++) {
      expect((await refusal(client.send({ enc: 'clear', load: { cmd: `_probe${i}` } }))).remoteName).toBe('PermissionDeniedError')
    }
    // Ten lines a minute; the other forty are counted into the next line (or the window's summary).
    expect(lines.filter((line) => line.includes('refused clear command')).map((line) => line.slice(line.indexOf('refused')).trim())).toEqual(
      Array.from({ length: 10 }, (_, i) => expect.stringMatching(new RegExp(`^refused clear command "_probe${i}" from ${transport} peer `))),
    )
  })
})

describe('master over zeromq and tcp at once', () => {
  it('reaches a zeromq minion and a tcp minion with one publish', async () => {
    const dir = await tempDir()
    const tcpPorts = { publish_port: await freeLoopbackPort(), ret_port: await freeLoopbackPort() }
    const { master, events } = await startMaster(dir, { transport: 'zeromq', transport_opts: { tcp: tcpPorts }, auto_accept: true })
    expect(master.endpoints.map((endpoint) => endpoint.name)).toEqual(['tcp', 'zeromq'])
    const zmq = await FakeMinion.start(
      'zeromq',
      'zmq1',
      { host: '127.0.0.1', publishPort: master.opts.publish_port, retPort: master.opts.ret_port },
      join(dir, 'z'),
    )
    const tcp = await FakeMinion.start('tcp', 'tcp1', { host: '127.0.0.1', publishPort: tcpPorts.publish_port, retPort: tcpPorts.ret_port }, join(dir, 't'))
    await Promise.all(master.endpoints.map((endpoint) => watchSubscribers(endpoint.publish)(1)))
    expect(await zmq.auth()).toEqual({ ok: true })
    expect(await tcp.auth()).toEqual({ ok: true })
    const client = await clearClient('tcp', { host: '127.0.0.1', publishPort: tcpPorts.publish_port, retPort: tcpPorts.ret_port })
    const reply = (await client.send({
      enc: 'clear',
      load: { cmd: 'publish', key: master.rootKey, tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' },
    })) as { jid: string; minions: string[] }
    expect(reply.minions.sort()).toEqual(['tcp1', 'zmq1'])
    expect(zmq.open(await zmq.nthPublish(1))).toMatchObject({ jid: reply.jid })
    expect(tcp.open(await tcp.nthPublish(1))).toMatchObject({ jid: reply.jid })
    expect(await zmq.returnJob(reply.jid)).toEqual({ ok: true })
    expect(await tcp.returnJob(reply.jid)).toEqual({ ok: true })
    await events.next(`salt/job/${reply.jid}/ret/zmq1`)
    await events.next(`salt/job/${reply.jid}/ret/tcp1`)
    // stop() is idempotent and frees both transports' ports.
    await master.stop()
    await master.stop()
    expect(master.endpoints.every((endpoint) => endpoint.request.stats().peers === 0)).toBe(true)
  })
})
