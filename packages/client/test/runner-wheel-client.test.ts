import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { generateJid } from '@brine/common'
import { parsePublicKeys, parseSecretKeys, publicKeysOf, formatPublicKeys } from '@brine/crypt'
// Tests only: a real master in-process (worker_threads: 0) and the master tests' config helpers.
import { Master } from '../../master/src/index.js'
import { cleanups, masterConfig, runCleanups, stopNatsServer, tempDir } from '../../master/test/helpers.js'
import { RunnerError, WheelError } from '../src/errors.js'
import { RunnerClient } from '../src/runner-client.js'
import { WheelClient } from '../src/wheel-client.js'
import { LocalClient } from '../src/local-client.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

async function realMaster(transport: string): Promise<Master> {
  const master = new Master(await masterConfig(await tempDir(), { transport }))
  cleanups.push(() => master.stop())
  await master.start()
  return master
}

describe.each(['zeromq', 'tcp', 'nats'])('RunnerClient and WheelClient against a real master over %s', (transport) => {
  it('wheel: gen_accept pre-seeds a minion key; list, finger, delete; unknown functions are refused', async () => {
    const master = await realMaster(transport)
    const wheel = new WheelClient({ opts: master.opts })
    cleanups.push(() => wheel.close())
    const { pub, priv } = (await wheel.cmd('key.gen_accept', { id_: 'db9' })) as { pub: string; priv: string }
    // The pair belongs together, and the public half is the one now accepted.
    expect(formatPublicKeys(publicKeysOf(parseSecretKeys(priv, 'priv')))).toBe(pub)
    expect(await master.store.acceptedKeys('db9')).toEqual(parsePublicKeys(pub, 'pub'))
    expect(await wheel.cmd('key.gen_accept', { id_: 'db9' })).toEqual({})
    expect(await wheel.cmd('key.list_all')).toEqual({ minions: ['db9'], minions_pre: [], minions_rejected: [], minions_denied: [], local: ['master.key', 'master.pub'] })
    expect(Object.keys(((await wheel.cmd('key.finger', { match: 'db*' })) as { minions: object }).minions)).toEqual(['db9'])
    expect(await wheel.cmd('key.delete', { match: 'db9' })).toEqual({ minions: ['db9'] })
    const error = await wheel.cmd('key.nope').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(WheelError)
    expect((error as Error).message).toMatch(/unknown wheel function "key.nope" \(available: .*key.gen_accept/)
  })

  it('runner: reads the job cache, reports a failing runner, refuses an unknown one; shares the root key with LocalClient', async () => {
    const master = await realMaster(transport)
    const runner = new RunnerClient({ opts: master.opts })
    cleanups.push(() => runner.close())
    // Dated now: a job older than keep_jobs may go with the master's start-up prune, which runs beside the test.
    const jid = generateJid()
    await master.jobs.saveJob(jid, { jid, fun: 'test.ping', arg: [], kwarg: {}, tgt: '*', tgt_type: 'glob', ret: '', user: 'root' }, ['web1', 'web2'])
    await master.jobs.saveReturn(jid, 'web1', { cmd: '_return', id: 'web1', jid, fun: 'test.ping', fun_args: [], return: true, retcode: 0, success: true })
    expect(await runner.cmd('jobs.lookup_jid', [jid])).toEqual({ web1: true })
    expect(await runner.cmd('jobs.lookup_jid', [jid], { missing: true })).toEqual({ web1: true, web2: 'Minion did not return' })
    const full = await runner.cmdFull('manage.status', [], { timeout: 0 })
    expect(full).toEqual({ jid: expect.stringMatching(/^\d{20}$/), return: { up: [], down: [] }, success: true })
    const failed = await runner.cmdFull('jobs.print_job')
    expect(failed.success).toBe(false)
    expect(failed.return).toMatch(/^Exception occurred in runner jobs.print_job/)
    const unknown = await runner.cmd('nope.nothing').catch((caught: unknown) => caught)
    expect(unknown).toBeInstanceOf(RunnerError)
    expect((unknown as Error).message).toMatch(/unknown runner "nope.nothing" \(available: [^)]*\bjobs\.active, /)
    // LocalClient goes through the same clear-request plumbing.
    const local = new LocalClient({ opts: master.opts })
    cleanups.push(() => local.close())
    expect(await local.cmdAsync('*', 'test.ping')).toBe('')
  })
})
