/**
 * The minion daemon against a stand-in master over real sockets, on both transports: auth
 * (pending → accepted), grains and the start event, publishes and returns in Salt's shapes,
 * dropped forgeries, session rotation, spooling while the master is away, and stop().
 */
import { existsSync, statSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest'
import { generateKeys, sealPublish } from '@brine/crypt'
import { decode, ServerBusyError, silentLogger } from '@brine/core'
import { Minion } from '../src/minion.js'
import type { MinionEvent } from '@brine/link'
import { deadline } from './modules-fixture.js'
import { Recorder as EventRecorder } from './recorder.js'
import { job, StandInMaster, stopNatsServer, testMinionConfig } from './stand-in-master.js'

const ID = 'minion-a'

/** A minion's lifecycle events, recorded. */
class Recorder extends EventRecorder<MinionEvent> {}

afterAll(stopNatsServer)

describe.each(['zeromq', 'tcp', 'nats'])('minion daemon over %s', (transportName) => {
  let dir: string
  let master: StandInMaster | undefined
  let minion: Minion | undefined

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'brine-minion-'))
  })

  afterEach(async () => {
    await minion?.stop()
    await master?.close()
    minion = undefined
    master = undefined
    await rm(dir, { recursive: true, force: true })
  })

  async function startMinion(autoAccept: boolean, extra: Record<string, unknown> = {}): Promise<{ master: StandInMaster; minion: Minion; recorder: Recorder }> {
    master ??= await StandInMaster.start(transportName, dir, { autoAccept })
    const opts = await testMinionConfig(transportName, dir, master, ID, { name: 'minion', extra })
    minion = new Minion(opts, { logger: silentLogger })
    const recorder = new Recorder(minion)
    await minion.start()
    return { master, minion, recorder }
  }

  /** An accepted, subscribed minion. */
  async function ready(): Promise<{ master: StandInMaster; minion: Minion; recorder: Recorder }> {
    const started = await startMinion(true)
    await deadline(started.minion.authenticated, 8000, 'first authentication')
    await started.master.waitSubscribed()
    return started
  }

  it('waits while pending, authenticates once accepted, then sends grains and the start event', async () => {
    const { master, minion, recorder } = await startMinion(false)
    await recorder.waitFor('auth-pending')
    expect(await master.store.state(ID)).toBe('pending')
    expect(recorder.of('authenticated')).toHaveLength(0)

    await master.store.accept(ID)
    const auth = await recorder.waitFor('authenticated')
    expect(auth.firstContact).toBe(true)
    await deadline(minion.authenticated, 8000, 'authenticated promise')
    expect(existsSync(join(dir, 'minion-pki', 'minion_master.pub'))).toBe(true)

    const grains = await master.waitForLoad('_grains')
    expect(grains.id).toBe(ID)
    expect((grains.grains as Record<string, unknown>).id).toBe(ID)
    const start = await master.waitForLoad('_minion_event')
    const events = start.events as { tag: string; data: Record<string, unknown> }[]
    expect(events.map((event) => event.tag)).toEqual([`salt/minion/${ID}/start`, 'minion_start'])
    expect(events[0]?.data).toMatchObject({ cmd: '_minion_event', id: ID, pretag: null, tag: `salt/minion/${ID}/start` })
    expect(events[0]?.data.data).toMatch(new RegExp(`^Minion ${ID} started at \\w{3} \\w{3} [ \\d]\\d \\d\\d:\\d\\d:\\d\\d \\d{4}$`))
  })

  it('sends its grains and start event again while the master refuses them as busy, until it takes each once', async () => {
    master = await StandInMaster.start(transportName, dir, { autoAccept: true })
    // A master busy with a herd of _auths refuses what it cannot take now (ServerBusyError): the first two of each.
    const refusals = new Map([
      ['_grains', 2],
      ['_minion_event', 2],
    ])
    master.refuseSealed = (load) => {
      const left = refusals.get(String(load.cmd)) ?? 0
      refusals.set(String(load.cmd), left - 1)
      return left > 0 ? new ServerBusyError('the stand-in master', 1, 0) : undefined
    }
    await startMinion(true)
    const start = await master.waitForLoad('_minion_event')
    expect((start.events as { tag: string }[]).map((event) => event.tag)).toEqual([`salt/minion/${ID}/start`, 'minion_start'])
    expect(master.loads('_grains')).toHaveLength(1)
    expect(master.refused.map((load) => load.cmd)).toEqual(['_grains', '_grains', '_minion_event', '_minion_event'])
  })

  it('keeps asking, slowly, while rejected, and is served once the operator deletes and accepts the key', async () => {
    const { master, recorder } = await startMinion(false)
    await recorder.waitFor('auth-pending')
    await master.store.reject(ID)
    const rejected = await recorder.waitFor('auth-rejected')
    expect(rejected.reason).toBe('rejected')
    expect(rejected.waitMs).toBeGreaterThan(recorder.of('auth-pending')[0]?.waitMs ?? Infinity)
    await master.store.delete(ID)
    master.autoAccept = true
    await recorder.waitFor('authenticated', () => true, 'authenticated after the key was deleted', 15_000)
  })

  it('refuses a master whose key does not match master_finger and pins nothing', async () => {
    const { master, minion, recorder } = await startMinion(true, { master_finger: 'ab:'.repeat(31) + 'ab' })
    const failed = await recorder.waitFor('auth-failed')
    expect(failed.error).toBe('MasterKeyMismatchError')
    expect(master.authReplies).toContain('accepted') // the master answered; the minion did not trust it
    expect(existsSync(join(dir, 'minion-pki', 'minion_master.pub'))).toBe(false)
    expect(recorder.of('authenticated')).toHaveLength(0)
    await minion.stop()
    await expect(minion.authenticated).rejects.toThrow(/closed/)
  })

  it('answers a broadcast test.ping with a sealed return in Salt’s shape and ignores a publish for others', async () => {
    const { master, recorder } = await ready()
    const other = job('test.ping', [], { tgt: 'web-*' })
    const ping = job('test.ping')
    await master.publish(other)
    await master.publish(ping)

    const ignored = await recorder.waitFor('publish-ignored')
    expect(ignored).toMatchObject({ jid: other.jid, reason: 'not targeted' })
    expect(await master.waitForLoad('_return', ping.jid as string)).toEqual({
      cmd: '_return',
      id: ID,
      jid: ping.jid,
      fun: 'test.ping',
      fun_args: [],
      return: true,
      retcode: 0,
      success: true,
    })
    await recorder.waitFor('returned', (event) => event.jid === ping.jid && !event.fromSpool, 'return acknowledged')
    expect(master.loads('_return', other.jid as string)).toHaveLength(0)
  })

  it('matches Python regexes and master-expanded nodegroups, ignores a hostile regex and runs the next job', async () => {
    const started = await startMinion(true, { grains: { role: `${'a'.repeat(40)}!` } })
    await deadline(started.minion.authenticated, 8000, 'first authentication')
    await started.master.waitSubscribed()
    const { master, minion, recorder } = started
    const pcre = job('test.echo', ['pcre'], { tgt: '(?i)MINION-(?P<letter>a)$', tgt_type: 'pcre' })
    // What a master publishes for a nodegroup: this minion has no nodegroups of its own.
    const grouped = job('test.echo', ['grouped'], { tgt: '( ( minion-* ) and not ( L@web1,db1 ) )', tgt_type: 'compound' })
    // 2^40 ways to split the grain's a's: stopped at the regex deadline, then the publish is not for this minion.
    const hostile = job('test.ping', [], { tgt: `P@role:(a+)+$ or L@${transportName}`, tgt_type: 'compound' })
    const after = job('test.echo', ['after'], { tgt: ID })
    for (const load of [pcre, grouped, hostile, after]) await master.publish(load)

    expect((await master.waitForLoad('_return', pcre.jid as string)).return).toBe('pcre')
    expect((await master.waitForLoad('_return', grouped.jid as string)).return).toBe('grouped')
    expect((await master.waitForLoad('_return', after.jid as string)).return).toBe('after')
    expect(recorder.of('publish-ignored').filter((event) => event.jid === hostile.jid)).toEqual([
      { type: 'publish-ignored', master: started.minion.master, jid: hostile.jid, fun: 'test.ping', reason: 'not targeted' },
    ])
    expect(master.loads('_return', hostile.jid as string)).toHaveLength(0)
  })

  it('drops tampered, forged and malformed publishes and still runs the next job', async () => {
    const { master, recorder } = await ready()
    const tampered = sealPublish(job('test.ping'), master.session.current(), master.keys.sign.secretKey)
    tampered.ciphertext[0] = (tampered.ciphertext[0] ?? 0) ^ 0xff
    const forged = sealPublish(job('test.ping'), master.session.current(), generateKeys().sign.secretKey)
    await master.publishRaw(tampered)
    await master.publishRaw(forged)
    await master.publishRaw({ enc: 'clear', load: job('test.ping') })
    const good = job('test.echo', ['still here'])
    await master.publish(good)

    expect((await master.waitForLoad('_return', good.jid as string)).return).toBe('still here')
    expect(recorder.of('publish-dropped').map((event) => event.reason.split(':')[0])).toEqual([
      'SignatureError',
      'SignatureError',
      'not a sealed publish envelope',
    ])
    expect(master.loads('_return')).toHaveLength(1)
  })

  it('re-authenticates when the session key rotates and runs the job it was holding', async () => {
    const { master, recorder } = await ready()
    const before = recorder.of('authenticated').length
    const rotated = master.session.rotate()
    const ping = job('test.ping')
    await master.publish(ping)

    expect((await master.waitForLoad('_return', ping.jid as string)).return).toBe(true)
    const auths = recorder.of('authenticated')
    expect(auths.length).toBe(before + 1)
    expect(auths.at(-1)?.gen).toBe(rotated.gen)
  })

  it('spools a return while the master is away and delivers it once when it is back', async () => {
    const { master, recorder } = await ready()
    await master.stopRequests()
    const ping = job('test.ping')
    await master.publish(ping)

    const spooled = await recorder.waitFor('spooled', (event) => event.jid === ping.jid, 'return spooled')
    expect(spooled.file).toBe(join(dir, 'minion-cache', 'minion', 'spool', `${ping.jid as string}.msgpack`))
    expect(statSync(spooled.file).mode & 0o777).toBe(0o600)
    expect(decode(await readFile(spooled.file))).toMatchObject({ cmd: '_return', id: ID, jid: ping.jid, return: true })

    await master.startRequests()
    await recorder.waitFor('returned', (event) => event.jid === ping.jid && event.fromSpool, 'spooled return delivered')
    expect(existsSync(spooled.file)).toBe(false)
    // One more round trip, so anything still on its way has arrived by now.
    const next = job('test.ping')
    await master.publish(next)
    await master.waitForLoad('_return', next.jid as string)
    expect(recorder.of('returned').filter((event) => event.jid === ping.jid)).toHaveLength(1)
    // ZeroMQ's Dealer also delivers the tries that timed out while the master was away; every
    // copy is the same return, which the master stores once per (jid, id).
    const copies = master.loads('_return', ping.jid as string)
    expect(copies.length).toBeGreaterThanOrEqual(1)
    for (const copy of copies) expect(copy).toEqual(copies[0])
    if (transportName === 'tcp') expect(copies).toHaveLength(1)
  })

  it('delivers returns spooled before a restart once the next run authenticates', async () => {
    const first = await ready()
    await first.master.stopRequests()
    const ping = job('test.ping')
    await first.master.publish(ping)
    const spooled = await first.recorder.waitFor('spooled', (event) => event.jid === ping.jid, 'return spooled')
    await first.minion.stop()

    await first.master.startRequests()
    const second = await startMinion(true)
    expect(second.minion).not.toBe(first.minion)
    await second.recorder.waitFor('returned', (event) => event.jid === ping.jid && event.fromSpool, 'spooled return delivered after restart')
    expect(existsSync(spooled.file)).toBe(false)
    expect(first.master.loads('_return', ping.jid as string)[0]).toMatchObject({ id: ID, return: true, success: true })
    await first.minion.stop() // idempotent after the fact
  })

  it('spools a return still in flight when stop() is called', async () => {
    const { master, minion, recorder } = await startMinion(true, { return_retry_timer: 30, return_retry_timer_max: 30 })
    await deadline(minion.authenticated, 8000, 'first authentication')
    await master.waitSubscribed()
    await master.stopRequests()
    const ping = job('test.ping')
    await master.publish(ping)
    await recorder.waitFor('job-received', (event) => event.jid === ping.jid, 'test.ping received')
    // The function has finished and its return is waiting for an acknowledgement that cannot come.
    await deadline(
      (async () => {
        while (minion.jobs.size > 0 || minion.runningJobs === 0) await new Promise((resolve) => setImmediate(resolve))
      })(),
      8000,
      'the job to finish and its return to be in flight',
    )
    await minion.stop()
    const spooled = recorder.of('spooled').find((event) => event.jid === ping.jid)
    expect(spooled?.file).toBeDefined()
    expect(existsSync(spooled?.file ?? '')).toBe(true)
    expect(recorder.of('job-killed')).toHaveLength(0)
  })

  it('runs cmd.run for a list target end to end, and stop() kills running jobs without returning them', async () => {
    const { master, minion, recorder } = await ready()
    const run = job('cmd.run', ['echo hello from $0'], { tgt: [ID], tgt_type: 'list' })
    await master.publish(run, [ID])
    expect(await master.waitForLoad('_return', run.jid as string)).toMatchObject({
      fun: 'cmd.run',
      fun_args: ['echo hello from $0'],
      return: expect.stringMatching(/^hello from /),
      retcode: 0,
      success: true,
    })

    const sleep = job('test.sleep', [30])
    await master.publish(sleep)
    await recorder.waitFor('job-received', (event) => event.jid === sleep.jid, 'test.sleep received')
    expect(minion.jobs.get(sleep.jid as string)?.fun).toBe('test.sleep')
    await deadline(Promise.all([minion.stop(), minion.stop()]), 8000, 'stop()')
    expect(recorder.of('job-killed').map((event) => event.jid)).toEqual([sleep.jid])
    expect(master.loads('_return', sleep.jid as string)).toHaveLength(0)
    expect(recorder.of('stopped')).toHaveLength(1)
  })
})
