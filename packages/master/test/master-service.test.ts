import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { RemoteError } from '@brine/core'
import { Authorizer, masterCaller, permits, rootCaller, type Caller } from '../src/index.js'
import { PermissionDeniedError } from '@brine/protocol'
import { addressOf, clearClient, runCleanups, startMaster, startMasterWithMinions, stopNatsServer, tempDir } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const

/** A caller with ACL entries, as external auth will make them (the API issue); built by hand here. */
const user = (name: string, permissions: Caller['permissions']): Caller => ({ user: name, auth: 'eauth', eauth: 'file', permissions })

const refusedWith = async (fn: () => unknown): Promise<PermissionDeniedError> => {
  try {
    await fn()
  } catch (error) {
    expect(error).toBeInstanceOf(PermissionDeniedError)
    return error as PermissionDeniedError
  }
  throw new Error('expected a PermissionDeniedError')
}

describe('authorize', () => {
  const authorizer = new Authorizer({ rootKey: 'the-root-key' })

  it('turns the root key into a caller with every permission, under the user the load names', async () => {
    expect(await authorizer.authorize({ cmd: 'publish', key: 'the-root-key', user: 'sudo_alice' })).toEqual({
      user: 'sudo_alice',
      auth: 'key',
      permissions: 'all',
    })
    expect(await authorizer.authorize({ cmd: 'wheel', key: 'the-root-key' })).toEqual(rootCaller('root'))
  })

  it('refuses a wrong key, no credentials and (without external_auth) eauth, naming the command', async () => {
    const wrong = await refusedWith(() => authorizer.authorize({ cmd: 'publish', key: 'nope', user: 'mallory' }))
    expect(wrong.message).toBe('permission denied for "publish": the root key is missing or wrong')
    expect(wrong).toMatchObject({ command: 'publish', user: 'mallory' })
    const none = await refusedWith(() => authorizer.authorize({ cmd: 'runner', fun: 'jobs.list_jobs' } as never))
    expect(none.message).toMatch(/^permission denied for "runner": .*no credentials/)
    const eauth = await refusedWith(() => authorizer.authorize({ cmd: 'wheel', eauth: 'pam', username: 'bob', password: 'x' }))
    expect(eauth.message).toMatch(/^permission denied for "wheel": external auth .* not configured/)
    expect(eauth.user).toBe('bob')
  })
})

describe('permits (Salt external_auth rules)', () => {
  const minionsOf = (target: string): string[] => ({ 'web*': ['web1', 'web2'], 'db*': ['db1'], 'G@role:none': [] })[target] ?? []

  it('root and the master may do anything', () => {
    expect(permits(rootCaller(), { kind: 'publish', fun: 'cmd.run', minions: ['db1'] }, minionsOf)).toBe(true)
    expect(permits(masterCaller('alice'), { kind: 'wheel', fun: 'key.delete' }, minionsOf)).toBe(true)
  })

  it('function regexes match from the start, for every minion; a target entry covers only the minions its target selects', () => {
    const alice = user('alice', ['test.*', { 'web*': ['cmd.run', 'pkg\\.(list|version)'] }, { 'G@role:none': ['.*'] }])
    expect(permits(alice, { kind: 'publish', fun: 'test.ping', minions: ['db1', 'web1'] }, minionsOf)).toBe(true)
    expect(permits(alice, { kind: 'publish', fun: 'cmd.run', minions: ['web1', 'web2'] }, minionsOf)).toBe(true)
    expect(permits(alice, { kind: 'publish', fun: 'pkg.version', minions: ['web2'] }, minionsOf)).toBe(true)
    // db1 is outside web*; a target that selects no minion permits nothing.
    expect(permits(alice, { kind: 'publish', fun: 'cmd.run', minions: ['web1', 'db1'] }, minionsOf)).toBe(false)
    expect(permits(alice, { kind: 'publish', fun: 'state.apply', minions: ['web1'] }, minionsOf)).toBe(false)
    // Anchored at the start only, as Salt's re.match: 'test.*' does not match 'mytest.ping'.
    expect(permits(alice, { kind: 'publish', fun: 'mytest.ping', minions: ['web1'] }, minionsOf)).toBe(false)
    // find_job is always allowed: the client's follow-up to a job it may run.
    expect(permits(user('nobody', []), { kind: 'publish', fun: 'saltutil.find_job', minions: ['db1'] }, minionsOf)).toBe(true)
  })

  it('runners and wheels only through @ entries, never a plain glob', () => {
    const glob = user('g', ['.*'])
    expect(permits(glob, { kind: 'runner', fun: 'jobs.list_jobs' }, minionsOf)).toBe(false)
    expect(permits(glob, { kind: 'wheel', fun: 'key.list_all' }, minionsOf)).toBe(false)
    const ops = user('ops', ['@runner', { '@wheel': ['key\\.list_.*', 'key.finger'] }])
    expect(permits(ops, { kind: 'runner', fun: 'manage.down' }, minionsOf)).toBe(true)
    expect(permits(ops, { kind: 'wheel', fun: 'key.list_all' }, minionsOf)).toBe(true)
    expect(permits(ops, { kind: 'wheel', fun: 'key.delete' }, minionsOf)).toBe(false)
    const jobs = user('j', ['@jobs', { '@manage': ['up', 'status'] }])
    expect(permits(jobs, { kind: 'runner', fun: 'jobs.lookup_jid' }, minionsOf)).toBe(true)
    expect(permits(jobs, { kind: 'runner', fun: 'manage.status' }, minionsOf)).toBe(true)
    expect(permits(jobs, { kind: 'runner', fun: 'manage.down' }, minionsOf)).toBe(false)
  })
})

