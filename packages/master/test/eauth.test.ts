import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdir, readdir, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import bcrypt from 'bcryptjs'
import md5crypt from 'apache-md5'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { ConfigError, defaultsFor, type MasterConfig } from '@brine/config'
import { RemoteError } from '@brine/core'
import {
  ExternalAuth,
  exprMatch,
  fileBackendSettings,
  FileAuthBackend,
  fillAuthList,
  Master,
  MemoryJobStore,
  TokenStore,
  verifyHtpasswd,
} from '../src/index.js'
import { addressOf, clearClient, FakeMinion, masterConfig, runCleanups, startMaster, stopNatsServer, tempDir, watchSubscribers } from './helpers.js'

afterAll(stopNatsServer)

afterEach(runCleanups)

const TRANSPORTS = ['zeromq', 'tcp', 'nats'] as const
const sha1 = (text: string): string => createHash('sha1').update(text).digest('base64')

describe('htpasswd hashes', () => {
  it('checks bcrypt ($2y$ as htpasswd -B writes it), Apache MD5 made by openssl, MD5-crypt and {SHA}; refuses schemes it cannot check', async () => {
    const bcrypt2y = bcrypt.hashSync('s3cret', 6).replace(/^\$2b\$/, '$2y$')
    const apr1 = execFileSync('openssl', ['passwd', '-apr1', 's3cret'], { encoding: 'utf8' }).trim()
    const md5 = execFileSync('openssl', ['passwd', '-1', 's3cret'], { encoding: 'utf8' }).trim()
    for (const hash of [bcrypt2y, apr1, md5, `{SHA}${sha1('s3cret')}`, md5crypt('s3cret')]) {
      expect(await verifyHtpasswd('s3cret', hash), hash).toBe(true)
      expect(await verifyHtpasswd('wrong', hash), hash).toBe(false)
    }
    const sha512crypt = execFileSync('openssl', ['passwd', '-6', 's3cret'], { encoding: 'utf8' }).trim()
    expect(await verifyHtpasswd('s3cret', sha512crypt)).toBeUndefined()
    expect(await verifyHtpasswd('s3cret', 's3cret')).toBeUndefined()
  })
})

