/**
 * A MasterLink on its own (as a syndic will hold one), against stand-in masters over real sockets
 * on every transport (NATS: one nats-server for the file; where a case restarts what the link is connected
 * to, that is the broker there): auth and its pin file, the stream of opened job loads, returns to the link
 * a job came from, re-authentication on a rotated session key and on a reconnected request link,
 * and close().
 */
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loadTransport } from '@brine/common'
import { type JobLoad, type ReturnLoad } from '@brine/protocol'
import { CryptCache, generateKeys, loadOrCreateKeys, masterPinFile, sealPublish } from '@brine/crypt'
import { freeLoopbackPort } from '@brine/testkit'
import { ClosedError, createLogger, InvalidOperationError, ServerBusyError, silentLogger, type BackoffOptions } from '@brine/core'
import type { Transport } from '@brine/transport'
import { type MasterLinkEvent, MasterLink, type LinkPublish, type MasterLinkOptions } from '@brine/link'
import { deadline } from './modules-fixture.js'
import { Recorder } from './recorder.js'
import { job, restartNatsServer, StandInMaster, stopNatsServer } from './stand-in-master.js'

afterAll(stopNatsServer)

const ID = 'syndic-or-minion'

const returnOf = (publish: LinkPublish): ReturnLoad => ({
  cmd: '_return',
  id: ID,
  jid: publish.job.jid,
  fun: publish.job.fun,
  fun_args: publish.job.arg,
  return: `answered by ${publish.link.master}`,
  retcode: 0,
  success: true,
})

/** Reads `count` job loads from a link's stream (one reader per link: take it once). */
async function take(stream: AsyncIterator<LinkPublish>, count: number, what: string): Promise<LinkPublish[]> {
  const taken: LinkPublish[] = []
  await deadline(
    (async () => {
      while (taken.length < count) {
        const next = await stream.next()
        if (next.done === true) throw new Error(`the publishes ended after ${taken.length} of ${count}`)
        taken.push(next.value)
      }
    })(),
    8000,
    what,
  )
  return taken
}

/** A link's reconnect interval that no test waits out: a link back within a test's bounds was brought back. */
const NEVER_IN_A_TEST: BackoffOptions = { initial: 60_000, max: 60_000, jitter: 0 }
const QUICK: BackoffOptions = { initial: 50, max: 300 }
/**
 * The interval of the link that waits for the other: none a test waits out, on every transport: the socket
 * transports' clients bring an attempt forward (reconnectNow()), and a master restart does not drop NATS's links.
 */
const waitingLink = (_transportName: string): BackoffOptions => NEVER_IN_A_TEST

/** `transport` with its publish clients and request clients on backoffs of their own (its servers as they are). */
function withBackoffs(transport: Transport, backoffs: { publish: BackoffOptions; request: BackoffOptions }): Transport {
  return {
    name: transport.name,
    ...(transport.peerSockets === undefined ? {} : { peerSockets: transport.peerSockets }),
    createPublishServer: (options) => transport.createPublishServer(options),
    createRequestServer: (options) => transport.createRequestServer(options),
    createPublishClient: (options) => transport.createPublishClient({ ...options, reconnect: backoffs.publish }),
    createRequestClient: (options) => transport.createRequestClient({ ...options, reconnect: backoffs.request }),
  }
}