describe.each(TRANSPORTS)('MasterService over %s', (transport) => {
  it('checks every publish, runner and wheel against the caller; a refusal names the command, the user and the function', async () => {
    const dir = await tempDir()
    const { master, events, minions } = await startMasterWithMinions(dir, transport, ['web1', 'db1'])
    const service = master.service
    const alice = user('alice', [{ 'web*': ['test.*'] }, { '@runner': ['jobs\\..*'] }])

    // The load claims root; the job is recorded under the caller's name.
    const job = { tgt: '*', tgt_type: 'glob' as const, fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' }
    const tooWide = await service.publish(alice, job).catch((error: unknown) => error)
    expect(tooWide).toBeInstanceOf(PermissionDeniedError)
    expect((tooWide as Error).message).toMatch(/^permission denied for "publish": user "alice" may not run "test.ping" on (db1, web1|web1, db1)$/)
    expect(tooWide).toMatchObject({ command: 'publish', user: 'alice', fun: 'test.ping' })
    expect(events.events.filter((event) => event.tag.endsWith('/new'))).toHaveLength(0)

    const allowed = await service.publish(alice, { ...job, tgt: 'web1' })
    expect(allowed.minions).toEqual(['web1'])
    expect(minions[0]!.open(await minions[0]!.nthPublish(1))).toMatchObject({ jid: allowed.jid, fun: 'test.ping', user: 'alice' })
    expect((await events.next(`salt/job/${allowed.jid}/new`)).data).toMatchObject({ user: 'alice', minions: ['web1'] })

    expect(await service.runner(alice, { fun: 'jobs.lookup_jid', arg: [allowed.jid] })).toMatchObject({ success: true, return: {} })
    const runner = await service.runner(alice, { fun: 'manage.down' }).catch((error: unknown) => error)
    expect((runner as Error).message).toBe('permission denied for "runner": user "alice" may not run runner "manage.down"')
    const wheel = await service.wheel(alice, { fun: 'key.delete', match: 'db1' }).catch((error: unknown) => error)
    expect((wheel as Error).message).toBe('permission denied for "wheel": user "alice" may not run wheel "key.delete"')
    expect((await master.store.list()).minions.sort()).toEqual(['db1', 'web1'])
    // The runner ran as alice: its events carry her name.
    expect(events.events.filter((event) => event.tag.startsWith('salt/run/') && event.tag.endsWith('/new')).map((event) => event.data['user'])).toEqual([
      'alice',
    ])
  })

  it('refuses a wire request without credentials for every command behind authorize', async () => {
    const { master } = await startMaster(await tempDir(), { transport })
    const client = await clearClient(transport, addressOf(master))
    const loads = [
      { cmd: 'publish', tgt: '*', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' },
      { cmd: 'wheel', fun: 'key.list_all' },
      { cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {} },
    ]
    for (const load of loads) {
      const error = await client.send({ enc: 'clear', load }).then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(error, load.cmd).toBeInstanceOf(RemoteError)
      expect((error as RemoteError).remoteName).toBe('PermissionDeniedError')
      expect((error as Error).message).toContain(`permission denied for "${load.cmd}"`)
    }
    // With the root key the same loads go through.
    const reply = await client.send({ enc: 'clear', load: { ...loads[1], key: master.rootKey } })
    expect(reply).toMatchObject({ return: { minions: [], minions_pre: [], minions_rejected: [], minions_denied: [] }, success: true, user: 'root' })
    expect((reply as { tag: string; jid: string }).tag).toBe(`salt/wheel/${(reply as { jid: string }).jid}`)
  })
})