describe('the file eauth backend', () => {
  async function backend(block: Record<string, unknown>, text: string): Promise<FileAuthBackend> {
    const file = join(await tempDir(), 'users')
    await writeFile(file, text)
    return new FileAuthBackend(await fileBackendSettings({ '^filename': file, ...block }))
  }

  it('reads text files: plaintext by default, a digest with ^hashtype, custom fields and separator', async () => {
    const plain = await backend({}, 'dean:goneFishing\ngene:OceanMan\n')
    expect(await plain.authenticate('dean', 'goneFishing')).toBe(true)
    expect(await plain.authenticate('gene', 'goneFishing')).toBe(false)
    expect(await plain.authenticate('nobody', 'goneFishing')).toBe(false)
    const digest = createHash('md5').update('trey-pass').digest('hex')
    const legacy = await backend({ '^hashtype': 'md5', '^field_separator': '|', '^username_field': 2, '^password_field': 3 }, `46|trey|${digest}\n555|mike|x\n`)
    expect(await legacy.authenticate('trey', 'trey-pass')).toBe(true)
    expect(await legacy.authenticate('trey', 'other')).toBe(false)
  })

  it('reads htpasswd files (the first line naming the user decides) and htdigest files of one realm', async () => {
    const ht = await backend({ '^filetype': 'htpasswd' }, `alice:${bcrypt.hashSync('wonder', 6)}\nbob:{SHA}${sha1('builder')}\n`)
    expect(await ht.authenticate('alice', 'wonder')).toBe(true)
    expect(await ht.authenticate('bob', 'builder')).toBe(true)
    expect(await ht.authenticate('bob', 'wonder')).toBe(false)
    expect(await ht.authenticate('carol', 'wonder')).toBe(false)
    const hd = createHash('md5').update('cory:Brine:pw').digest('hex')
    const digest = await backend({ '^filetype': 'htdigest', '^realm': 'Brine' }, `cory:Other:${hd}\ncory:Brine:${hd}\n`)
    expect(await digest.authenticate('cory', 'pw')).toBe(true)
    expect(await digest.authenticate('cory', 'px')).toBe(false)
  })

  it("checks an unknown user against a dummy bcrypt hash at the cost of the file's entries, which no password matches", async () => {
    const file = join(await tempDir(), 'htpasswd')
    const hashes: string[] = []
    const recording = { compareBcrypt: async (password: string, hash: string) => (hashes.push(hash), bcrypt.compare(password, hash)) }
    const settings = async (text: string) => {
      await writeFile(file, text)
      return new FileAuthBackend(await fileBackendSettings({ '^filename': file, '^filetype': 'htpasswd' }), undefined, recording)
    }
    const cost6 = await settings(`bob:{SHA}${sha1('builder')}\nalice:${bcrypt.hashSync('wonder', 6)}\n`)
    expect(await cost6.authenticate('carol', 'wonder')).toBe(false)
    expect(await cost6.authenticate('alice', 'wonder')).toBe(true)
    expect(hashes.map((hash) => bcrypt.getRounds(hash))).toEqual([6, 6])
    const noBcrypt = await settings(`bob:{SHA}${sha1('builder')}\n`)
    expect(await noBcrypt.authenticate('carol', '')).toBe(false)
    expect(bcrypt.getRounds(hashes[2]!)).toBe(10)
    expect(hashes[0]).not.toBe(hashes[2])
  })

  it('refuses bad settings with a ConfigError naming the key', async () => {
    const dir = await tempDir()
    const missing = await fileBackendSettings({}).catch((error: unknown) => error)
    expect(missing).toBeInstanceOf(ConfigError)
    expect((missing as ConfigError).key).toBe('external_auth.file.^filename')
    const absent = await fileBackendSettings({ '^filename': join(dir, 'nope') }).catch((error: unknown) => error)
    expect((absent as Error).message).toMatch(/^external_auth\.file\.\^filename names .*nope, which cannot be read: ENOENT/)
    await writeFile(join(dir, 'u'), '')
    const realm = await fileBackendSettings({ '^filename': join(dir, 'u'), '^filetype': 'htdigest' }).catch((error: unknown) => error)
    expect((realm as Error).message).toBe('external_auth.file.^realm is required for ^filetype htdigest')
    const type = await fileBackendSettings({ '^filename': join(dir, 'u'), '^filetype': 'ldif' }).catch((error: unknown) => error)
    expect((type as Error).message).toBe('external_auth.file.^filetype must be one of text, htpasswd, htdigest, got "ldif"')
  })
})

describe('fill_auth_list (Salt rules)', () => {
  const block = {
    '^filename': '/x',
    alice: ['test.*'],
    'web_*': [{ 'web*': ['cmd.run'] }],
    'ops-[0-9]+': ['@runner'],
    'admins%': ['@wheel'],
    '*': ['grains.items'],
  }

  it("sums the user's keys (exact, glob or regex) and groups'; '*' only when no user key matched; ^settings are no users", () => {
    expect(fillAuthList(block, 'alice', [], false)).toEqual(['test.*'])
    expect(fillAuthList(block, 'web_bob', ['admins'], false)).toEqual([{ 'web*': ['cmd.run'] }, '@wheel'])
    expect(fillAuthList(block, 'ops-12', [], false)).toEqual(['@runner'])
    expect(fillAuthList(block, 'mallory', [], false)).toEqual(['grains.items'])
    expect(fillAuthList(block, 'mallory', ['admins'], false)).toEqual(['@wheel', 'grains.items'])
    expect(fillAuthList(block, '^filename', [], false)).toEqual(['grains.items'])
  })

  it("with permissive_acl, '*' adds its entries for every user", () => {
    expect(fillAuthList(block, 'alice', [], true)).toEqual(['test.*', 'grains.items'])
  })

  it('matches names as Salt expr_match does', () => {
    expect(exprMatch('alice', 'alice')).toBe(true)
    expect(exprMatch('al*', 'alice')).toBe(true)
    expect(exprMatch('a.+e', 'alice')).toBe(true)
    expect(exprMatch('a.+', 'bob')).toBe(false)
    expect(exprMatch('([', 'alice')).toBe(false)
  })
})