describe.each(['zeromq', 'tcp', 'nats'])('MasterLink over %s', (transportName) => {
  let dir: string
  const masters: StandInMaster[] = []
  const links: MasterLink[] = []

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-link-'))
  })

  afterEach(async () => {
    await Promise.all(links.splice(0).map((link) => link.close()))
    await Promise.all(masters.splice(0).map((master) => master.close()))
    await rm(dir, { recursive: true, force: true })
  })

  async function master(options: { autoAccept: boolean; host?: string; name?: string; retPort?: number; publishPort?: number }): Promise<StandInMaster> {
    const started = await StandInMaster.start(transportName, dir, options)
    masters.push(started)
    return started
  }

  /**
   * The master's request server restarts, so the link's request client must reconnect. On NATS that client's
   * connection is the broker's, which a master restart leaves alone (the link never notices one, and needs not:
   * the broker queues nothing for it), so there the broker itself is killed and started again, with both sides'
   * clients reconnecting to it.
   */
  async function restartRequests(to: StandInMaster): Promise<void> {
    await to.stopRequests()
    if (transportName === 'nats') await restartNatsServer()
    await to.startRequests()
  }

  /** A started link to `to`, with its own pin file; its events recorded. */
  async function link(to: StandInMaster, extra: Partial<MasterLinkOptions> = {}): Promise<{ link: MasterLink; recorder: Recorder<MasterLinkEvent> }> {
    const { keys } = await loadOrCreateKeys(join(dir, 'link-pki'), 'minion')
    const created = new MasterLink({
      id: ID,
      keys,
      transport: await loadTransport(transportName),
      host: to.host,
      port: to.retPort,
      publishPort: to.publishPort,
      client: { reconnect: { initial: 50, max: 300 }, ...(to.broker === undefined ? {} : { broker: to.broker }) },
      pkiDir: join(dir, 'link-pki'),
      pinFile: masterPinFile(to.host, to.retPort),
      authTimeoutMs: 1000,
      acceptanceWaitMs: 100,
      acceptanceWaitMaxMs: 0,
      spoolDir: join(dir, 'spool', to.host),
      returnRetryDelayMs: () => 300,
      returnRetryTries: 2,
      logger: silentLogger,
      ...extra,
    })
    links.push(created)
    const recorder = new Recorder(created)
    await created.start()
    return { link: created, recorder }
  }

  it("says at the first attempt that a master name does not resolve, with the resolver's error, instead of timing out", async () => {
    const to = await master({ autoAccept: true })
    const lines: string[] = []
    const logger = createLogger({ level: 'debug', write: (line: string) => lines.push(line) })
    // .invalid never resolves (RFC 6761).
    const { recorder } = await link(to, { host: 'ghost.invalid', authTimeoutMs: 60_000, logger })
    const failed = await recorder.waitFor('auth-failed')
    expect(failed.error).toBe('MasterUnresolvedError')
    expect(failed.message).toMatch(/^the master's name 'ghost.invalid' does not resolve: getaddrinfo (ENOTFOUND|EAI_AGAIN) ghost.invalid/)
    expect(recorder.of('auth-failed')[0]).toBe(failed)
    expect(lines.some((line) => /ERROR.*ghost\.invalid' does not resolve: getaddrinfo/.test(line))).toBe(true)
    expect(lines.some((line) => /DEBUG.*ghost\.invalid' does not resolve/.test(line))).toBe(true)
    expect(lines.some((line) => /timed out/.test(line))).toBe(false)
  })

  it('waits while pending, then authenticates, pins the master in its own file, runs afterAuth, and says so in its status', async () => {
    const to = await master({ autoAccept: false })
    const afterAuth: boolean[] = []
    const { link: linked, recorder } = await link(to, {
      afterAuth: async (self, first) => {
        afterAuth.push(first)
        await self.send({ cmd: '_grains', id: ID, grains: { role: 'relay' } })
      },
    })
    const pending = await recorder.waitFor('auth-pending')
    expect(pending.master).toBe(`${to.host}:${to.retPort}`)
    expect(linked.status).toMatchObject({ authenticated: false, closed: false })
    expect(await to.store.state(ID)).toBe('pending')

    await to.store.accept(ID)
    await deadline(linked.authenticated, 8000, 'the first authentication')
    const auth = await recorder.waitFor('authenticated')
    expect(auth).toMatchObject({ master: linked.master, gen: to.session.current().gen, firstContact: true })
    expect(existsSync(join(dir, 'link-pki', masterPinFile(to.host, to.retPort)))).toBe(true)
    expect(existsSync(join(dir, 'link-pki', 'minion_master.pub'))).toBe(false)
    expect((await to.waitForLoad('_grains')).grains).toEqual({ role: 'relay' })
    expect(afterAuth).toEqual([true])
    await recorder.waitFor('master-connect')
    expect(linked.status).toEqual({ connected: true, authenticated: true, gen: to.session.current().gen, closed: false })
  })

  it("request() resolves with the data of the master's sealed answer; an answer marked duplicate (no data) is asked again", async () => {
    const to = await master({ autoAccept: true })
    let asked = 0
    to.answer = (load) => (load['cmd'] !== '_file_envs' ? {} : ++asked === 1 ? { duplicate: true } : { envs: ['base', 'dev'] })
    const { link: linked } = await link(to)
    expect(await linked.request({ cmd: '_file_envs', id: ID })).toEqual({ ok: true, envs: ['base', 'dev'] })
    const requests = to.loads('_file_envs')
    expect(requests).toHaveLength(2)
    expect(asked).toBe(2)
  })

  it('runs its first afterAuth (the start event) only once its publish link has connected, as Salt fires minion_start', async () => {
    const to = await master({ autoAccept: true })
    const transport = await loadTransport(transportName)
    // Publishes come from a port nothing listens on yet: authenticated, the link cannot hear jobs.
    const laterPort = await freeLoopbackPort()
    const ran: boolean[] = []
    let ranOnce: () => void = () => {}
    const firstRun = new Promise<void>((resolve) => (ranOnce = resolve))
    const { link: linked } = await link(to, {
      publishPort: laterPort,
      afterAuth: async (_self, first) => {
        ran.push(first)
        ranOnce()
      },
    })
    await deadline(linked.authenticated, 8000, 'the first authentication')
    expect(ran).toEqual([])
    const publisher = transport.createPublishServer({ host: to.host, port: laterPort, ...(to.broker === undefined ? {} : { broker: to.broker }) })
    await publisher.start()
    try {
      await deadline(firstRun, 8000, 'afterAuth once the publish link connected')
      expect(ran).toEqual([true])
    } finally {
      await publisher.close()
    }
  })

  it('yields opened, validated job loads in publish order and drops forgeries and invalid loads without ending', async () => {
    const to = await master({ autoAccept: true })
    const { link: linked, recorder } = await link(to)
    const stream = linked.publishes()[Symbol.asyncIterator]()
    expect(() => linked.publishes()).toThrow(InvalidOperationError)
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed()

    const tampered = sealPublish(job('test.ping'), to.session.current(), to.keys.sign.secretKey)
    tampered.ciphertext[0] = (tampered.ciphertext[0] ?? 0) ^ 0xff
    await to.publishRaw(tampered)
    await to.publishRaw(sealPublish(job('test.ping'), to.session.current(), generateKeys().sign.secretKey))
    await to.publish({ ...job('test.ping'), fun: '' })
    // As the master publishes them: stamped with their issue time and expiry.
    const first = to.stamped(job('test.echo', ['one']))
    const second = to.stamped(job('cmd.run', ['two'], { tgt: ['x', 'y'], tgt_type: 'list' }))
    await to.publish(first)
    await to.publish(second)

    const [a, b] = await take(stream, 2, 'two job loads')
    expect(a?.job).toEqual(first)
    expect(b?.job).toEqual(second)
    expect(a?.link).toBe(linked)
    expect(Object.isFrozen(a?.job)).toBe(true)
    expect(recorder.of('publish-dropped').map((event) => event.reason.split(':')[0])).toEqual(['SignatureError', 'SignatureError', 'not a valid job load'])
  })

  it('returns each job to the link it came from', async () => {
    const one = await master({ autoAccept: true, name: 'one' })
    // On NATS two masters on one port pair would be one queue group: the second is told apart by ports of its own.
    const shared = transportName === 'nats' ? {} : { retPort: one.retPort, publishPort: one.publishPort }
    const two = await master({ autoAccept: true, name: 'two', host: '127.0.0.2', ...shared })
    const first = await link(one)
    const second = await link(two)
    await deadline(Promise.all([first.link.authenticated, second.link.authenticated]), 8000, 'both authentications')
    await Promise.all([one.waitSubscribed(), two.waitSubscribed()])
    expect(existsSync(join(dir, 'link-pki', masterPinFile('127.0.0.1', one.retPort)))).toBe(true)
    expect(existsSync(join(dir, 'link-pki', masterPinFile('127.0.0.2', two.retPort)))).toBe(true)

    const fromOne = job('test.ping')
    const fromTwo = job('test.ping')
    await one.publish(fromOne)
    await two.publish(fromTwo)
    const [[gotOne], [gotTwo]] = await Promise.all([
      take(first.link.publishes()[Symbol.asyncIterator](), 1, 'the job from master one'),
      take(second.link.publishes()[Symbol.asyncIterator](), 1, 'the job from master two'),
    ])
    await Promise.all([gotOne!, gotTwo!].map((publish) => publish.link.deliver(returnOf(publish))))

    expect(await one.waitForLoad('_return', fromOne.jid as string)).toMatchObject({ return: `answered by ${first.link.master}` })
    expect(await two.waitForLoad('_return', fromTwo.jid as string)).toMatchObject({ return: `answered by ${second.link.master}` })
    expect(one.loads('_return', fromTwo.jid as string)).toEqual([])
    expect(two.loads('_return', fromOne.jid as string)).toEqual([])
    await first.recorder.waitFor('returned', (event) => event.jid === fromOne.jid, 'the return acknowledged by master one')
    expect(second.recorder.of('returned').map((event) => event.jid)).not.toContain(fromOne.jid)
  })

  it('re-authenticates for a publish under a newer session key and yields the job it was holding', async () => {
    const to = await master({ autoAccept: true })
    const { link: linked, recorder } = await link(to)
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed()
    const rotated = to.session.rotate()
    const held = job('test.ping')
    await to.publish(held)

    const [got] = await take(stream, 1, 'the job published under the rotated key')
    expect(got?.job.jid).toBe(held.jid)
    expect(recorder.of('authenticated').map((event) => event.gen)).toEqual([rotated.gen - 1, rotated.gen])
    expect(linked.status.gen).toBe(rotated.gen)
    expect(recorder.of('publish-dropped')).toEqual([])
  })

  it('re-authenticates for a rotated session key only after a random wait up to random_reauth_delay, and still yields the held job', async () => {
    const to = await master({ autoAccept: true })
    const lines: string[] = []
    const logger = createLogger({ level: 'info', write: (line: string) => lines.push(line) })
    const { link: linked, recorder } = await link(to, { reauthDelayMs: 600, random: () => 0.5, logger })
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed()
    // The first authentication does not wait: only a changed master key sends a whole fleet back at once.
    expect(lines.filter((line) => line.includes('random_reauth_delay'))).toEqual([])
    const rotated = to.session.rotate()
    const held = job('test.ping')
    await to.publish(held)

    const [got] = await take(stream, 1, 'the job published under the rotated key')
    expect(got?.job.jid).toBe(held.jid)
    expect(lines.filter((line) => line.includes('random_reauth_delay'))).toEqual([
      expect.stringMatching(/INFO.*waiting 0\.3 seconds \(random_reauth_delay\) before re-authenticating with /),
    ])
    expect(recorder.of('authenticated').map((event) => event.gen)).toEqual([rotated.gen - 1, rotated.gen])
  })

  it('backs off a busy master: the waits double from acceptance_wait_time with the top half random, and after auth_tries it starts over within random_reauth_delay', async () => {
    const to = await master({ autoAccept: true })
    let refusals = 3
    to.refuseAuth = () => (refusals-- > 0 ? new ServerBusyError('the stand-in master', 1, 0) : undefined)
    const { link: linked, recorder } = await link(to, { acceptanceWaitMs: 100, reauthDelayMs: 1000, authTries: 3, random: () => 0.5 })
    await deadline(linked.authenticated, 8000, 'authentication after three busy refusals')
    const failed = recorder.of('auth-failed')
    expect(failed.map((event) => event.error)).toEqual(['RemoteError', 'RemoteError', 'RemoteError'])
    expect(failed[0]?.message).toMatch(/answered with ServerBusyError/)
    // 100 ms, then 200 ms, each with its top half at random (pinned to the middle); the third, at auth_tries, starts over: half of random_reauth_delay.
    expect(failed.map((event) => event.waitMs)).toEqual([75, 150, 500])
    expect(to.authReplies).toEqual(['ServerBusyError', 'ServerBusyError', 'ServerBusyError', 'accepted'])
  })

  it('re-authenticates when its request link reconnects to a restarted master', async () => {
    const to = await master({ autoAccept: true })
    const { link: linked, recorder } = await link(to)
    await deadline(linked.authenticated, 8000, 'authentication')
    await recorder.waitFor('master-connect')
    await restartRequests(to)
    // A request after the restart makes the reconnect certain on either transport.
    await deadline(linked.send({ cmd: '_minion_event', id: ID, events: [] }, { timeout: 1000, tries: 5 }), 8000, 'a send after the restart')
    await recorder.waitFor('authenticated', (event) => event !== recorder.of('authenticated')[0], 'a second authentication')
    expect(recorder.of('master-connect').length).toBeGreaterThanOrEqual(2)
    expect(to.authReplies.filter((reply) => reply === 'accepted').length).toBeGreaterThanOrEqual(2)
  })

  /**
   * The master's servers go away and come back on their ports (the broker stays: on NATS the links never notice).
   * Resolves once the master has seen the link subscribe again.
   */
  async function restartServers(to: StandInMaster): Promise<void> {
    const subscribed = to.subscribes
    await to.stopRequests()
    await to.movePublisher(to.publishPort)
    await to.startRequests()
    await to.waitSubscribed(subscribed + 1)
  }

  it('brings its publish link back with its request link after a master restart, not a publish reconnect interval later', async () => {
    const to = await master({ autoAccept: true })
    const transport = withBackoffs(await loadTransport(transportName), { publish: waitingLink(transportName), request: QUICK })
    const { link: linked } = await link(to, { transport })
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed()
    // Within the stand-in's bound (8 s), far below the publish client's own next attempt on TCP (60 s).
    await restartServers(to)
    const published = to.stamped(job('test.ping'))
    await to.publish(published)
    const [got] = await take(stream, 1, 'the job published after the restart')
    expect(got?.job).toEqual(published)
    expect(linked.subscribed).toBe(true)
  })

  it('brings its request link back with its publish link after a master restart, and checks in once both are', async () => {
    const to = await master({ autoAccept: true })
    const transport = withBackoffs(await loadTransport(transportName), { publish: QUICK, request: waitingLink(transportName) })
    // As a master that kept its session key across the restart answers a check-in: the link has nothing to redo.
    to.answer = (load) => (load.cmd === '_minion_event' ? { gen: to.session.current().gen } : {})
    const { link: linked, recorder } = await link(to, { transport })
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed()
    const connects = recorder.of('master-connect').length
    await restartServers(to)
    if (transport.peerSockets !== false) {
      // The request link reconnected (on TCP its own next attempt would be 60 s away) and checked in with the master.
      await to.waitForLoad('_minion_event')
      expect(recorder.of('master-connect').length).toBe(connects + 1)
      expect(linked.status.connected).toBe(true)
    }
    await deadline(linked.send({ cmd: '_minion_event', id: ID, events: [] }, { timeout: 8000 }), 10_000, 'a send after the restart')
    expect(to.authReplies).toEqual(['accepted'])
  })

  it('asks a busy master again after a check-in it refused for its load, instead of authenticating again', async () => {
    const to = await master({ autoAccept: true })
    const { link: linked, recorder } = await link(to)
    await deadline(linked.authenticated, 8000, 'authentication')
    await recorder.waitFor('master-connect')
    // A master just restarted with a thousand minions checking in: the first check-in is refused for its load.
    let checkIns = 0
    to.answer = (load) => {
      if (load.cmd !== '_minion_event') return {}
      if (++checkIns === 1) throw new ServerBusyError(`${to.host}:${to.retPort}`, 1, 0)
      return { gen: to.session.current().gen }
    }
    await restartRequests(to)
    await to.until(() => (to.loads('_minion_event').length >= 2 ? true : undefined), 'a second check-in after the busy refusal')
    await deadline(linked.send({ cmd: '_minion_event', id: ID, events: [] }, { timeout: 1000, tries: 5 }), 8000, 'a send after the check-in')
    expect(to.authReplies).toEqual(['accepted'])
    expect(recorder.of('authenticated')).toHaveLength(1)
  })

  it('subscribes on the publish port the auth reply names, and follows a master that comes back on another', async () => {
    const to = await master({ autoAccept: true })
    const { link: linked, recorder } = await link(to, { publishPort: undefined })
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed(1)
    const first = job('test.ping')
    await to.publish(first)
    expect((await take(stream, 1, 'the job on the port the master named'))[0]?.job.jid).toBe(first.jid)

    // The master restarts with another publish_port: the re-authentication names it, and the stream goes on from there.
    const subscribed = to.subscribes
    await to.movePublisher(await freeLoopbackPort())
    await restartRequests(to)
    await deadline(linked.send({ cmd: '_minion_event', id: ID, events: [] }, { timeout: 1000, tries: 5 }), 8000, 'a send after the restart')
    await recorder.waitFor('authenticated', (event) => event !== recorder.of('authenticated')[0], 'a second authentication')
    await to.waitSubscribed(subscribed + 1)
    const second = job('test.echo', ['moved'])
    await to.publish(second)
    expect((await take(stream, 1, 'the job on the moved port'))[0]?.job.jid).toBe(second.jid)
  })

  it('an explicit publish port wins over the one the auth reply names', async () => {
    const to = await master({ autoAccept: true })
    to.reportedPublishPort = await freeLoopbackPort()
    const { link: linked } = await link(to, { publishPort: to.publishPort })
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed(1)
    const load = job('test.ping')
    await to.publish(load)
    expect((await take(stream, 1, 'the job on the configured port'))[0]?.job.jid).toBe(load.jid)
  })

  it("refuses a publish that expired, or was issued beyond clock_skew ahead, after checking the master's clock once", async () => {
    const to = await master({ autoAccept: true })
    const { link: linked, recorder } = await link(to)
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed(1)
    const now = to.now()
    const expired = to.stamped({ ...job('test.ping'), issued: now - 120_000, expire: now - 60_000 })
    const future = to.stamped({ ...job('test.ping'), issued: now + 600_000, expire: now + 660_000 })
    const fresh = to.stamped(job('test.echo', ['fresh']))
    for (const load of [expired, future, fresh]) await to.publish(load)
    expect((await take(stream, 1, 'the fresh job'))[0]?.job.jid).toBe(fresh['jid'])
    expect(recorder.of('publish-dropped').map((event) => [event.jid, event.reason])).toEqual([
      [expired['jid'], `job ${String(expired['jid'])} refused: expired`],
      [future['jid'], `job ${String(future['jid'])} refused: issued in the future`],
    ])
    // One look at the master's clock for both (at most one per 10 s), not one per stale publish.
    expect(to.authReplies.filter((reply) => reply === 'accepted')).toHaveLength(2)
  })

  it('once its session outlived the lifetime the master named, runs a job only after authenticating again, never from a master it cannot reach', async () => {
    const to = await master({ autoAccept: true })
    const shift = { ms: 0 }
    const clock = { wall: () => Date.now() + shift.ms, monotonic: () => performance.now() + shift.ms }
    to.now = clock.wall
    to.sessionTtlMs = 3_600_000
    const { link: linked, recorder } = await link(to, { clock })
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await deadline(linked.authenticated, 8000, 'authentication')
    await to.waitSubscribed(1)

    // An hour and a minute later, with the master reachable: one _auth renews the session, then the job runs.
    shift.ms += 3_660_000
    const renewed = job('test.echo', ['renewed'])
    await to.publish(renewed)
    expect((await take(stream, 1, 'the job after the renewal'))[0]?.job.jid).toBe(renewed.jid)
    expect(recorder.of('authenticated')).toHaveLength(2)

    // Another hour on, the master's request port is gone: a fresh publish (on its publish port) is refused.
    shift.ms += 3_660_000
    await to.stopRequests()
    const unreachable = job('test.echo', ['unreachable'])
    await to.publish(unreachable)
    // The reader asks for the next job; the link drops this one (the read ends when the link closes).
    void stream.next()
    const dropped = await recorder.waitFor('publish-dropped', (event) => event.jid === unreachable.jid, 'the job under an expired session to be refused')
    expect(dropped.reason).toBe(`job ${String(unreachable.jid)} refused: the master could not be reached to check it`)
    expect(recorder.of('auth-failed').length).toBeGreaterThanOrEqual(1)
  })

  it("keeps reading the master's clock after it closes, so the jids it brought stay remembered while valid", async () => {
    const to = await master({ autoAccept: true })
    // Hand-driven clocks: this host's, and the master's a year ahead of it.
    const local = { wall: 1_700_000_000_000, monotonic: 5_000 }
    const clock = { wall: () => local.wall, monotonic: () => local.monotonic }
    const masterTime = 1_731_536_000_000
    to.now = () => masterTime
    const { link: linked } = await link(to, { clock })
    await deadline(linked.authenticated, 8000, 'authentication')
    expect(linked.masterNow()).toBe(masterTime)
    local.wall += 5_000
    local.monotonic += 5_000
    await deadline(linked.close(), 8000, 'close()')
    expect(linked.masterNow()).toBe(masterTime + 5_000)
    local.wall += 1_000
    local.monotonic += 1_000
    expect(linked.masterNow()).toBe(masterTime + 6_000)
  })

  it('close() is idempotent and bounded: auth waits end, the streams end, returns are spooled, start() is refused', async () => {
    const to = await master({ autoAccept: false })
    const cache = new CryptCache()
    const { link: linked, recorder } = await link(to, { cache })
    const stream = linked.publishes()[Symbol.asyncIterator]()
    await recorder.waitFor('auth-pending')

    await deadline(Promise.all([linked.close(), linked.close()]), 8000, 'close()')
    await expect(linked.authenticated).rejects.toBeInstanceOf(ClosedError)
    expect(await deadline(stream.next(), 8000, 'the publishes to end')).toEqual({ done: true, value: undefined })
    expect(linked.status).toEqual({ connected: false, authenticated: false, closed: true })
    // Closed without ever hearing the master: nothing it could bring is fresh.
    expect(linked.masterNow()).toBe(Number.POSITIVE_INFINITY)
    await expect(linked.start()).rejects.toBeInstanceOf(ClosedError)
    await expect(linked.send({ cmd: '_grains', id: ID, grains: {} })).rejects.toBeInstanceOf(ClosedError)

    const late: JobLoad = job('test.ping') as unknown as JobLoad
    await linked.deliver({ cmd: '_return', id: ID, jid: late.jid, fun: late.fun, fun_args: [], return: true, retcode: 0, success: true })
    const events: string[] = []
    for await (const event of linked.events()) events.push(event.type)
    expect(events).toContain('auth-pending')
    expect(existsSync(join(dir, 'spool', to.host, `${late.jid}.msgpack`))).toBe(true)
    expect(to.loads('_return')).toEqual([])
  })
})
