import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { generateJid, type ReturnLoad } from '@brine/protocol'
import { type Caller } from '../src/index.js'
import { ReturnRefusedError } from '@brine/protocol'
import { runCleanups, startMasterWithMinions, stopNatsServer, tempDir } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

describe.each(TRANSPORTS)("a schedule's returns and the audit over %s", (transport) => {
  it("stores a schedule's return as a job of its own, refuses another job's jid and a future one, and audits every call", async () => {
    const dir = await tempDir()
    const { master, events, minions } = await startMasterWithMinions(dir, transport, ['web1', 'db1'])
    const service = master.service
    const ret = (id: string, jid: string): ReturnLoad => ({
      cmd: '_return',
      id,
      jid,
      fun: 'test.echo',
      fun_args: ['tick'],
      return: 'tick',
      retcode: 0,
      success: true,
      schedule: 'tick',
    })

    const own = generateJid()
    expect(await service.minionReturn('web1', ret('web1', own))).toBe(true)
    expect(await service.minionReturn('web1', ret('web1', own))).toBe(false) // the same return again: stored once
    const job = await master.jobs.getJob(own)
    expect(job).toMatchObject({ minions: ['web1'], load: { fun: 'test.echo', tgt: 'web1', tgt_type: 'list', user: 'Schedule', schedule: 'tick' } })
    expect(Object.keys(job!.returns)).toEqual(['web1'])
    expect((await events.next(`salt/job/${own}/ret/web1`)).data).toMatchObject({ schedule: 'tick', return: 'tick' })

    // A real job's jid (published to both) cannot be taken over as a schedule's, nor can another minion's schedule jid.
    const alice: Caller = { user: 'alice', auth: 'eauth', eauth: 'file', permissions: ['test.*'], via: { client: 'api', address: '10.1.2.3' } }
    const published = await service.publish(alice, {
      tgt: '*',
      tgt_type: 'glob',
      fun: 'test.ping',
      arg: [],
      kwarg: { password: 'hunter2' },
      ret: '',
      user: 'alice',
    })
    await expect(service.minionReturn('db1', ret('db1', published.jid))).rejects.toThrow(ReturnRefusedError)
    await expect(service.minionReturn('db1', ret('db1', own))).rejects.toThrow(/jid of another job/)
    // Made by hand: generateJid never goes back after a future jid, and the other tests share it.
    const future = `${new Date(Date.now() + 3_600_000).toISOString().replace(/\D/g, '').slice(0, 14)}000000`
    await expect(service.minionReturn('web1', ret('web1', future))).rejects.toThrow(/future jid/)
    expect(await master.jobs.getJob(future)).toBeUndefined()

    await service.runner(alice, { fun: 'manage.down' }).catch(() => undefined)
    const audited = await master.audit.query({ user: 'alice' })
    expect(audited.map((record) => [record.cmd, record.fun, record.result])).toEqual([
      ['publish', 'test.ping', 'accepted'],
      ['runner', 'manage.down', 'refused'],
    ])
    expect(audited[0]).toMatchObject({ jid: published.jid, kwarg: { password: '******' }, via: { client: 'api', address: '10.1.2.3' }, eauth: 'file' })
    expect(audited[0]!.minions!.sort()).toEqual(['db1', 'web1'])
    expect(audited[1]!.reason).toMatch(/may not run runner "manage.down"/)
  })
})