describe('TokenStore', () => {
  it('makes 64-hex tokens in 0600 files, finds live ones, removes expired, revoked and malformed ones', async () => {
    const dir = join(await tempDir(), 'tokens')
    const store = new TokenStore(dir)
    const now = Date.now() / 1000
    const live = await store.create({ start: now, expire: now + 60, name: 'alice', eauth: 'file' })
    expect(live.token).toMatch(/^[0-9a-f]{64}$/)
    expect((await stat(join(dir, live.token))).mode & 0o777).toBe(0o600)
    expect((await stat(dir)).mode & 0o777).toBe(0o700)
    expect(await store.get(live.token)).toEqual(live)
    const old = await store.create({ start: now - 120, expire: now - 60, name: 'bob', eauth: 'file' })
    expect(await store.get(old.token)).toBeUndefined()
    expect(await readdir(dir)).toEqual([live.token])
    // Only hex names ever touch the directory.
    expect(await store.get('../../etc/passwd')).toBeUndefined()
    expect(await store.remove(live.token)).toBe(true)
    expect(await store.get(live.token)).toBeUndefined()
    await writeFile(join(dir, 'ab'.repeat(32)), 'not json')
    expect(await store.get('ab'.repeat(32))).toBeUndefined()
    expect(await readdir(dir)).toEqual([])
  })
})

describe('external_auth at start', () => {
  it('refuses a backend Brine does not implement, naming it and what is supported', async () => {
    const dir = await tempDir()
    const opts = await masterConfig(dir, { external_auth: { pam: { alice: ['.*'] } } })
    const master = new Master(opts, { jobs: new MemoryJobStore() })
    const error = await master.start().catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as Error).message).toBe("external_auth.pam: the 'pam' eauth backend is not supported by Brine (supported: file)")
  })

  it('pads every failed login to about the slowest failure so far (Salt time_auth)', async () => {
    const dir = await tempDir()
    await writeFile(join(dir, 'users'), 'alice:pw\n')
    const external = await ExternalAuth.fromConfig({
      ...defaultsFor('master'),
      external_auth: { file: { '^filename': join(dir, 'users'), alice: ['.*'] } },
      token_dir: join(dir, 't'),
    } as unknown as MasterConfig)
    const ok = await external.authenticate({ eauth: 'file', username: 'alice', password: 'pw' })
    expect(ok).toMatchObject({ name: 'alice', eauth: 'file', perms: ['.*'] })
    for (const load of [
      { eauth: 'file', username: 'alice', password: 'no' },
      { eauth: 'file', username: 'eve', password: 'pw' },
      { eauth: 'pam', username: 'alice', password: 'pw' },
    ]) {
      const error = await external.authenticate(load).catch((caught: unknown) => caught)
      expect(error).toMatchObject({ name: 'EauthAuthenticationError', user: load.username })
    }
  })
})

async function eauthMaster(transport: string, extra: Record<string, unknown> = {}) {
  const dir = await tempDir()
  await writeFile(join(dir, 'htpasswd'), `alice:${bcrypt.hashSync('wonder', 6)}\nbob:{SHA}${sha1('builder')}\n`)
  const { master, events } = await startMaster(dir, {
    transport,
    auto_accept: true,
    token_dir: join(dir, 'tokens'),
    external_auth: {
      file: {
        '^filename': join(dir, 'htpasswd'),
        '^filetype': 'htpasswd',
        alice: [{ 'web*': ['test.*'] }, '@jobs', { '@wheel': ['key\\.list_all'] }],
        bob: ['.*'],
      },
    },
    ...extra,
  })
  const address = addressOf(master)
  const client = await clearClient(transport, address)
  const send = (load: Record<string, unknown>): Promise<unknown> =>
    client.send({ enc: 'clear', load }).catch((error: unknown) => {
      if (error instanceof RemoteError) return { refused: error.remoteName, message: error.message }
      throw error
    })
  return { dir, master, events, address, send }
}

const ping = { cmd: 'publish', tgt: 'web1', tgt_type: 'glob', fun: 'test.ping', arg: [], kwarg: {}, ret: '', user: 'root' }

