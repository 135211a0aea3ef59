import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { EauthAuthenticationError, PermissionDeniedError, TokenAuthenticationError, UnknownRunnerError } from '@brine/protocol'
import { RemoteError, remoteCause } from '@brine/core'
// Tests only: a real master in-process.
import { cleanups, natsFor, runCleanups, startMaster, stopNatsServer, tempDir } from '../../master/test/helpers.js'
import { EauthClient, EauthError, RunnerClient, RunnerError, WheelClient, WheelError } from '../src/index.js'

afterEach(runCleanups)
afterAll(stopNatsServer)

describe.each(['zeromq', 'tcp', 'nats'])("the master's refusals come back as their own classes over %s", (transport) => {
  it('a bad password, a token revoked, a wheel call outside the ACL and an unknown runner: the client error names the command, its cause the typed error', async () => {
    const dir = await tempDir()
    await writeFile(join(dir, 'users'), 'alice:wonder\n')
    const nats = await natsFor(transport)
    const { master } = await startMaster(dir, {
      transport,
      ...nats.config,
      token_dir: join(dir, 'tokens'),
      external_auth: { file: { '^filename': join(dir, 'users'), alice: ['@jobs', { '@wheel': ['key.list_all'] }] } },
    })
    const eauth = new EauthClient({ opts: master.opts })
    cleanups.push(() => eauth.close())

    const badPassword = await eauth.mkToken({ eauth: 'file', username: 'alice', password: 'nope' }).catch((error: unknown) => error)
    expect(badPassword).toBeInstanceOf(EauthError)
    expect((badPassword as Error).cause).toBeInstanceOf(RemoteError)
    expect(remoteCause(badPassword)).toBeInstanceOf(EauthAuthenticationError)
    expect(remoteCause(badPassword)).toMatchObject({
      user: 'alice',
      eauth: 'file',
      message: expect.stringContaining('Authentication failure of type "eauth" occurred for user alice'),
    })

    const made = await eauth.mkToken({ eauth: 'file', username: 'alice', password: 'wonder' })
    const wheel = new WheelClient({ opts: master.opts, credentials: { token: made.token } })
    const runner = new RunnerClient({ opts: master.opts, credentials: { token: made.token } })
    const root = new RunnerClient({ opts: master.opts })
    cleanups.push(
      () => wheel.close(),
      () => runner.close(),
      () => root.close(),
    )

    const denied = await wheel.cmd('key.delete', { match: 'web1' }).catch((error: unknown) => error)
    expect(denied).toBeInstanceOf(WheelError)
    expect(remoteCause(denied)).toBeInstanceOf(PermissionDeniedError)
    expect(remoteCause(denied)).toMatchObject({ command: 'wheel', user: 'alice', message: expect.stringContaining('may not run wheel "key.delete"') })

    const unknown = await root.cmd('no_such.runner').catch((error: unknown) => error)
    expect(unknown).toBeInstanceOf(RunnerError)
    expect(remoteCause(unknown)).toBeInstanceOf(UnknownRunnerError)
    expect(remoteCause(unknown)).toMatchObject({ fun: 'no_such.runner', available: expect.arrayContaining(['jobs.list_jobs']) })

    expect(await eauth.rmToken(made.token)).toBe(true)
    const revoked = await runner.cmd('jobs.list_jobs').catch((error: unknown) => error)
    expect(revoked).toBeInstanceOf(RunnerError)
    expect(remoteCause(revoked)).toBeInstanceOf(TokenAuthenticationError)
  })
})
