import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import bcrypt from 'bcryptjs'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { LoginThrottle } from '@brine/common'
import { createLogger, LogLimiter, RemoteError } from '@brine/core'
import { ExternalAuth, FileAuthBackend, fileBackendSettings, TokenStore } from '../src/index.js'
import { deadline } from '@brine/transport-compliance'
import { addressOf, clearClient, FakeMinion, runCleanups, startMaster, stopNatsServer, tempDir, WAIT_MS, watchSubscribers } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const
// The threads run the built worker script, as the master does (`npm test` builds before vitest).
const workerScript = new URL('../dist/request-worker.js', import.meta.url)

/** A master with the file eauth backend (alice and bob, bcrypt), over `transport`, and a clear client to it. */
async function loginMaster(transport: string, extra: Record<string, unknown>) {
  const dir = await tempDir()
  await writeFile(join(dir, 'htpasswd'), `alice:${bcrypt.hashSync('wonder', 6)}\nbob:${bcrypt.hashSync('builder', 6)}\n`)
  const { master, events } = await startMaster(
    dir,
    {
      transport,
      auto_accept: true,
      token_dir: join(dir, 'tokens'),
      external_auth: { file: { '^filename': join(dir, 'htpasswd'), '^filetype': 'htpasswd', alice: ['.*'], bob: ['.*'] } },
      ...extra,
    },
    { workerScript },
  )
  const address = addressOf(master)
  const client = await clearClient(transport, address)
  /** The reply, or `{refused: <error name>, message, context}`. */
  const send = (load: Record<string, unknown>, timeout = WAIT_MS): Promise<unknown> =>
    client.send({ enc: 'clear', load }, { timeout }).catch((error: unknown) => {
      if (error instanceof RemoteError) return { refused: error.remoteName, message: error.message, context: error.context }
      throw error
    })
  return { master, events, address, send }
}

const login = (username: string, password: string): Record<string, unknown> => ({ cmd: 'mk_token', eauth: 'file', username, password })

describe('the login throttle', () => {
  it('counts failures per user and per address in a window; a success takes its attempt back; another address is unaffected', () => {
    let now = 0
    const throttle = new LoginThrottle({ perUser: 2, perAddress: 3, windowMs: 1000 }, () => now)
    throttle.begin('alice', '10.0.0.1')
    throttle.begin('alice', '10.0.0.1')
    expect(() => throttle.begin('alice', '10.0.0.2')).toThrow(
      expect.objectContaining({ name: 'LoginRateLimitedError', key: 'eauth_rate_limit_user', limit: 2, retryAfterMs: 1000 }),
    )
    throttle.begin('bob', '10.0.0.1').succeeded()
    throttle.begin('carol', '10.0.0.1')
    now = 400
    expect(() => throttle.begin('dave', '10.0.0.1')).toThrow(
      expect.objectContaining({ name: 'LoginRateLimitedError', key: 'eauth_rate_limit_address', retryAfterMs: 600 }),
    )
    expect(() => throttle.begin('dave', '10.0.0.2')).not.toThrow()
    now = 1000
    expect(() => throttle.begin('alice', '10.0.0.1')).not.toThrow()
  })
})

describe('failed-login warnings', () => {
  it('a flood of failed logins logs the burst, then one summary line per window with the count of the rest', async () => {
    const dir = await tempDir()
    await writeFile(join(dir, 'users'), 'alice:pw\n')
    const lines: string[] = []
    const logger = createLogger({ level: 'warning', write: (line) => lines.push(line) })
    const external = new ExternalAuth({
      config: { file: { alice: ['.*'] } },
      backends: new Map([['file', new FileAuthBackend(await fileBackendSettings({ '^filename': join(dir, 'users') }))]]),
      tokens: new TokenStore(join(dir, 'tokens')),
      tokenExpireMs: 60_000,
      expireOverride: false,
      permissiveAcl: false,
      // The limiter's clock stands still, so the whole flood falls in one window however slowly it runs.
      failureLog: new LogLimiter({ burst: 3, windowMs: 1000, now: () => 0 }),
      logger,
    })
    // The window's summary comes from its timer, which the test's clock drives. On the real one, a flood slower than
    // the 1 s window had the summary end the window mid-flood and three more lines logged: its failures are padded to
    // the slowest so far, so a slow first one on a loaded machine slows them all. Frozen, the padding waits for nothing.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    try {
      for (let n = 0; n < 20; n++)
        await expect(external.authenticate({ eauth: 'file', username: `nobody${n}`, password: 'x' }, '10.0.0.9')).rejects.toMatchObject({
          name: 'EauthAuthenticationError',
        })
      expect(lines.some((line) => line.includes('suppressed'))).toBe(false)
      await vi.advanceTimersByTimeAsync(1000)
    } finally {
      vi.useRealTimers()
    }
    expect(lines.filter((line) => line.includes('Authentication failure of type "eauth"'))).toHaveLength(3)
    expect(lines[0]).toContain('for user "nobody0" from 10.0.0.9 (file)')
    const summaries = lines.filter((line) => line.includes('suppressed'))
    expect(summaries).toHaveLength(1)
    expect(summaries[0]).toContain('17 failed-login warnings suppressed in the last 1 s (at most 3 logged per window)')
  })
})