describe.each(TRANSPORTS)('eauth over %s', (transport) => {
  it('mk_token makes a token the master then checks on publish, runner and wheel with the user ACL; rm_token revokes it', async () => {
    const { master, events, address, send } = await eauthMaster(transport)
    const subscribers = watchSubscribers(master.endpoints[0]!.publish)
    const minions = await Promise.all(['web1', 'db1'].map((id) => FakeMinion.start(transport, id, address, join(master.opts.cachedir, `m-${id}`))))
    await subscribers(2)
    for (const minion of minions) expect(await minion.auth()).toEqual({ ok: true })

    const made = (await send({ cmd: 'mk_token', eauth: 'file', username: 'alice', password: 'wonder' })) as Record<string, unknown>
    expect(made).toMatchObject({ name: 'alice', eauth: 'file', perms: [{ 'web*': ['test.*'] }, '@jobs', { '@wheel': ['key\\.list_all'] }] })
    expect(made['token']).toMatch(/^[0-9a-f]{64}$/)
    expect((made['expire'] as number) - (made['start'] as number)).toBeCloseTo(43200, 3)
    const token = made['token'] as string

    const allowed = (await send({ ...ping, token })) as { jid: string; minions: string[] }
    expect(allowed.minions).toEqual(['web1'])
    expect((await events.next(`salt/job/${allowed.jid}/new`)).data['user']).toBe('alice')
    expect(await send({ ...ping, fun: 'cmd.run', arg: ['id'], token })).toMatchObject({
      refused: 'PermissionDeniedError',
      message: expect.stringContaining('user "alice" may not run "cmd.run" on web1'),
    })
    expect(await send({ ...ping, tgt: 'db1', token })).toMatchObject({
      refused: 'PermissionDeniedError',
      message: expect.stringContaining('user "alice" may not run "test.ping" on db1'),
    })
    // preview_target: the minions a publish would expect, under the same check; nothing is published.
    const listJobs = { cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {}, token }
    const jobsBefore = Object.keys(((await send(listJobs)) as { return: object }).return)
    const preview = { cmd: 'preview_target', tgt: 'web*', tgt_type: 'glob', fun: 'test.ping', user: 'root' }
    expect(await send({ ...preview, token })).toEqual({ minions: ['web1'] })
    expect(await send({ ...preview, tgt: '*', token })).toMatchObject({
      refused: 'PermissionDeniedError',
      message: expect.stringContaining('user "alice" may not run "test.ping" on db1'),
    })
    expect(await send({ ...preview, tgt: 'os:Debian', tgt_type: 'grain', key: master.rootKey })).toEqual({ minions: ['db1', 'web1'] })
    expect(await send({ ...preview, fun: '', token })).toMatchObject({ refused: 'PayloadError', message: expect.stringContaining("field 'fun'") })
    expect(Object.keys(((await send(listJobs)) as { return: object }).return)).toEqual(jobsBefore)
    expect(await send({ cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {}, token })).toMatchObject({ success: true })
    expect(await send({ cmd: 'runner', fun: 'manage.down', arg: [], kwarg: {}, token })).toMatchObject({ refused: 'PermissionDeniedError' })
    expect(await send({ cmd: 'wheel', fun: 'key.list_all', token })).toMatchObject({ return: { minions: ['db1', 'web1'] }, user: 'alice' })
    expect(await send({ cmd: 'wheel', fun: 'key.delete', match: 'db1', token })).toMatchObject({
      refused: 'PermissionDeniedError',
      message: expect.stringContaining('user "alice" may not run wheel "key.delete"'),
    })

    expect(await send({ cmd: 'get_token', token })).toMatchObject({ name: 'alice', token, perms: made['perms'] })
    expect(await send({ cmd: 'rm_token', token })).toEqual({ removed: true })
    expect(await send({ cmd: 'get_token', token })).toEqual({})
    expect(await send({ ...ping, token })).toMatchObject({
      refused: 'TokenAuthenticationError',
      message: expect.stringContaining('unknown, expired or revoked'),
    })
  })

  it('eauth credentials work without a token; bad ones, unknown backends and expired tokens are authentication failures', async () => {
    const { master, send } = await eauthMaster(transport, { token_expire: 0.05 })
    expect(await send({ cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {}, eauth: 'file', username: 'bob', password: 'builder' })).toMatchObject({
      refused: 'PermissionDeniedError',
      message: expect.stringContaining('user "bob" may not run runner "jobs.list_jobs"'),
    })
    expect(await send({ ...ping, eauth: 'file', username: 'bob', password: 'builder' })).toEqual({ jid: expect.any(String), minions: [] })
    expect(await send({ ...ping, eauth: 'file', username: 'bob', password: 'nope' })).toMatchObject({
      refused: 'EauthAuthenticationError',
      message: expect.stringMatching(/: Authentication failure of type "eauth" occurred for user bob\.$/),
    })
    expect(await send({ cmd: 'mk_token', eauth: 'pam', username: 'bob', password: 'builder' })).toMatchObject({
      refused: 'EauthAuthenticationError',
      message: expect.stringContaining('not configured'),
    })
    const made = (await send({ cmd: 'mk_token', eauth: 'file', username: 'bob', password: 'builder' })) as { token: string; expire: number }
    // token_expire 0.05 s: wait for the expiry by the token's own clock, bounded.
    const until = made.expire * 1000
    while (Date.now() <= until) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(await send({ ...ping, token: made.token })).toMatchObject({ refused: 'TokenAuthenticationError' })
    expect(await readdir(String(master.opts.token_dir))).toEqual([])
  })

  it('honours token_expire_user_override for the users it names', async () => {
    const { send } = await eauthMaster(transport, { token_expire_user_override: { file: ['alice'] } })
    const alice = (await send({ cmd: 'mk_token', eauth: 'file', username: 'alice', password: 'wonder', token_expire: 60 })) as { start: number; expire: number }
    expect(alice.expire - alice.start).toBeCloseTo(60, 3)
    const bob = (await send({ cmd: 'mk_token', eauth: 'file', username: 'bob', password: 'builder', token_expire: 60 })) as { start: number; expire: number }
    expect(bob.expire - bob.start).toBeCloseTo(43200, 3)
  })

  it('runner and wheel with asynchronous answer {tag, jid} at once and fire the return on the bus; fire_event is for the root key only', async () => {
    const { master, events, send } = await eauthMaster(transport)
    const made = (await send({ cmd: 'mk_token', eauth: 'file', username: 'alice', password: 'wonder' })) as { token: string }
    const runner = (await send({ cmd: 'runner', fun: 'jobs.list_jobs', arg: [], kwarg: {}, token: made.token, asynchronous: true })) as {
      tag: string
      jid: string
    }
    expect(runner.tag).toBe(`salt/run/${runner.jid}`)
    expect((await events.next(`salt/run/${runner.jid}/ret`)).data).toMatchObject({ success: true, user: 'alice', fun: 'runner.jobs.list_jobs' })
    expect(await send({ cmd: 'runner', fun: 'manage.down', arg: [], kwarg: {}, token: made.token, asynchronous: true })).toMatchObject({
      refused: 'PermissionDeniedError',
    })
    const wheel = (await send({ cmd: 'wheel', fun: 'key.list_all', token: made.token, asynchronous: true })) as { tag: string; jid: string }
    expect(wheel.tag).toBe(`salt/wheel/${wheel.jid}`)
    expect((await events.next(`salt/wheel/${wheel.jid}/ret`)).data).toMatchObject({ success: true, user: 'alice', return: { minions: [] } })

    expect(await send({ cmd: 'fire_event', tag: 'salt/netapi/hook/x', data: { a: 1 }, token: made.token })).toMatchObject({ refused: 'PermissionDeniedError' })
    expect(await send({ cmd: 'fire_event', tag: 'salt/netapi/hook/x', data: { a: 1 }, key: master.rootKey })).toEqual({ fired: true })
    expect((await events.next('salt/netapi/hook/x')).data).toMatchObject({ a: 1 })
    expect(await send({ cmd: 'fire_event', tag: 'salt/job/1/ret/web1', data: {}, key: master.rootKey })).toMatchObject({ refused: 'MalformedRequestError' })
  })
})

describe('token pruning', () => {
  it("the master's maintenance round removes expired tokens", async () => {
    const dir = await tempDir()
    await mkdir(join(dir, 'tokens'), { recursive: true })
    await writeFile(join(dir, 'users'), 'alice:pw\n')
    const { master } = await startMaster(dir, { token_dir: join(dir, 'tokens'), external_auth: { file: { '^filename': join(dir, 'users'), alice: ['.*'] } } })
    const store = new TokenStore(join(dir, 'tokens'))
    const now = Date.now() / 1000
    const live = await store.create({ start: now, expire: now + 600, name: 'alice', eauth: 'file' })
    await store.create({ start: now - 10, expire: now - 5, name: 'alice', eauth: 'file' })
    expect(await master.pruneTokens()).toBe(1)
    expect(await readdir(join(dir, 'tokens'))).toEqual([live.token])
  })
})
