import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { BUS_DROPPED_TAG, generateJid, type BusEvent } from '@brine/protocol'
import { parsePublicKeys, parseSecretKeys, publicKeysOf, formatPublicKeys } from '@brine/crypt'
// Tests only: a real master in-process (worker_threads: 0) and the master tests' config helpers.
import { Master } from '../../master/src/index.js'
import { cleanups, masterConfig, runCleanups, stopNatsServer, tempDir } from '../../master/test/helpers.js'
import { RunnerError, WheelError } from '../src/errors.js'
import { RunnerClient } from '../src/runner-client.js'
import { WheelClient } from '../src/wheel-client.js'
import { LocalClient } from '../src/local-client.js'
import { MasterEvent } from '../src/master-event.js'

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
    expect(await wheel.cmd('key.list_all')).toEqual({
      minions: ['db9'],
      minions_pre: [],
      minions_rejected: [],
      minions_denied: [],
      local: ['master.key', 'master.pub'],
    })
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

  it("runner, followed as salt-run does: progress events in order before the return; a failure's text; a refusal; dropped events said", async () => {
    const master = await realMaster(transport)
    const runner = new RunnerClient({ opts: master.opts })
    cleanups.push(() => runner.close())
    const events = new MasterEvent({ sockDir: master.opts.sock_dir })
    cleanups.push(() => events.close())
    await events.connect()
    const seen: unknown[] = []
    const onProgress = (data: Record<string, unknown>): void => void seen.push(data['message'])
    const streamed = await runner.cmdFollowed('test.stream', [], {}, events, { onProgress })
    expect(streamed).toEqual({ jid: expect.stringMatching(/^\d{20}$/), return: true, success: true })
    expect(seen).toEqual(Array.from({ length: 99 }, (_, index) => `Runner is ${index + 1}% done`))
    const failed = await runner.cmdFollowed('jobs.print_job', [], {}, events, { onProgress })
    expect(failed.success).toBe(false)
    expect(failed.return).toMatch(/^Exception occurred in runner jobs.print_job/)
    await expect(runner.cmdFollowed('nope.nothing', [], {}, events, { onProgress })).rejects.toThrow(RunnerError)
    // A bus that had to drop events for this reader may have dropped the return: said, not waited out.
    const dropping = {
      async *iter(): AsyncIterable<BusEvent> {
        yield { tag: BUS_DROPPED_TAG, data: { count: 3 } }
      },
    }
    await expect(runner.cmdFollowed('test.sleep', [0], {}, dropping, { onProgress })).rejects.toThrow(
      /dropped 3 events for this reader while runner test\.sleep \(jid \d{20}\) ran/,
    )
    expect(seen).toHaveLength(99)
  })
})