describe.each(TRANSPORTS)('login limits over %s', (transport) => {
  it('after eauth_rate_limit_user wrong passwords the user is refused (mk_token and eauth credentials alike) with the retry time; another user still logs in; then the address limit refuses everyone from it', async () => {
    const { send } = await loginMaster(transport, { eauth_rate_limit_user: 3, eauth_rate_limit_address: 6 })
    for (let attempt = 0; attempt < 3; attempt++) expect(await send(login('alice', 'guess'))).toMatchObject({ refused: 'EauthAuthenticationError' })
    // Even the right password: the limit is checked before any hash, so hammering past it costs nothing.
    const limited = await send(login('alice', 'wonder'))
    expect(limited).toMatchObject({ refused: 'LoginRateLimitedError', context: { key: 'eauth_rate_limit_user', limit: 3 } })
    const retryAfter = (limited as { context: { retryAfter: number } }).context.retryAfter
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(60)
    const ping = {
      cmd: 'publish',
      tgt: '*',
      tgt_type: 'glob',
      fun: 'test.ping',
      arg: [],
      kwarg: {},
      ret: '',
      user: 'alice',
      eauth: 'file',
      username: 'alice',
      password: 'wonder',
    }
    expect(await send(ping)).toMatchObject({ refused: 'LoginRateLimitedError' })
    expect(await send(login('bob', 'builder'))).toMatchObject({ name: 'bob', token: expect.stringMatching(/^[0-9a-f]{64}$/) })
    // Three more failures (unknown users, each a dummy bcrypt) fill the address's six.
    for (const user of ['carol', 'dave', 'erin']) expect(await send(login(user, 'x'))).toMatchObject({ refused: 'EauthAuthenticationError' })
    expect(await send(login('bob', 'builder'))).toMatchObject({ refused: 'LoginRateLimitedError', context: { key: 'eauth_rate_limit_address', limit: 6 } })
  })

  it('while a storm of failed logins (unknown users and wrong passwords) runs, every job is answered, and every password hash is checked off the main thread', async () => {
    expect(existsSync(fileURLToPath(workerScript)), `${fileURLToPath(workerScript)} (run npm run build)`).toBe(true)
    const { master, events, address, send } = await loginMaster(transport, { eauth_rate_limit_user: 0, eauth_rate_limit_address: 0, eauth_hash_threads: 2 })
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const minion = await FakeMinion.start(transport, 'web1', address, join(master.opts.cachedir, 'm-web1'))
    await subscribers(1)
    expect(await minion.auth()).toEqual({ ok: true })

    const storm = { sent: 0, answered: 0, failed: 0, other: [] as unknown[] }
    const STORM = 48
    const attacker = async (): Promise<void> => {
      // Each attacker's first login names an unknown user (checked against the backend's dummy hash, at the cost of
      // the file's hashes), the rest guess alice's password (her cost-6 hash): both kinds go to the hashing threads,
      // and the cheap cost keeps the storm's hashing small, since its length comes from the failure padding.
      let unknown = true
      while (storm.sent < STORM) {
        storm.sent++
        const credentials = unknown ? login(`nobody${storm.sent}`, 'x') : login('alice', `guess${storm.sent}`)
        unknown = false
        // Failures are padded to the slowest so far (Salt's time_auth), queueing included: a generous failure bound.
        const reply = await send(credentials, 60_000)
        storm.answered++
        if ((reply as { refused?: string }).refused === 'EauthAuthenticationError') storm.failed++
        else storm.other.push(reply)
      }
    }
    const attackers = Promise.all(Array.from({ length: 8 }, attacker))

    // The jobs start once the storm is hashing, and finish before it does (what "while" means, in counts).
    await deadline(
      (async () => {
        while (master.passwordHashes.running === 0) await new Promise((resolve) => setTimeout(resolve, 10))
      })(),
      WAIT_MS,
      'the storm to reach the hashing threads',
    )
    const JOBS = 10
    let answered = 0
    for (let n = 1; n <= JOBS; n++) {
      const job = (await send({
        cmd: 'publish',
        tgt: 'web1',
        tgt_type: 'glob',
        fun: 'test.ping',
        arg: [],
        kwarg: {},
        ret: '',
        user: 'root',
        key: master.rootKey,
      })) as { jid: string }
      expect(minion.open(await minion.nthPublish(n))).toMatchObject({ jid: job.jid })
      expect(await minion.returnJob(job.jid)).toMatchObject({ ok: true })
      await events.next(`salt/job/${job.jid}/ret/web1`)
      answered++
    }
    expect(answered).toBe(JOBS)
    expect(storm.answered).toBeLessThan(STORM)
    await deadline(attackers, 120_000, 'the login storm to end')
    expect(storm.other).toEqual([])
    expect(storm.failed).toBe(STORM)
    const hashes = master.passwordHashes
    expect(hashes.hashed).toBe(STORM)
    expect(hashes.offThread).toBe(STORM)
    expect(hashes.refused).toBe(0)
  })

  it('beyond eauth_hash_backlog waiting checks a login is refused with LoginBusyError, and the pool never holds more', async () => {
    const { master, send } = await loginMaster(transport, {
      eauth_rate_limit_user: 0,
      eauth_rate_limit_address: 0,
      eauth_hash_threads: 1,
      eauth_hash_backlog: 2,
    })
    const replies = await deadline(
      Promise.all(Array.from({ length: 12 }, (_, n) => send(login(`nobody${n}`, 'x'), 60_000))),
      90_000,
      '12 logins at once to be answered',
    )
    const busy = replies.filter((reply) => (reply as { refused?: string }).refused === 'LoginBusyError')
    const failed = replies.filter((reply) => (reply as { refused?: string }).refused === 'EauthAuthenticationError')
    expect(busy.length + failed.length).toBe(12)
    expect(busy.length).toBeGreaterThan(0)
    expect(busy[0]).toMatchObject({ context: { key: 'eauth_hash_backlog', retryAfter: 1 } })
    expect(master.passwordHashes).toMatchObject({ hashed: failed.length, refused: busy.length, running: 0, waiting: 0 })
  })
})
